"""The model zoo: disjoint splits of real digits, models that learn, latencies measured per batch."""

import numpy as np
import pytest

from mlsysrepro.serving.zoo import MODELS, SmallCNN, Zoo, build_zoo
from mlsysrepro.vision.digits import load_split


def test_splits_are_disjoint_shuffled_and_sized():
    split = load_split("digits", 0, 500, 200, 300)
    assert split.x_train.shape == (500, 1, 8, 8) and split.y_test.shape == (300,)
    assert split.x_train.dtype == np.float32 and 0 <= split.x_train.min() and split.x_train.max() <= 1
    rows = [tuple(x.ravel()) for x in np.concatenate([split.x_train, split.x_val, split.x_test])]
    assert len(set(rows)) > 0.95 * len(rows)
    assert not np.array_equal(split.y_train, load_split("digits", 1, 500, 200, 300).y_train)
    with pytest.raises(ValueError, match="dataset must be one of"):
        load_split("cifar", 0, 1, 1, 1)
    with pytest.raises(ValueError, match="at most 1797"):
        load_split("digits", 0, 1500, 200, 300)


def test_a_small_zoo_learns_and_is_timed_at_every_batch():
    split = load_split("digits", 0, 800, 300, 300)
    zoo = build_zoo(split, ("logistic_regression", "knn", "cnn_4"), seed=0, epochs=4, batches=(1, 8), repeats=3)
    assert zoo.names == ("logistic_regression", "knn", "cnn_4")
    assert zoo.test_predictions.shape == (3, 300) and zoo.latency_ms.shape == (3, 2)
    assert np.all(zoo.test_accuracy > 0.5), "every model beats chance (10 %) by far"
    assert np.all(zoo.latency_ms > 0) and np.all(zoo.latency_low_ms <= zoo.latency_high_ms)
    assert zoo.latency(8).shape == (3,)
    with pytest.raises(ValueError, match="batch must be one of"):
        zoo.latency(32)
    again = Zoo.from_dict(zoo.to_dict())
    assert again.names == zoo.names and np.array_equal(again.val_predictions, zoo.val_predictions)


def test_build_zoo_rejects_unknown_models_and_oversized_batches():
    split = load_split("digits", 0, 100, 50, 20)
    with pytest.raises(ValueError, match="models must be a non-empty subset"):
        build_zoo(split, ("alexnet",))
    with pytest.raises(ValueError, match="batches must be at most"):
        build_zoo(split, ("knn",), batches=(64,))
    assert len(MODELS) == 12


def test_small_cnns_take_any_image_size():
    import torch

    for side in (8, 28):
        assert SmallCNN(4)(torch.zeros(2, 1, side, side)).shape == (2, 10)
