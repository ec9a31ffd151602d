import gc
import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from mlsysrepro.core import (Claim, Measurement, Report, above, across, across_seeds, at_least, at_most, below,
                             from_samples, is_true, not_testable, resolve, within)
from mlsysrepro.core.claims import (AT, CONSISTENCY, PAST, SHORT_OF, Assumption, Precondition, across_models,
                                     fragility, lint, position, robustness, round_floats, run_fingerprint,
                                     settings_held, settings_text, verdict)

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


def claim(rule=above(0.0), **kwargs):
    return Claim(kwargs.pop("id", "C1"), "x is big", where="Fig. 1", paper_value=kwargs.pop("paper_value", 1.0),
                 unit="gain", rule=rule, over="the toy settings", **kwargs)


@pytest.mark.parametrize("measurement, expected", [
    (Measurement(0.5), "holds"),
    (Measurement(-0.5), "fails"),
    (Measurement(0.5, (0.1, 0.9)), "holds"),
    (Measurement(0.5, (-0.1, 0.9)), "inconclusive"),
    (Measurement(-0.5, (-0.9, 0.1)), "inconclusive"),
    (Measurement(-0.5, (-0.9, -0.1)), "fails"),
    (not_testable("no GPU here"), "not testable here"),
])
def test_four_verdicts(measurement, expected):
    result, why = verdict(claim(), measurement)
    assert result == expected
    if expected == "inconclusive":
        assert "straddles" in why
    if expected == "not testable here":
        assert why == "no GPU here"


def test_a_claim_over_settings_needs_the_share_and_the_median():
    over = claim(min_share=2 / 3)
    mostly = {f"s{i}": 0.1 + 0.01 * i for i in range(9)} | {"worst": -0.5}
    assert verdict(over, across(mostly))[0] == "holds"  # 9 of 10, the median's interval above 0
    few = across({"a": 0.2, "b": 0.3, "c": -0.1})  # fewer than 6 settings: k of n decides, no bootstrap
    assert few.interval is None and verdict(over, few)[0] == "holds"
    result, why = verdict(over, across({"a": 0.2, "b": -0.3, "c": -0.1, "d": 5.0}))  # 2 of 4 passes
    assert result == "fails" and "passes on 2 of 4 settings (needs 3)" in why
    assert verdict(over, across({"a": 0.01, "b": 0.02, "c": 0.03, "d": -4.0}))[0] == "holds"  # 3 of 4
    noisy = across({"a": 0.2, "b": 0.3, "c": -0.1}, intervals={"a": (-0.1, 0.5), "b": (0.1, 0.5), "c": (-0.2, 0)})
    assert noisy.per_setting_interval["a"] == (-0.1, 0.5) and verdict(over, noisy)[0] == "inconclusive"
    with pytest.raises(ValueError, match="measure it with across"):
        verdict(over, Measurement(0.5))


def apart(seeds: list[float], i: int) -> list[float]:
    """``seeds`` moved by a trifle per setting ``i``: settings of distinct runs (identical ones are counted once)."""
    return [x + i * 1e-9 for x in seeds]


def test_a_setting_whose_seed_interval_straddles_the_threshold_is_undecided():
    over = claim(min_share=2 / 3)
    clear = {f"s{i}": apart([0.2, 0.21, 0.22], i) for i in range(6)}
    assert verdict(over, across_seeds(clear))[0] == "holds"
    noisy = {f"s{i}": apart([0.2, -0.1, 0.25], i) for i in range(6)}  # every mean > 0, every t-interval straddles 0
    measured = across_seeds(noisy)
    assert measured.value > 0 and settings_held(over.rule, measured) == (0, 6)
    result, why = verdict(over, measured)
    assert result == "inconclusive" and "6 undecided" in why
    assert settings_text(measured).startswith("s0 +0.117 [-0.354, +0.587]; s1 +0.117")
    consistent = {f"s{i}": apart([-0.004 + 0.02 * (j - 2) for j in range(5)], i) for i in range(4)}  # means -0.004
    assert across({k: -0.004 for k in consistent}).interval is None  # four settings: no bootstrap of the median
    assert across_seeds(consistent).interval is None and verdict(over, across_seeds(consistent))[0] == "inconclusive"
    six = {f"s{i}": apart([-0.004 + 0.02 * (j - 2) for j in range(5)], i) for i in range(6)}
    assert across({k: -0.004 for k in six}).interval == pytest.approx((-0.004, -0.004))
    low, high = across_seeds(six).interval  # the seeds' noise widens what the settings alone would give
    assert low < -0.004 < high and high > 0 and verdict(over, across_seeds(six))[0] == "inconclusive"
    one = across_seeds({"s0": [0.2, -0.1, 0.25]})
    assert one.interval == from_samples([0.2, -0.1, 0.25]).interval and verdict(over, one)[0] == "inconclusive"
    beaten = {f"s{i}": apart([-0.2, -0.21, -0.22], i) for i in range(4)} | {"n1": [0.2, -0.1, 0.25],
                                                                           "n2": apart([0.2, -0.1, 0.25], 1)}
    assert verdict(over, across_seeds(beaten))[0] == "fails"  # even if both undecided passed: 2 of 6


