import json
import math

import numpy as np
import pytest
import torch

from mlsysrepro.core import Report, above, at_least, at_most, below, is_true, resolve, within
from mlsysrepro.core.claims import round_floats

PRESETS = {"smoke": dict(n=1), "default": dict(n=2), "paper": dict(n=3)}


@pytest.mark.parametrize(
    "rule, yes, no",
    [
        (at_most(0.5), 0.5, 0.51),
        (at_least(2), 2, 1.99),
        (below(1), 0.99, 1.0),
        (above(1), 1.01, 1.0),
        (within(-1.1, -0.9), -1.0, -0.8),
        (is_true(), True, 1),
    ],
)
def test_rules_decide_from_the_measured_value(rule, yes, no):
    assert rule(yes) is True
    assert rule(no) is False


def test_missing_measurement_never_holds():
    assert not at_most(1)(None)
    assert not at_least(0)(math.nan)


def test_rule_text_states_the_rule():
    assert at_most(0.01).text == "measured <= 0.01"
    assert within(-1.1, -0.9).text == "-1.1 <= measured <= -0.9"


def test_round_floats_handles_tensors_arrays_and_nan():
    value = {"t": torch.tensor([1.23456789, 2.0]), "a": np.float32(0.1), "n": math.nan, 3: (1, 2.000000001)}
    assert round_floats(value) == {"t": [1.23457, 2.0], "a": 0.1, "n": None, "3": [1, 2.0]}
    with pytest.raises(TypeError, match="cannot store object"):
        round_floats(object())


def make_report(tmp_path, monkeypatch, scale="smoke"):
    monkeypatch.setenv("MLSYSREPRO_BUILD_DIR", str(tmp_path))
    return Report(resolve("toy", PRESETS, {"scale": scale, "seed": 1}), title="Toy")


def test_claim_verdict_is_computed_and_saved(tmp_path, monkeypatch):
    report = make_report(tmp_path, monkeypatch)
    assert report.claim("C1", "x is small", where="Fig. 1", paper_value=0.1, measured=0.05, rule=at_most(0.1)) is True
    assert report.claim("C2", "y is big", where="Tab. 2", paper_value=10, measured=3.0, rule=at_least(10),
                        note="tiny run") is False
    report.metric("curve", torch.linspace(0, 1, 3))
    path = report.save()
    assert path == tmp_path / "smoke" / "figures" / "toy" / "results.json"
    saved = json.loads(path.read_text())
    assert [c["holds"] for c in saved["claims"]] == [True, False]
    assert saved["claims"][1] == {
        "id": "C2", "statement": "y is big", "where": "Tab. 2", "paper_value": 10, "measured": 3.0,
        "rule": "measured >= 10", "holds": False, "scale": "smoke", "note": "tiny run", "timing": False,
    }
    assert saved["metrics"] == {"curve": [0.0, 0.5, 1.0]}
    assert saved["settings"] == {"n": 1, "scale": "smoke", "seed": 1}
    assert report.table().loc["C2", "holds"] == False  # noqa: E712 (numpy bool)


def test_duplicate_claim_id_is_an_error(tmp_path, monkeypatch):
    report = make_report(tmp_path, monkeypatch)
    report.claim("C1", "s", where="w", paper_value=1, measured=1, rule=at_most(1))
    with pytest.raises(ValueError, match="claim id 'C1' recorded twice"):
        report.claim("C1", "s", where="w", paper_value=1, measured=1, rule=at_most(1))


def test_results_json_is_byte_identical_across_runs(tmp_path, monkeypatch):
    blobs = []
    for _ in range(2):
        report = make_report(tmp_path, monkeypatch)
        report.metric("b", {"z": 1.0 / 3.0, "a": [2.0 / 3.0]})
        report.claim("C1", "s", where="w", paper_value=1, measured=1 / 7, rule=at_most(1))
        blobs.append(report.save().read_bytes())
    assert blobs[0] == blobs[1]
    assert b'"a": [\n' in blobs[0] and blobs[0].index(b'"a"') < blobs[0].index(b'"z"')


def test_default_scale_writes_to_committed_figures(tmp_path, monkeypatch):
    report = make_report(tmp_path, monkeypatch, scale="default")
    assert report.out_dir.parts[-2:] == ("figures", "toy") and tmp_path not in report.out_dir.parents


def test_timings_are_kept_apart_and_dropped_for_comparison(tmp_path, monkeypatch):
    from mlsysrepro.core.claims import without_timings

    saved = []
    for seconds in (1.0, 2.0):
        report = make_report(tmp_path, monkeypatch)
        report.metric("loss", 0.5)
        report.metric("seconds", seconds, timing=True)
        report.claim("C1", "fast", where="Tab. 4", paper_value=1.0, measured=seconds, rule=at_most(1.5), timing=True)
        report.claim("C2", "good", where="Tab. 3", paper_value=1.0, measured=0.9, rule=at_least(0.8))
        saved.append(json.loads(report.save().read_text()))
    assert saved[0]["timings"] == {"seconds": 1.0} and saved[0]["metrics"] == {"loss": 0.5}
    assert saved[0] != saved[1]
    assert without_timings(saved[0]) == without_timings(saved[1])
    assert without_timings(saved[0])["claims"][1]["measured"] == 0.9  # a non-timing claim keeps its value
