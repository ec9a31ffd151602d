import pytest
import torch

from mlsysrepro.ddl import models


def test_resnet18_has_torchvisions_gradient_tensors_and_layers():
    f = models.features(models.build("resnet18", width=8))
    # 20 convolutions (17 + 3 projections) and the classifier; 20 BatchNorms of 2 tensors each
    assert f["layers"] == 21 and f["gradient_tensors"] == 20 + 40 + 2


def test_ablations_separate_layers_from_tensors():
    base = models.features(models.build("resnet50", width=8))
    nobn = models.features(models.build("nobn_resnet50", width=8))
    nores = models.features(models.build("nores_resnet50", width=8))
    assert nobn["layers"] == base["layers"] and nobn["gradient_tensors"] < base["gradient_tensors"]
    assert nores["layers"] == base["layers"] - 4  # one projection per stage is gone
    assert nores["gradient_tensors"] == base["gradient_tensors"] - 4 * 3


@pytest.mark.parametrize("name", ["resnet10", "resnet152", "nobn_resnet34", "vgg19", "lstm"])
def test_models_train_on_their_synthetic_batches(name):
    model = models.build(name, width=4)
    x, y = models.synthetic_batch(name, 2, torch.Generator().manual_seed(0), seq_len=5)
    loss = models.loss_fn(name, model(x), y)
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.parameters())
    assert models.training_flops(name, model, 2) > 0


def test_deeper_resnets_have_more_of_everything():
    feats = [models.features(models.build(f"resnet{d}", width=8)) for d in (10, 18, 34, 50, 101, 152)]
    for key in ("layers", "gradient_tensors"):
        assert [f[key] for f in feats] == sorted(f[key] for f in feats)


def test_unknown_models_are_named():
    with pytest.raises(ValueError, match="model must be resnet<depth>"):
        models.build("alexnet")
    with pytest.raises(ValueError, match=r"depth must be one of \[10, 12, 16, 18, 34, 50, 101, 152\]"):
        models.build("resnet20")