def test_the_best_setting_alone_never_carries_a_claim():
    effects = {f"t{i}": -0.1 for i in range(15)} | {"best": 0.69}
    assert verdict(claim(min_share=2 / 3), across(effects))[0] == "fails"


def test_across_is_deterministic_and_brackets_the_median():
    effects = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 10.0, "e": 2.0, "f": 3.0}
    first, second = across(effects), across(effects)
    assert first == second and first.value == 2.5
    assert first.interval[0] <= 2.5 <= first.interval[1]
    assert across(dict(list(effects.items())[:5])).interval is None
    with pytest.raises(ValueError, match="effects is empty"):
        across({})


def test_a_win_that_the_baseline_also_passes_is_no_win():
    assert verdict(claim(), Measurement(0.5, baseline=Measurement(-0.2)))[0] == "holds"
    result, why = verdict(claim(), Measurement(0.5, baseline=Measurement(0.3)))
    assert result == "fails" and "baseline: 0.3, holds" in why
    assert verdict(claim(), Measurement(0.5, baseline=Measurement(0.1, (-0.1, 0.2))))[0] == "inconclusive"


def test_a_parity_claim_needs_a_control_that_fails():
    parity = claim(at_most(0.02), parity=True)
    assert verdict(parity, Measurement(0.01, baseline=Measurement(0.2)))[0] == "holds"
    result, why = verdict(parity, Measurement(0.01, baseline=Measurement(0.0)))  # no dropout is as good
    assert result == "not testable here" and "control: 0, holds" in why
    assert verdict(parity, Measurement(0.5, baseline=Measurement(0.0)))[0] == "fails"
    assert verdict(parity, Measurement(0.01, baseline=Measurement(0.2, (-0.1, 0.5))))[0] == "inconclusive"


def test_from_samples_gives_a_t_interval():
    measured = from_samples([1.0, 2.0, 3.0])
    assert measured.value == 2.0
    assert measured.interval == pytest.approx((2.0 - 2.4841, 2.0 + 2.4841), abs=1e-3)  # t(0.975, 2) = 4.303
    assert from_samples([4.0]).interval is None


def test_proportion_intervals():
    from mlsysrepro.core.claims import proportion_gap, proportion_ratio

    gap = proportion_gap(0.9, 0.4, 128)
    assert gap.value == pytest.approx(0.5) and gap.interval[0] > 0.35 and gap.interval[1] < 0.65
    noise = proportion_ratio(12 / 128, 9 / 128, 128)  # 12 vs 9 hits: no evidence of a 2x gain
    assert noise.interval[0] < 1.0 < 2.0 < noise.interval[1]
    strong = proportion_ratio(60 / 128, 6 / 128, 128)
    assert strong.interval[0] > 4.0
    assert math.isfinite(proportion_ratio(0.5, 0.0, 64).value)


def test_rank_correlation_carries_a_fisher_interval_and_its_ceiling_under_ties():
    from mlsysrepro.core.claims import best_rank_correlation, rank_correlation

    noisy = np.arange(16) + np.random.default_rng(0).normal(0, 4, 16)
    measured = rank_correlation(np.arange(16), noisy)
    assert measured.interval[0] < measured.value < measured.interval[1] <= 1
    assert rank_correlation(np.arange(40), np.arange(40) + np.random.default_rng(0).normal(0, 4, 40)).interval[0] \
        > measured.interval[0]  # more pairs, a tighter interval
    assert rank_correlation(np.arange(16), -np.arange(16)).value == pytest.approx(-1)
    constant = rank_correlation(np.arange(16), np.zeros(16))
    assert constant.value == 0 and constant.interval == (-1, 1) and "undefined" in constant.note
    # one costly item among 15 ties: no ranking can reach rho 0.5, even the one that puts it first
    single = np.r_[np.zeros(15), 0.9]
    assert best_rank_correlation(single).value < 0.5
    assert best_rank_correlation(single).value == pytest.approx(rank_correlation(np.arange(16), single).value)
    assert best_rank_correlation(np.linspace(0, 1, 16)).value == pytest.approx(1)
    with pytest.raises(ValueError, match="at least 4 pairs"):
        rank_correlation([1, 2, 3], [1, 2, 3])


