"""The DLRM-on-GPUs claim measurements on hand-made frames, and the GPU claims with and without GPU numbers."""

import numpy as np
import pandas as pd
import pytest

from mlsysrepro.core.claims import verdict
from mlsysrepro.papers import dlrm_gpu

CLAIMS = {claim.id: claim for claim in dlrm_gpu.CLAIMS}


def sweep(slowdowns: dict[tuple[int, int, int], list[float]]) -> pd.DataFrame:
    return pd.DataFrame([dict(batch=b, pooling=p, dim=d, round=r, high=1.0, random=s, slowdown=s)
                         for (b, p, d), values in slowdowns.items() for r, s in enumerate(values)])


def test_c1_holds_when_random_is_slower_on_most_settings_and_fails_when_not():
    slow = sweep({(256, 20, 128): [1.8, 1.9, 1.85], (2048, 150, 128): [2.9, 3.0, 3.1], (2048, 150, 32): [1.5, 1.6, 1.4]})
    assert verdict(CLAIMS["C1"], dlrm_gpu.slowdown_over_settings(slow))[0] == "holds"
    flat = sweep({(256, 20, 128): [0.9, 0.95, 0.92], (2048, 150, 128): [0.8, 0.85, 0.9], (2048, 150, 32): [2, 2.1, 2]})
    assert verdict(CLAIMS["C1"], dlrm_gpu.slowdown_over_settings(flat))[0] == "fails"


def test_c3_reads_the_share_per_trace():
    split = pd.DataFrame([dict(trace=t, round=r, share=s) for t, s in (("high", 0.7), ("medium", 0.75), ("low", 0.8),
                                                                               ("random", 0.85)) for r in range(3)])
    split["share"] += np.tile([0.0, 0.01, -0.01], 4)
    measured = dlrm_gpu.embedding_share(split)
    assert measured.per_setting["low"] == pytest.approx(0.8)
    assert verdict(CLAIMS["C3"], measured)[0] == "holds"
    split["share"] = 0.2
    assert verdict(CLAIMS["C3"], dlrm_gpu.embedding_share(split))[0] == "fails"


def test_gpu_claims_are_not_testable_without_gpu_numbers_and_quote_the_model(monkeypatch):
    monkeypatch.setattr(dlrm_gpu.gpu_results, "section", lambda name: None)
    models = {mapping: {"frame": pd.DataFrame([dict(trace="high", variant="pinning", speedup=speedup)])}
              for mapping, speedup in (("modulo", 1.3), ("hashed_half", 1.1))}
    measured = dlrm_gpu.gpu_claim("C6", models)
    assert "predicts high 1.30x (modulo L2 map); high 1.10x (hashed_half L2 map)" in measured.not_testable
    assert verdict(CLAIMS["C6"], measured)[0] == "not testable here"
    assert "fitted" in dlrm_gpu.gpu_claim("C2", models).not_testable


def test_gpu_claims_read_committed_gpu_numbers(monkeypatch):
    stage = {v: {"high": [1.0, 1.0, 1.0], "random": [3.0, 3.1, 2.9]} for v in dlrm_gpu.GPU_VARIANTS}
    stage["combined"] = {"high": [0.5, 0.5, 0.5], "random": [2.0, 2.0, 2.0]}
    section = {"stage": stage, "end_to_end_speedup": {"high": 1.2, "random": 1.1}}
    monkeypatch.setattr(dlrm_gpu.gpu_results, "section", lambda name: section)
    monkeypatch.setattr(dlrm_gpu.gpu_results, "provenance", lambda name: "measured on a test GPU")
    assert dlrm_gpu.gpu_claim("C2", {}).value == pytest.approx(3.0)
    combined = dlrm_gpu.gpu_claim("C7", {})
    assert combined.per_setting == {"high": pytest.approx(2.0), "random": pytest.approx(1.5)}
    assert verdict(CLAIMS["C7"], combined)[0] == "holds"
    assert verdict(CLAIMS["C4"], dlrm_gpu.gpu_claim("C4", {}))[0] == "fails"  # the cap's times equal the baseline's


def test_c9_reads_whether_registers_bind_the_baseline_kernels_occupancy():
    limited = dlrm_gpu.register_limited({"none": {"0": 54}})
    assert limited.value is True and "32 of 64 warps (50.0%)" in limited.note
    assert verdict(CLAIMS["C9"], limited)[0] == "holds"
    assert dlrm_gpu.register_limited({"none": {"0": 32}}).value is False  # 64 warps: no register limit
    assert CLAIMS["C9"].kind == "analogue"


def test_k3_fails_when_a_pinned_row_missed():
    study = pd.DataFrame([dict(trace="low", batch=0, pinned=60_000, pinned_hit_rate=0.99, hit_rate=0.5)])
    assert verdict(CLAIMS["K3"], dlrm_gpu.pinned_rows_hit(study))[0] == "fails"


def test_model_study_refuses_a_cap_that_was_not_compiled():
    from mlsysrepro.core.settings import resolve

    settings = resolve("dlrm_gpu", dlrm_gpu.PRESETS, {"scale": "smoke", "register_cap": 64}, dlrm_gpu.RANGES)
    study = pd.DataFrame([dict(trace=t, pinned=p, hit_rate=0.5) for t in ("high", "random") for p in (0, 60_000)])
    with pytest.raises(ValueError, match="register_cap must be one of"):
        dlrm_gpu.model_study(settings, study)
