"""DLRM's shapes, the CPU variants' sums, and the GPU model's bounds and fit."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mlsysrepro.recsys import stage
from mlsysrepro.recsys.dlrm import DLRM
from mlsysrepro.recsys.gpu_model import A100_40GB, Kernel, fit_latency_scale, stage_seconds


def test_dlrm_forward_shapes_and_interaction_width():
    model = DLRM(dense_features=13, bottom=[32, 16], tables=3, rows=50, dim=16, top=[8, 1])
    indices, offsets = torch.randint(0, 50, (3, 20)), torch.tensor([0, 5, 12, 15])
    assert model(torch.randn(4, 13), indices, offsets).shape == (4,)
    assert model.top[0].in_features == 16 + 6  # the bottom vector and the 4-choose-2 dot products
    with pytest.raises(ValueError, match="bottom must end at dim"):
        DLRM(13, [32, 8], 3, 50, 16, [8, 1])


def test_every_cpu_variant_pools_the_same_sums():
    weights = stage.make_weights(2, 1000, 8, seed=0)
    indices = torch.randint(0, 1000, (600,), generator=torch.Generator().manual_seed(1))
    offsets = torch.arange(0, 600, 30)
    calls = stage.stage_calls(weights, indices, offsets, hot=torch.arange(100, 200))
    reference = [F.embedding_bag(indices, w, offsets, mode="sum") for w in weights]
    for name, call in calls.items():
        for got, want in zip(call(), reference):
            assert torch.allclose(got, want, atol=1e-5), name


def test_sort_within_bags_keeps_each_bag_its_rows():
    indices, offsets = torch.tensor([5, 1, 3, 9, 2]), torch.tensor([0, 3])
    assert stage.sort_within_bags(indices, offsets).tolist() == [1, 3, 5, 2, 9]


def test_hot_first_puts_the_hot_rows_at_the_start():
    new_id = stage.hot_first_permutation(10, torch.tensor([7, 3]))
    assert sorted(new_id[[7, 3]].tolist()) == [0, 1]
    assert sorted(new_id.tolist()) == list(range(10))


def test_time_stage_refuses_an_unknown_variant():
    with pytest.raises(ValueError, match="variants must be among"):
        stage.time_stage([torch.zeros(4, 2)], [(torch.tensor([0]), torch.tensor([0]))], torch.tensor([0]), 1,
                         ("fast",))


def test_the_model_is_latency_bound_at_low_occupancy_and_prefetching_helps_only_there():
    lines = 1e6
    low_occupancy = stage_seconds(lines, 0.9, Kernel(128), A100_40GB)
    assert low_occupancy["bound"] == "latency"
    prefetched = stage_seconds(lines, 0.9, Kernel(128, distance=2), A100_40GB)
    assert prefetched["seconds"] == pytest.approx(low_occupancy["seconds"] / 2)
    missing = stage_seconds(lines, 0.0, Kernel(32), A100_40GB)
    assert missing["bound"] == "dram"
    assert stage_seconds(lines, 0.0, Kernel(32, distance=4), A100_40GB)["seconds"] == missing["seconds"]


def test_the_fit_reproduces_the_slowdown_it_is_given():
    from dataclasses import replace

    kernel = Kernel(32)
    scale = fit_latency_scale(0.9, 0.1, 1e6, kernel, A100_40GB, 3.2)
    fitted = replace(A100_40GB, latency_scale=scale)
    ratio = stage_seconds(1e6, 0.1, kernel, fitted)["seconds"] / stage_seconds(1e6, 0.9, kernel, fitted)["seconds"]
    assert ratio == pytest.approx(3.2, rel=1e-6)
    with pytest.raises(ValueError, match="slowdown must be within"):
        fit_latency_scale(0.9, 0.1, 1e6, kernel, A100_40GB, 50.0)


def test_fbgemm_status_says_why_when_it_cannot_run():
    status = stage.fbgemm_status()
    assert status == "available" or "fbgemm_gpu" in status


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_our_cuda_kernels_equal_torchs_embedding_bag():
    from mlsysrepro.recsys.cuda_kernels import Kernels

    weight = torch.randn(1000, 128, device="cuda")
    indices = torch.randint(0, 1000, (4096,), device="cuda")
    offsets = torch.arange(0, 4096, 64, device="cuda")
    want = F.embedding_bag(indices, weight, offsets, mode="sum")
    for cap in (None, 42):
        kernels = Kernels(cap)
        for distance in (0, 2, 4, 8):
            assert torch.allclose(kernels.bag(weight, indices, offsets, distance), want, atol=1e-3)
    np.testing.assert_allclose(Kernels().bag(weight, indices, offsets, 0, "mean").cpu(),
                               F.embedding_bag(indices, weight, offsets, mode="mean").cpu(), atol=1e-4)