def test_position_against_the_paper_number_follows_the_rules_direction():
    near = claim(paper_value=5.0, near=0.25)  # higher is better: below the paper's number is a weaker effect
    assert [position(near, Measurement(v)) for v in (3.0, 4.0, 6.2, 8.0)] == [SHORT_OF, AT, AT, PAST]
    cost = claim(below(1.0), paper_value=0.5, near=0.1)  # a cost ratio: lower is better, so below it is past it
    assert [position(cost, Measurement(v)) for v in (0.3, 0.52, 0.8)] == [PAST, AT, SHORT_OF]
    assert position(cost, not_testable("no GPU")) == ""
    assert position(cost, Measurement(0.3, not_testable="power check failed")) == ""  # nothing for not testable
    assert position(claim(is_true(), paper_value=1.0, near=0.1), Measurement(True)) == ""  # no direction
    assert position(claim(), Measurement(3.0)) == ""
    up_to = claim(paper_value=5.0, near=0.25, up_to=True)
    assert position(up_to, across({"a": 1.0, "b": 2.0, "c": 5.5})) == f"best 5.5: {AT}"  # not the median
    lower = claim(below(1.0), paper_value=0.69, near=0.25, up_to=True)  # a cost ratio: lower is better
    assert lower.rule.better == "lower"
    assert position(lower, across({"a": 0.7, "b": 2.3, "c": 3.7})) == f"best 0.7: {AT}"  # not the worst, 3.7
    band = claim(within(1.69, 5.43), paper_value=5.43, near=0.3, up_to=True)
    assert position(band, across({"a": 2.4, "b": 1.2, "c": 3.0, "d": 6.0})) == "2 of 4 inside 1.69–5.43, 1 below, 1 above"
    assert position(band, Measurement(2.4)) == "inside 1.69–5.43"
    assert position(claim(at_most(0.0), kind=CONSISTENCY, paper_value=0.0, near=0.1), Measurement(0.0)) == ""
    with pytest.raises(ValueError, match="near= needs a numeric paper_value"):
        claim(paper_value="up to", near=0.1)


def test_a_hold_whose_negative_control_passes_too_is_not_testable():
    declared = claim(above(0.0), control="random selection")
    fine = Measurement(0.3, (0.1, 0.5)).controlled(Measurement(-0.2, (-0.3, -0.1)))
    assert verdict(declared, fine)[0] == "holds" and "negative control (random selection)" in verdict(declared, fine)[1]
    blind = Measurement(0.3, (0.1, 0.5)).controlled(Measurement(0.25, (0.1, 0.4)))
    result, why = verdict(declared, blind)
    assert result == "not testable here" and "cannot tell" in why
    unsure = Measurement(0.3, (0.1, 0.5)).controlled(Measurement(0.0, (-0.1, 0.1)))
    assert verdict(declared, unsure)[0] == "inconclusive"
    assert verdict(declared, Measurement(-0.3).controlled(Measurement(0.25)))[0] == "fails"  # a fail stays a fail


def test_a_declared_control_must_be_measured_and_is_saved(tmp_path, monkeypatch):
    declared = claim(above(0.0), control="the method against itself", no_power_check="x")
    report = make_report(tmp_path, monkeypatch, (declared,))
    with pytest.raises(ValueError, match="declares a negative control"):
        report.judge("C1", Measurement(0.3))
    report.judge("C1", Measurement(0.3).controlled(Measurement(0.0)))
    saved = report.judged[0]
    assert saved["control"] == {"text": "the method against itself", "measured": 0.0, "interval": None,
                                "verdict": "fails"}
    assert saved["no_power_check"] == "x"


def test_lint_asks_every_paper_claim_for_something_that_could_fail_it():
    bare = claim(above(0.0), id="C1", paper_value=0.69)
    assert [p.split(":")[0] for p in lint([bare])] == ["C1", "C1"]
    controlled = claim(above(0.0), id="C2", control="random", no_power_check="the control is the method itself")
    powered = claim(above(0.0), id="C3", preconditions=(Precondition("P", "p", above(0)),))
    assert lint([controlled, powered]) == []
    assert lint([claim(above(0.0), id="K", kind=CONSISTENCY)]) == []  # a consistency check cannot fail: fine
    other = claim(at_least(0.01), id="C4", paper_value=0.236, preconditions=powered.preconditions)
    assert lint([other]) == ["C4: its rule tests 0.01, not the paper's 0.236, and threshold_why does not say why"]
    said = claim(at_least(0.01), id="C4", paper_value=0.236, preconditions=powered.preconditions,
                 threshold_why="a gain the seeds resolve")
    assert lint([said]) == [] and "not the paper's 0.236: a gain the seeds resolve" in said.shown_statement
    assert lint([claim(above(1.0), id="C5", paper_value=3.2, preconditions=powered.preconditions)]) == []


def test_two_identical_settings_are_counted_once():
    effects = {"a": 0.3, "b": 0.3, "c": -0.1, "d": -0.2}
    runs = {"a": "run1", "b": "run1", "c": "run2", "d": "run3"}
    merged = across(effects, runs=runs)
    assert merged.per_setting == {"a": 0.3, "c": -0.1, "d": -0.2} and merged.merged == {"b": "a"}
    assert "b = a" in merged.note
    over = claim(above(0.0), min_share=0.5)
    assert settings_held(over.rule, across(effects)) == (2, 4)  # counted twice, it would pass on half
    assert settings_held(over.rule, merged) == (1, 3) and verdict(over, merged)[0] == "fails"
    seeds = across_seeds({"a": [0.1, 0.2], "b": [0.1, 0.2], "c": [-0.1, -0.2]}, runs={"a": 1, "b": 1, "c": 2})
    assert list(seeds.per_setting) == ["a", "c"] and seeds.merged == {"b": "a"} and list(seeds.samples) == ["a", "c"]
    saturated = across_seeds({"a": [1.0, 1.0], "b": [1.0, 1.0]})  # equal values, distinct runs: both count
    assert list(saturated.per_setting) == ["a", "b"] and saturated.merged is None
    six = {f"s{i}": 0.1 * i for i in range(6)} | {"copy": 0.5}
    with_copy = across(six, runs={k: (0.1 * 5 if k == "copy" else k) for k in six} | {"s5": 0.1 * 5})
    assert with_copy.interval == across({f"s{i}": 0.1 * i for i in range(6)}).interval  # the bootstrap too
    with pytest.raises(ValueError, match="runs must name the settings"):
        across(effects, runs={"a": 1})
    assert run_fingerprint(np.arange(3.0)) == run_fingerprint(np.arange(3.0)) != run_fingerprint(np.arange(3.0) + 1e-12)


