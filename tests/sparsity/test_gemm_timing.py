import pytest
import torch

from mlsysrepro.sparsity import gemm_timing
from mlsysrepro.sparsity.compaction import KERNELS, Drop, masked_projection
from mlsysrepro.sparsity.forms import STAGE_FORMS, stage_calls
from mlsysrepro.sparsity.gemm_timing import fastest_forms, time_stages, tuned_shapes
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


def fake_timer(fastest: dict[str, str], calls: list):
    """A stand-in for time_stages in which ``fastest[stage]`` is the fastest form of each stage (ties elsewhere)."""

    def timer(steps, batch, hidden, out_dim, p, period, repeats, dtype, device):
        calls.append((steps, batch, hidden, out_dim, p, period))
        return [{"stage": stage, "form": form, "seconds": 1.0 if form == fastest[stage] else 2.0}
                for stage in fastest for form in STAGE_FORMS]

    return timer


def test_fastest_forms_picks_each_stages_fastest_form_once_per_shape(monkeypatch):
    monkeypatch.setattr(gemm_timing, "_FASTEST", {})
    calls = []
    timer = fake_timer({"forward": "batched", "backward-data": "dense", "backward-weight": "per-draw"}, calls)
    assert fastest_forms(5, 4, 12, 7, 6, 1, timer=timer) == ("batched", "dense", "per-draw")
    assert calls == [(5, 4, 12, 7, 0.5, 1)]  # the timer is asked for k = 6 of 12 kept: p = 0.5
    assert fastest_forms(5, 4, 12, 7, 6, 1, timer=timer) == ("batched", "dense", "per-draw") and len(calls) == 1
    other = fake_timer({"forward": "dense", "backward-data": "per-draw", "backward-weight": "dense"}, calls)
    assert fastest_forms(5, 8, 12, 7, 6, 1, timer=other) == ("dense", "per-draw", "dense") and len(calls) == 2
    assert [(row["batch"], row["forward"]) for row in tuned_shapes()] == [(4, "batched"), (8, "dense")]


def test_a_tie_goes_to_the_form_listed_first(monkeypatch):
    monkeypatch.setattr(gemm_timing, "_FASTEST", {})

    def level(*args, **kwargs):
        return [{"stage": stage, "form": form, "seconds": 1.0} for stage in ("forward", "backward-data",
                                                                             "backward-weight") for form in STAGE_FORMS]

    assert fastest_forms(3, 2, 10, 4, 5, 1, timer=level) == (STAGE_FORMS[0],) * 3


def test_the_auto_kernel_runs_the_forms_measured_fastest(monkeypatch):
    """``auto`` resolves, per projection shape, to the Kernel of the forms fastest_forms picked."""
    monkeypatch.setattr(gemm_timing, "_FASTEST", {})
    x, w = torch.randn(4, 3, 10, dtype=torch.float64), torch.randn(10, 6, dtype=torch.float64)
    indices = kept_indices(4, 10, 0.5, torch.Generator().manual_seed(0))
    key = (4, 3, 10, 6, 5, 1, torch.float64, "cpu")
    gemm_timing._FASTEST[key] = ("dense", "batched", "per-draw")
    kernel = KERNELS["auto"].resolve(x, w, indices, 1)
    assert (kernel.forward, kernel.backward_data, kernel.backward_weight) == ("dense", "batched", "per-draw")
    out = masked_projection(x, w, None, Drop(indices=indices, scale=2.0, kernel="auto"))
    mask = mask_from_indices(indices, 10, torch.float64, steps=4)
    assert torch.allclose(out, (x * mask) @ w, atol=1e-12, rtol=0)
