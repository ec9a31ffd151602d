import pytest
import torch

from mlsysrepro.sparsity.gemm_timing import compact_stages, dense_stages, time_stages
from mlsysrepro.sparsity.masks import kept_indices, mask_from_indices


@pytest.mark.parametrize("period", [1, 2, 5])
def test_the_compacted_gemms_compute_what_the_masked_dense_ones_compute(period):
    g = torch.Generator().manual_seed(0)
    x, w_t, dy = torch.randn(5, 4, 12, generator=g), torch.randn(12, 7, generator=g), torch.randn(5, 4, 7, generator=g)
    indices = kept_indices(5, 12, 0.5, g, period)
    mask = mask_from_indices(indices, 12, period=period, steps=5)
    dense, compact = dense_stages(x, mask, w_t, dy), compact_stages(x, indices, w_t, dy, scale=2.0, period=period)
    assert torch.allclose(dense["forward"]().view(5, 4, 7), compact["forward"](), atol=1e-5)
    assert torch.allclose(dense["backward-data"](), compact["backward-data"](), atol=1e-5)
    assert torch.allclose(dense["backward-weight"](), compact["backward-weight"](), atol=1e-5)


def test_time_stages_reports_every_stage_with_the_ideal_speedup():
    rows = time_stages(steps=4, batch=3, hidden=20, out_dim=8, p=0.5, repeats=2)
    assert [r["stage"] for r in rows] == ["forward", "backward-data", "backward-weight"]
    assert all(r["ideal_speedup"] == 2.0 and r["dense_s"] > 0 and r["compact_s"] > 0 for r in rows)