def test_fragility_names_the_setting_the_model_or_the_resample_that_flips_a_verdict():
    over = claim(above(0.0), min_share=0.5)
    robust = across({"a": 0.3, "b": 0.2, "c": 0.4, "d": -0.1})
    assert verdict(over, robust)[0] == "holds" and fragility(over, robust) == []
    edge = across({"a": 0.3, "b": 0.2, "c": -0.4, "d": -0.1})  # 2 of 4: one setting fewer and it fails
    assert verdict(over, edge)[0] == "holds"
    assert fragility(over, edge) == ["fails without a", "fails without b"]
    trained = claim(above(0.0), trained=True)
    one_model = across_models({"m0": [0.2, 0.3, 0.25, 0.22]})
    assert verdict(trained, one_model)[0] == "holds"
    assert fragility(trained, one_model) == ["rests on 1 trained model(s), fewer than 3"]
    three = across_models({"m0": [0.2, 0.3, 0.25], "m1": [0.1, 0.2, 0.15], "m2": [0.3, 0.35, 0.4]})
    assert three.models == 3 and fragility(trained, three) == []
    carried = across_models({"m0": [0.6, 0.7, 0.65], "m1": [-0.1, -0.12, -0.08], "m2": [-0.05, -0.02, -0.04]})
    assert verdict(trained, carried)[0] == "inconclusive"  # models as the unit: one model does not carry it
    pool = Measurement(0.9)
    flaky = pool.resampled_over([Measurement(0.9)] * 55 + [Measurement(-0.1)] * 45)
    assert fragility(claim(above(0.0)), flaky) == ["holds on only 55% of 100 bootstrap resamples of the evaluation "
                                                   "items"]
    steady = pool.resampled_over([Measurement(0.9)] * 98 + [Measurement(-0.1)] * 2)
    assert fragility(claim(above(0.0)), steady) == []
    assert fragility(over, across({"a": 0.0, "b": 0.0, "c": 0.1, "d": -0.1})) == []  # a fail that stays one


def make_report(tmp_path, monkeypatch, claims, scale="smoke"):
    monkeypatch.setenv("MLSYSREPRO_BUILD_DIR", str(tmp_path))
    return Report(resolve("toy", PRESETS, {"scale": scale, "seed": 1}), title="Toy", claims=claims)


TOY_CLAIMS = (claim(at_most(0.1), id="C1", paper_value=0.1),
              claim(at_least(10), id="C2", paper_value=10),
              claim(above(0), id="K1", paper_value=0, kind=CONSISTENCY))


def test_verdict_is_computed_and_saved(tmp_path, monkeypatch):
    report = make_report(tmp_path, monkeypatch, TOY_CLAIMS)
    assert report.judge("C2", Measurement(3.0, note="tiny run")) == "fails"
    assert report.judge("C1", Measurement(0.05)) == "holds"
    assert report.judge("K1", Measurement(1.0)) == "holds"
    report.metric("curve", torch.linspace(0, 1, 3))
    path = report.save()
    assert path == tmp_path / "smoke" / "figures" / "toy" / "results.json"
    saved = json.loads(path.read_text())
    assert [c["id"] for c in saved["claims"]] == ["C1", "C2", "K1"]  # declaration order
    assert [c["kind"] for c in saved["claims"]] == ["paper claim", "paper claim", "consistency check"]
    assert {k: saved["claims"][1][k] for k in ("measured", "rule", "verdict", "note", "paper_value")} == {
        "measured": 3.0, "rule": "measured >= 10", "verdict": "fails", "note": "tiny run", "paper_value": 10}
    assert saved["metrics"] == {"curve": [0.0, 0.5, 1.0]}
    assert saved["settings"] == {"n": 1, "scale": "smoke", "seed": 1}
    assert report.table().loc["C2", "verdict"] == "fails"


def test_a_claim_must_be_declared_judged_once_and_every_one_judged(tmp_path, monkeypatch):
    report = make_report(tmp_path, monkeypatch, TOY_CLAIMS)
    with pytest.raises(ValueError, match="claim 'C9' is not declared"):
        report.judge("C9", Measurement(1.0))
    report.judge("C1", Measurement(1.0))
    with pytest.raises(ValueError, match="claim id 'C1' judged twice"):
        report.judge("C1", Measurement(1.0))
    with pytest.raises(ValueError, match=r"claims \['C2', 'K1'\] are declared but not judged"):
        report.save()
    assert not (report.out_dir / "results.json").exists()
    with pytest.raises(ValueError, match="declared twice"):
        make_report(tmp_path, monkeypatch, TOY_CLAIMS[:1] * 2)


