import pytest
import torch

from mlsysrepro.sparsity.compaction import STAGE_FORMS
from mlsysrepro.sparsity.gemm_timing import stage_calls, time_stages
from mlsysrepro.sparsity.masks import kept_indices, mask_from_indices


@pytest.mark.parametrize("period", [1, 2, 5])
def test_every_form_of_every_stage_computes_the_masked_dense_product(period):
    """Against the masked product written out here, in float64: forward (X m) W^T, backward-data (dY W) m,
    backward-weight (X m)^T dY (period 2 leaves a shorter last draw)."""
    g = torch.Generator().manual_seed(0)
    x, w_t, dy = (torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((5, 4, 12), (12, 7), (5, 4, 7)))
    indices = kept_indices(5, 12, 0.5, g, period)
    mask = mask_from_indices(indices, 12, torch.float64, period=period, steps=5)
    expected = {"forward": (x * mask) @ w_t, "backward-data": (dy @ w_t.t()) * mask,
                "backward-weight": (x * mask).reshape(-1, 12).t() @ dy.reshape(-1, 7)}
    calls = stage_calls(x, indices, w_t, dy, scale=2.0, period=period)
    for stage, forms in calls.items():
        assert list(forms) == list(STAGE_FORMS)
        for form, call in forms.items():
            assert torch.allclose(call(), expected[stage], atol=1e-12, rtol=0), (stage, form)


def test_time_stages_reports_every_stage_and_form_with_the_ideal_speedup():
    rows = time_stages(steps=4, batch=3, hidden=20, out_dim=8, p=0.5, repeats=2)
    assert [(r["stage"], r["form"]) for r in rows][:3] == [("forward", "dense"), ("forward", "per-draw"),
                                                           ("forward", "batched")]
    assert len(rows) == 9 and all(r["ideal_speedup"] == 2.0 and r["seconds"] > 0 for r in rows)
    assert all(r["speedup"] == 1.0 for r in rows if r["form"] == "dense")