def test_results_json_is_byte_identical_across_runs(tmp_path, monkeypatch):
    blobs = []
    for _ in range(2):
        report = make_report(tmp_path, monkeypatch, TOY_CLAIMS[:1])
        report.metric("b", {"z": 1.0 / 3.0, "a": [2.0 / 3.0]})
        report.judge("C1", across({"x": 1 / 7, "y": 2 / 7}))
        blobs.append(report.save().read_bytes())
    assert blobs[0] == blobs[1]
    assert b'"a": [\n' in blobs[0] and blobs[0].index(b'"a"') < blobs[0].index(b'"z"')


def test_default_scale_writes_to_committed_figures(tmp_path, monkeypatch):
    from mlsysrepro.core import paths

    report = make_report(tmp_path, monkeypatch, (), scale="default")
    assert report.out_dir.parts[-2:] == ("figures", "toy") and tmp_path not in report.out_dir.parents
    paths.failure_marker("toy", "default").unlink()  # the unfinished run's marker, in the committed figures/


def test_a_run_is_marked_unfinished_until_it_saves(tmp_path, monkeypatch):
    """A notebook that fails outside run_all (papermill, JupyterLab) leaves the marker its Report wrote when it
    started, so its last saved claims read as stale; a run that saves removes it."""
    from mlsysrepro.core import paths

    report = make_report(tmp_path, monkeypatch, TOY_CLAIMS[:1])
    marker = paths.failure_marker("toy", "smoke")
    assert marker.exists() and "has not reached report.save()" in marker.read_text()
    report.judge("C1", Measurement(1.0))
    report.save()
    assert not marker.exists()
    make_report(tmp_path, monkeypatch, TOY_CLAIMS[:1])  # the next run dies before saving
    assert marker.exists()


def test_timings_are_kept_apart_and_dropped_for_comparison(tmp_path, monkeypatch):
    from mlsysrepro.core.claims import without_timings

    claims = (claim(at_most(1.5), id="C1", timing=True), claim(at_least(0.8), id="C2"))
    saved = []
    for seconds in (1.0, 2.0):
        report = make_report(tmp_path, monkeypatch, claims)
        report.metric("loss", 0.5)
        report.metric("seconds", seconds, timing=True)
        # a timing claim over settings: each setting's own interval varies from run to run as well
        report.judge("C1", Measurement(seconds, (seconds * 0.7, seconds * 1.1), per_setting={"a": seconds},
                                       per_setting_interval={"a": (seconds * 0.7, seconds * 1.1)}))
        report.judge("C2", Measurement(0.9))
        saved.append(json.loads(report.save().read_text()))
    assert saved[0]["timings"] == {"seconds": 1.0} and saved[0]["metrics"] == {"loss": 0.5}
    assert [c["verdict"] for c in saved[1]["claims"]] == ["inconclusive", "holds"]
    assert saved[0] != saved[1]
    assert without_timings(saved[0]) == without_timings(saved[1])
    assert without_timings(saved[0])["claims"][1]["measured"] == 0.9  # a non-timing claim keeps its value


def test_figures_and_results_reach_the_folder_together_only_when_the_run_saves(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    def run(figures, save=True):
        report = make_report(tmp_path, monkeypatch, TOY_CLAIMS[:1])
        for name in figures:
            fig, ax = plt.subplots()
            ax.plot([0, 1], [0, len(name)])
            ax.set(xlabel="step", ylabel="loss (nats)", title=f"{name} (Fig. 1)")
            report.savefig(fig, name)
            plt.close(fig)
        report.judge("C1", Measurement(1.0))
        return report.save() if save else report

    first = run(["fig1_a", "fig2_b"])
    out = first.parent
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    interrupted = run(["fig1_a", "fig3_c"], save=False)  # a run that dies before report.save()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the previous run's files, all whole
    assert (interrupted.staging_dir / "fig3_c.svg").exists()
    last = run(["fig3_c"], save=False)  # the next run replaces the folder, and leaves the interrupted one's alone
    last.save()
    assert sorted(p.name for p in out.iterdir()) == ["fig3_c.png", "fig3_c.svg", "results.json"]
    last.save()  # saving again (the last cell re-run) keeps this run's figures
    assert sorted(p.name for p in out.iterdir()) == ["fig3_c.png", "fig3_c.svg", "results.json"]
    assert json.loads((out / "results.json").read_text())["figures"] == ["fig3_c.png"]
    staged = interrupted.staging_dir
    assert staged.exists()
    del interrupted  # the run that never saved is gone (its kernel restarted, its object collected): so is its folder
    gc.collect()
    assert not staged.exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["toy"]  # no staging or previous folder left behind


def test_two_interleaved_runs_never_mix_their_figures(tmp_path, monkeypatch):
    """Two runs of one paper and scale in one process (two seeds): each stages its own figures, and the folder holds
    the run that saved last, whole: its results.json and only its figures."""
    import matplotlib.pyplot as plt

    def figure(report, name, height):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, height])
        ax.set(xlabel="step", ylabel="loss (nats)", title=f"{name} (Fig. 1)")
        report.savefig(fig, name)
        plt.close(fig)

    monkeypatch.setenv("MLSYSREPRO_BUILD_DIR", str(tmp_path))
    seed0, seed1 = (Report(resolve("toy", PRESETS, {"scale": "smoke", "seed": seed}), title="Toy",
                           claims=TOY_CLAIMS[:1]) for seed in (0, 1))
    figure(seed0, "fig1_a", 1)
    figure(seed1, "fig1_a", 2)
    figure(seed1, "fig2_b", 3)
    assert seed0.staging_dir != seed1.staging_dir and (seed0.staging_dir / "fig1_a.png").exists()
    for report in (seed1, seed0):
        report.judge("C1", Measurement(1.0))
    drawn_by_seed0 = (seed0.staging_dir / "fig1_a.png").read_bytes()
    out = seed1.save().parent
    assert seed0.save().parent == out
    assert json.loads((out / "results.json").read_text())["seed"] == 0
    assert sorted(p.name for p in out.iterdir()) == ["fig1_a.png", "fig1_a.svg", "results.json"]
    assert (out / "fig1_a.png").read_bytes() == drawn_by_seed0


def test_findings_are_recorded_with_their_section_times_and_timed_ones_kept_apart(tmp_path, monkeypatch):
    from mlsysrepro.core.claims import without_timings

    report = make_report(tmp_path, monkeypatch, TOY_CLAIMS[:1])
    shown = report.finding("fig2", "**What we found (Fig. 2).** slope -0.98")
    assert shown.data == "**What we found (Fig. 2).** slope -0.98"
    report.finding("table4", "2.3x the cheapest", timing=True)
    with pytest.raises(ValueError, match="recorded twice"):
        report.finding("fig2", "again")
    with pytest.raises(ValueError, match="without spaces"):
        report.finding("fig 3", "x")
    report.judge("C1", Measurement(0.05))
    saved = json.loads(report.save().read_text())
    assert saved["findings"] == {"fig2": "**What we found (Fig. 2).** slope -0.98"}
    assert saved["timings"]["findings"] == {"table4": "2.3x the cheapest"}
    assert [key for key, _ in saved["timings"]["section_seconds"]] == ["fig2", "table4"]
    assert "table4" not in json.dumps(without_timings(saved))


def test_claims_markdown_lists_every_claim_with_its_verdict_and_the_papers_value(tmp_path, monkeypatch):
    report = make_report(tmp_path, monkeypatch, TOY_CLAIMS)
    report.judge("C1", Measurement(0.05))
    report.judge("C2", across({"a": 3.0, "b": 20.0, "c": 30.0}))
    report.judge("K1", Measurement(1.0))
    lines = report.claims_markdown().splitlines()
    assert lines[0] == "## Which parts of the paper hold at this scale"
    assert lines[2].startswith("- **C1** (holds): ") and lines[2].endswith("measured 0.05 against the paper's 0.1.")
    assert lines[3].startswith("- **C2** (holds, 2 of 3 settings): ")
    assert lines[4].startswith("- **K1** (consistency check, holds): ") and "paper's" not in lines[4]
    assert len(lines) == 5


def test_claims_markdown_gives_the_reason_where_a_claim_was_not_measured(tmp_path, monkeypatch):
    report = make_report(tmp_path, monkeypatch, TOY_CLAIMS)
    report.judge("C1", not_testable("needs a GPU"))
    report.judge("C2", across({"a": 3.0, "b": 20.0, "c": 30.0}))
    report.judge("K1", Measurement(1.0))
    line = report.claims_markdown().splitlines()[2]
    assert line.startswith("- **C1** (not testable here): ") and line.endswith("; needs a GPU.")
    assert "None" not in line


def test_a_figure_that_breaks_the_checklist_is_saved_with_a_warning_and_the_run_refused(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    report = make_report(tmp_path, monkeypatch, TOY_CLAIMS[:1])
    report.judge("C1", Measurement(1.0))
    fig, ax = plt.subplots()
    ax.bar(["a", "b"], [62.0, 64.0])
    ax.set(ylim=(60, 65), ylabel="accuracy (%)", title="Table 1")
    with pytest.warns(UserWarning, match="not from zero"):
        report.savefig(fig, "table1_models")
    with pytest.raises(ValueError, match="table1_models: .*not from zero"):
        report.save()
    ax.set_ylim(0, 70)
    report.savefig(fig, "table1_models")  # fixed and saved again: the run may now be saved
    assert report.save().exists()


def powered(rule=above(0.0), **kwargs):
    """A claim whose experiment must first show that compression costs quality (>= 10 %)."""
    return claim(rule, preconditions=(Precondition("costs", "compression costs quality", at_least(0.1)),), **kwargs)


def test_an_unmet_power_precondition_turns_fails_into_not_testable():
    assert verdict(powered(), Measurement(-0.3).given(costs=0.5))[0] == "fails"  # powered: a real fail
    result, why = verdict(powered(), Measurement(-0.3).given(costs=0.067))
    assert result == "not testable here" and why.startswith("not testable at this scale")
    assert "compression costs quality: measured 0.067, fails `measured >= 0.1`" in why
    assert "rule alone would say fails" in why  # the numbers a reader needs, never the word "fails" as the verdict
    straddling = Measurement(0.3).given(costs=Measurement(0.12, (0.05, 0.2)))
    assert verdict(powered(), straddling)[0] == "not testable here" and "straddles" in verdict(powered(), straddling)[1]
    with pytest.raises(ValueError, match=r"power preconditions \['costs'\] are declared but not measured"):
        verdict(powered(), Measurement(0.3))
    # a baseline carries no preconditions of its own: it is judged by the rule alone
    assert verdict(powered(), Measurement(0.3, baseline=Measurement(-1.0)).given(costs=0.5))[0] == "holds"


def test_claim_kinds_and_reruns_are_checked():
    with pytest.raises(ValueError, match="kind must be one of"):
        claim(kind="finding of ours")
    with pytest.raises(ValueError, match="reruns"):
        claim(reruns=3)  # a rerun count is for timing claims
    assert claim(reruns=3, timing=True).reruns == 3


BUFFER = Assumption("buffer_mib", 4, (1, 4, 64), source="our choice; the paper's switch has 4-64 MiB", unit="MiB")


def test_an_assumption_grid_says_robust_or_what_the_verdict_depends_on():
    modelled = claim(min_share=2 / 3, assumptions=(BUFFER,))
    central = across({"a": -0.1, "b": -0.2, "c": 0.3})  # fails at 4 MiB
    grid = {1: across({"a": -0.3, "b": -0.2, "c": -0.1}), 4: central, 64: across({"a": 0.5, "b": 0.2, "c": 0.3})}
    (entry,) = robustness(modelled, central.over("buffer_mib", grid))
    assert entry["verdicts"] == {"1": "fails", "4": "fails", "64": "holds"}
    assert entry["text"] == "depends on buffer_mib: holds for 64 MiB; fails for 1, 4 MiB"
    flat = {k: across({"a": 0.5, "b": 0.2, "c": 0.3}) for k in (1, 4, 64)}
    assert robustness(modelled, flat[4].over("buffer_mib", flat))[0]["text"] == "robust over buffer_mib 1–64 MiB"
    # named values have no ends that stand for the ones between: every one is named
    truth = Assumption("ground_truth", "loss", ("loss", "accuracy", "perplexity"), source="ours")
    named = {k: across({"a": 0.5, "b": 0.2, "c": 0.3}) for k in truth.values}
    assert robustness(claim(min_share=2 / 3, assumptions=(truth,)), named["loss"].over("ground_truth", named))[0][
        "text"] == "robust over ground_truth loss, accuracy, perplexity"
    with pytest.raises(ValueError, match="not re-measured"):
        robustness(modelled, central)
    with pytest.raises(ValueError, match="measured at"):
        robustness(modelled, central.over("buffer_mib", {1: central, 4: central}))
    with pytest.raises(ValueError, match="central value"):
        Assumption("x", 2, (1, 3), source="s")


def test_a_claim_is_remeasured_over_its_own_assumptions_only():
    from mlsysrepro.core.claims import measured_for

    links = Assumption("lanes", 8, (8, 16), source="ours")
    data = {"central": 0.5, "buffer 1": 0.2, "buffer 64": 0.9, "lanes 16": 0.7}
    grids = {"buffer_mib": {1: "buffer 1", 4: "central", 64: "buffer 64"}, "lanes": {8: "central", 16: "lanes 16"}}
    measured = measured_for(claim(assumptions=(BUFFER,)), lambda key: Measurement(data[key]), "central", grids)
    assert set(measured.grid) == {"buffer_mib"}
    assert {k: m.value for k, m in measured.grid["buffer_mib"].items()} == {1: 0.2, 4: 0.5, 64: 0.9}
    with pytest.raises(ValueError, match="declares assumptions"):
        measured_for(claim(assumptions=(BUFFER, links)), lambda key: Measurement(data[key]), "central",
                     {"buffer_mib": grids["buffer_mib"]})


def test_results_record_kind_direction_preconditions_and_robustness(tmp_path, monkeypatch):
    claims = (powered(id="C1"), claim(below(1.0), id="C2", assumptions=(BUFFER,)))
    report = make_report(tmp_path, monkeypatch, claims)
    report.judge("C1", Measurement(-0.3).given(costs=0.067))
    grid = {v: Measurement(0.5 if v < 64 else 1.5) for v in (1, 4, 64)}
    report.judge("C2", grid[4].over("buffer_mib", grid))
    saved = json.loads(report.save().read_text())["claims"]
    assert saved[0]["kind"] == "paper claim" and saved[0]["better"] == "higher"
    assert saved[0]["verdict"] == "not testable here" and saved[0]["preconditions"]["costs"]["measured"] == 0.067
    assert saved[1]["better"] == "lower" and saved[1]["robustness"][0]["verdicts"]["64"] == "fails"
    assert "depends on buffer_mib" in report.claims_markdown().splitlines()[3]


def test_a_robustness_figure_draws_every_regridded_claim_and_passes_the_checklist(tmp_path, monkeypatch):
    from mlsysrepro.core import plots

    claims = (claim(below(1.0), id="C1", assumptions=(BUFFER,)),
              claim(within(0.5, 2.0), id="C2", assumptions=(BUFFER,)), claim(id="C3"))
    report = make_report(tmp_path, monkeypatch, claims)
    for claim_id, values in (("C1", (0.5, 0.8, 1.5)), ("C2", (1.0, 1.2, 3.0))):
        grid = {v: Measurement(x, (x - 0.1, x + 0.1)) for v, x in zip((1, 4, 64), values)}
        report.judge(claim_id, grid[4].over("buffer_mib", grid))
    report.judge("C3", Measurement(1.0))
    fig = report.robustness_figure("fig_assumption_buffer", "buffer_mib", "Beyond the paper: the switch buffer")
    assert len(fig.axes) == 2 and plots.style_problems(fig) == []
    with pytest.raises(ValueError, match="no judged claim"):
        report.robustness_figure("fig_x", "links", "Beyond the paper")


def test_a_grid_point_keeps_the_central_power_checks_unless_it_brings_its_own():
    modelled = powered(assumptions=(BUFFER,))
    central = Measurement(0.5).given(costs=0.01)  # the power check fails: not testable at every buffer
    grid = {1: Measurement(-0.5), 4: central, 64: Measurement(0.5)}
    (entry,) = robustness(modelled, central.over("buffer_mib", grid))
    assert set(entry["verdicts"].values()) == {"not testable here"}
    assert entry["text"] == "not testable at any value of buffer_mib 1–64 MiB"  # not "robust": nothing was decided
    grid[64] = Measurement(0.5).given(costs=0.5)  # measured again there, and met
    (entry,) = robustness(modelled, central.over("buffer_mib", grid))
    assert entry["verdicts"]["64"] == "holds"


def test_a_timing_claim_near_its_threshold_is_timed_again_with_more_rounds():
    from mlsysrepro.core.claims import remeasured

    near = claim(at_least(1.0), timing=True, reruns=3)
    calls = []

    def measure(times):
        calls.append(times)
        return Measurement(1.05, (0.98, 1.1) if times == 1 else (1.02, 1.08), note="slowest 90%")

    result = remeasured(near, measure)
    assert calls == [1, 3] and result.interval == (1.02, 1.08) and "3x the rounds" in result.note
    assert "1.05 [0.98, 1.1]" in result.note and verdict(near, result)[0] == "holds"
    calls.clear()
    assert remeasured(near, lambda times: calls.append(times) or Measurement(1.3, (1.2, 1.4))).value == 1.3
    assert calls == [1]  # clear of the threshold: measured once
    once = claim(at_least(1.0), timing=True)
    assert remeasured(once, measure).interval == (0.98, 1.1)


def test_a_saved_run_is_stale_where_a_declaration_changed(tmp_path, monkeypatch):
    from mlsysrepro.core.claims import FINDING, declaration_changes

    claims = (powered(id="C1"), claim(below(1.0), id="C2", assumptions=(BUFFER,)))
    report = make_report(tmp_path, monkeypatch, claims)
    report.judge("C1", Measurement(0.5).given(costs=0.5))
    grid = {v: Measurement(0.5) for v in (1, 4, 64)}
    report.judge("C2", grid[4].over("buffer_mib", grid))
    saved = json.loads(report.save().read_text())["claims"]
    assert declaration_changes(claims, saved) == []
    changed = (claim(id="C1"), claim(below(1.0), id="C2", kind=FINDING), claim(id="C3"))
    assert declaration_changes(changed, saved) == ["C3 is new", "C1's power checks", "C2's kind", "C2's assumptions"]


def test_staleness_covers_thresholds_central_values_paper_values_settings_and_controls(tmp_path, monkeypatch):
    """The three changes a saved run used to miss: a power check's threshold (gradient sparsity's P1 1.69 -> 99,
    BaKlaVa's compression_costs 0.1 -> 0.001) and an assumption's central value (pe_tile 32 -> 1)."""
    from mlsysrepro.core.claims import declaration_changes

    check = Precondition("costs", "compression costs quality", at_least(0.1))
    claims = (claim(id="C1", preconditions=(check,)), claim(below(1.0), id="C2", assumptions=(BUFFER,)),
              claim(id="C3", control="random selection", no_power_check="x"))
    report = make_report(tmp_path, monkeypatch, claims)
    report.judge("C1", Measurement(0.5).given(costs=0.5))
    grid = {v: Measurement(0.5) for v in BUFFER.values}
    report.judge("C2", grid[BUFFER.central].over("buffer_mib", grid))
    report.judge("C3", Measurement(0.5).controlled(Measurement(-0.5)))
    saved = json.loads(report.save().read_text())["claims"]
    assert declaration_changes(claims, saved) == []
    threshold = replace(claims[0], preconditions=(replace(check, rule=at_least(0.001)),))
    assert declaration_changes((threshold, *claims[1:]), saved) == ["C1's power-check rules"]
    central = replace(claims[1], assumptions=(replace(BUFFER, central=BUFFER.values[0]),))
    assert declaration_changes((claims[0], central, claims[2]), saved) == ["C2's assumption values"]
    wider = replace(claims[1], assumptions=(replace(BUFFER, values=(*BUFFER.values, 256)),))
    assert declaration_changes((claims[0], wider, claims[2]), saved) == ["C2's assumption values"]
    moved = (replace(claims[0], paper_value=2.0), replace(claims[1], over="another setting list"),
             replace(claims[2], control="the baseline against itself"))
    assert declaration_changes(moved, saved) == ["C1's paper_value", "C2's over", "C3's negative control"]
