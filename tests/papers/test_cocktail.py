"""Cocktail's claim measurements on hand-made tables, its constraint classes, and one served setting end to end."""

import numpy as np
import pandas as pd
import pytest

from mlsysrepro.core.claims import verdict
from mlsysrepro.core.settings import resolve
from mlsysrepro.papers import cocktail
from mlsysrepro.serving.ensemble import Voter

CLAIMS = {claim.id: claim for claim in cocktail.CLAIMS}


def apart(ratios: list[float], i: int) -> list[float]:
    """``ratios`` moved by a trifle for setting ``i``: distinct runs (identical runs are counted once)."""
    return [r + 1e-6 * i for r in ratios]


def table(cocktail_over_infaas: dict[str, list[float]], clipper=3.0, infaas_accuracy=0.95) -> pd.DataFrame:
    rows = []
    for setting, ratios in cocktail_over_infaas.items():
        for seed, ratio in enumerate(ratios):
            for policy, cost in (("infaas", 100.0), ("cocktail", 100.0 * ratio), ("clipper", 100.0 * clipper)):
                rows.append(dict(trace="t", constraint=setting, seed=seed, policy=policy, cost=cost,
                                 models_mean={"infaas": 1, "cocktail": 3, "clipper": 10}[policy],
                                 accuracy=infaas_accuracy if policy == "infaas" else 0.95, target=0.94,
                                 target_attainment=0.95 if policy == "cocktail" else 0.5))
    return pd.DataFrame(rows)


def test_c1_holds_when_cocktail_is_cheaper_on_most_settings_and_fails_when_only_one_is():
    cheap = table({f"c{i}": apart([0.6, 0.62, 0.61], i) for i in range(5)} | {"dear": [1.3, 1.31, 1.29]})
    measured = cocktail.at_equal_accuracy(cheap, "cost")
    assert verdict(CLAIMS["C1"], measured)[0] == "holds"
    assert "6 of 6 settings at equal accuracy" in measured.note and "highest on t | dear (1.30)" in measured.note
    one = table({f"c{i}": apart([1.2, 1.21, 1.19], i) for i in range(5)} | {"best": [0.5, 0.5, 0.51]})
    assert verdict(CLAIMS["C1"], cocktail.at_equal_accuracy(one, "cost"))[0] == "fails"


def test_cost_is_compared_only_where_both_policies_reach_the_target():
    cheap = table({f"c{i}": apart([0.6, 0.62, 0.61], i) for i in range(4)})
    # InFaaS misses the target on c0 in one seed: c0 leaves the comparison, named in the note
    missed = cheap.copy()
    missed.loc[(missed.constraint == "c0") & (missed.policy == "infaas") & (missed.seed == 1), "accuracy"] = 0.93
    measured = cocktail.at_equal_accuracy(missed, "cost")
    assert "3 of 4 settings at equal accuracy" in measured.note and "t | c0 (target 0.9400" in measured.note
    assert set(measured.per_setting) == {"t | c1", "t | c2", "t | c3"}
    nowhere = table({"c0": [0.6, 0.6, 0.6]}, infaas_accuracy=0.9)
    assert verdict(CLAIMS["C1"], cocktail.at_equal_accuracy(nowhere, "cost"))[0] == "not testable here"


def test_a_setting_whose_seeds_straddle_one_is_undecided():
    noisy = table({f"c{i}": apart([0.5, 1.5, 0.9], i) for i in range(3)})
    assert verdict(CLAIMS["C1"], cocktail.at_equal_accuracy(noisy, "cost"))[0] == "inconclusive"


def test_c2_c3_read_clipper_and_c4_reads_cocktails_attainment_on_reachable_classes():
    rows = table({f"c{i}": apart([0.7, 0.7, 0.71], i) for i in range(3)})
    assert verdict(CLAIMS["C2"], cocktail.at_equal_accuracy(rows, "cost", "cocktail", "clipper"))[0] == "holds"
    models = cocktail.ratio_over_settings(rows, "models_mean", "cocktail", "clipper")
    assert models.value == pytest.approx(0.3) and verdict(CLAIMS["C3"], models)[0] == "holds"
    reachable = pd.Series({"c0": 0.002, "c1": 0.01, "c2": 0.0})
    attainment = cocktail.attainment_over_settings(rows, reachable).given(target_bites=0.5)
    assert attainment.value == pytest.approx(0.95) and verdict(CLAIMS["C4"], attainment)[0] == "holds"
    assert "InFaaS: median 0.50" in attainment.note
    assert verdict(CLAIMS["C4"], attainment.given(target_bites=0.1))[0] == "not testable here"  # an easy target
    low = rows.assign(target_attainment=0.6)
    assert verdict(CLAIMS["C4"], cocktail.attainment_over_settings(low, reachable).given(target_bites=0.5))[0] == \
        "fails"
    # a class whose target no selection reaches on validation leaves C4's settings; with none left, not testable
    one_out = cocktail.attainment_over_settings(low, reachable.replace({0.002: -0.0005}))
    assert set(one_out.per_setting) == {"t | c1", "t | c2"} and "c0 (best -0.0005 from its target)" in one_out.note
    none = cocktail.attainment_over_settings(low, reachable - 1)
    assert verdict(CLAIMS["C4"], none)[0] == "not testable here"


def test_the_tie_control_fails_every_comparison_claim_and_c5_no_longer_passes_a_tie():
    rows = table({f"c{i}": apart([0.7, 0.7, 0.71], i) for i in range(3)})
    measure = lambda frame: cocktail.at_equal_accuracy(frame, "cost", "cocktail", "infaas")  # noqa: E731
    control = cocktail.tie(measure, rows, "infaas")
    # this table's InFaaS costs 100 in every setting and seed: one run, counted once
    assert control.value == pytest.approx(1.0) and list(control.merged) == ["t | c1", "t | c2"]
    for claim_id in ("C1", "C2", "C5", "C7"):
        assert verdict(CLAIMS[claim_id], control)[0] == "fails", claim_id
    assert verdict(CLAIMS["C1"], measure(rows).controlled(control))[0] == "holds"


def test_target_bites_counts_the_admitted_models_that_miss_each_target():
    from types import SimpleNamespace

    labels = np.zeros(10, dtype=int)
    predictions = np.array([[0] * 10, [0] * 9 + [1], [0] * 5 + [1] * 5, [1] * 10])  # 100, 90, 50, 0 % on test
    zoo = SimpleNamespace(test_predictions=predictions, test_labels=labels)
    voter = SimpleNamespace(accuracy=lambda p, y, members: float((p[members[0]] == y).mean()))
    classes = pd.DataFrame([dict(name="tight", slo_ms=5.0, target=0.95), dict(name="loose", slo_ms=50.0, target=0.4)])
    experiment = SimpleNamespace(zoo=zoo, voter=voter, latency_ms=np.array([20.0, 1.0, 1.0, 1.0]), classes=classes)
    bites = cocktail.target_bites(experiment, pd.Series({"tight": 0.0, "loose": 0.1}))
    assert bites.value == pytest.approx((1 + 1 / 4) / 2)  # tight: the 3 fast models all miss 95 %; loose: 1 of 4
    assert "tight 1.00, loose 0.25" in bites.note


def test_clippers_pool_is_redrawn_on_validation_bootstraps():
    from types import SimpleNamespace

    labels = np.zeros(400, dtype=int)
    rng = np.random.default_rng(0)
    clear = np.stack([rng.random(400) > e for e in (0.01, 0.2, 0.3)]).astype(int) ^ 1  # 1 % error far from 20 %
    clear = 1 - clear
    experiment = SimpleNamespace(zoo=SimpleNamespace(val_predictions=1 - (1 - clear), val_labels=labels),
                                 voter=SimpleNamespace(priority=(clear == labels).mean(1)),
                                 latency_ms=np.ones(3), classes=pd.DataFrame([dict(name="c", slo_ms=5.0)]))
    assert cocktail.pool_resamples(experiment, 1.67, resamples=50).all()  # the best is far ahead: always alone
    close = np.stack([rng.random(400) > e for e in (0.05, 0.06)]).astype(int)  # 5 % and 6 % error: at the edge
    close = 1 - close
    edge = SimpleNamespace(zoo=SimpleNamespace(val_predictions=close, val_labels=labels),
                           voter=SimpleNamespace(priority=(close == labels).mean(1)), latency_ms=np.ones(2),
                           classes=pd.DataFrame([dict(name="c", slo_ms=5.0)]))
    same = cocktail.pool_resamples(edge, 1.1, resamples=200)
    assert 0.1 < same.mean() < 0.9  # the pool hangs on a few images
    from mlsysrepro.core.claims import across, fragility

    held = cocktail.with_pool_resamples(across({"a": 0.5, "b": 0.4}), same)
    assert fragility(CLAIMS["C3"], held.controlled(across({"a": 1.0, "b": 1.0})))[0].startswith("holds on only")


def test_a_target_is_reachable_where_the_best_selection_meets_it_on_validation():
    from types import SimpleNamespace

    classes = pd.DataFrame({"name": ["strict", "loose"], "target": [0.974, 0.95]})
    selections = pd.DataFrame({"constraint": ["strict", "strict", "loose", "loose"],
                               "val_accuracy": [0.9735, 0.97, 0.96, 0.93]})
    margins = cocktail.reachable_classes(SimpleNamespace(classes=classes), selections)
    assert margins["strict"] == pytest.approx(-0.0005) and margins["loose"] == pytest.approx(0.01)


def test_c6_compares_the_longest_interval_with_the_shortest_and_needs_pruning_to_act():
    rows = [dict(constraint=c, seed=seed, window=w, selected=4.0, models_mean=m)
            for c in ("a", "b") for seed in (0, 1, 2) for w, m in ((10, 2.0 + 0.01 * seed), (120, 3.0))]
    measured = cocktail.interval_effect(pd.DataFrame(rows))
    assert measured.value == pytest.approx(1.49, abs=0.01) and verdict(CLAIMS["C6"], measured)[0] == "holds"
    idle = cocktail.interval_effect(pd.DataFrame(rows).assign(models_mean=4.0))
    assert verdict(CLAIMS["C6"], idle)[0] == "not testable here", "nothing pruned: the interval cannot matter"


def test_c8_is_not_testable_because_revocations_never_change_an_ensemble():
    rows = pd.DataFrame({"policy": ["Cocktail"] * 2, "revocation_per_hour": [0.0, 4.0], "accuracy": [0.95, 0.95],
                         "dropped_share": [0.0, 0.01]})
    measured = cocktail.revocation_accuracy(rows)
    assert verdict(CLAIMS["C8"], measured)[0] == "not testable here" and "+0.00 points" in measured.not_testable


def test_clippers_pool_keeps_the_models_within_the_error_ratio_of_the_best_eligible_one():
    from types import SimpleNamespace

    voter = SimpleNamespace(priority=np.array([0.98, 0.965, 0.95, 0.80]))
    experiment = SimpleNamespace(voter=voter, latency_ms=np.array([20.0, 1.0, 1.0, 1.0]))
    assert cocktail.clipper_pool(experiment, 30.0, 1.67) == (0,), "errors up to 3.3 %: the 3.5 % model is out"
    assert cocktail.clipper_pool(experiment, 5.0, 1.67) == (1, 2), "the best eligible errs 3.5 %: up to 5.8 %"
    assert cocktail.clipper_pool(experiment, 5.0, 10.0) == (1, 2, 3)
    with pytest.raises(ValueError, match="no model meets the latency SLO"):
        cocktail.clipper_pool(experiment, 0.5, 1.67)


def test_k1_k2_check_every_run():
    runs = pd.DataFrame({"invariants": ["ok", "ok"], "policy": ["infaas"] * 2, "accuracy": [0.95, 0.9],
                         "model_test_accuracy": [0.951, 0.9]})
    assert cocktail.invariants_held(runs).value is True
    broken = runs.assign(invariants=["ok", "admitted + dropped differs from the arrivals"])
    assert cocktail.invariants_held(broken).value is False and "admitted" in cocktail.invariants_held(broken).note
    assert cocktail.replay_consistency(runs).value == pytest.approx(0.001)


def test_constraint_classes_are_set_from_the_most_accurate_model():
    predictions = np.array([[0, 1, 2, 3], [0, 1, 2, 0]])
    voter = Voter.fit(predictions, np.array([0, 1, 2, 3]))
    classes = cocktail.constraint_classes(None, voter, np.array([10.0, 2.0]), [[0.5, 1.0], [2.0, 0.0]])
    assert classes.slo_ms.tolist() == [5.0, 20.0] and classes.target.tolist() == [0.99, 1.0]
    with pytest.raises(ValueError, match="slo_factor > 0, gap_points >= 0"):
        cocktail.constraint_classes(None, voter, np.array([10.0, 2.0]), [[0.5]])


@pytest.mark.slow
def test_one_setting_serves_end_to_end_at_smoke_scale():
    settings = resolve("cocktail", cocktail.PRESETS, {"scale": "smoke", "seeds": [0], "serve_hours": 1},
                       cocktail.RANGES)
    trained = cocktail.zoo(settings)
    forecast = cocktail.forecasts(settings)["forecast"][f"openb_folded|0|{settings.predictor}"]
    cocktail_row, infaas_row = cocktail._serve((settings, trained, "openb_folded", 0, 0,
                                                [("cocktail", forecast, {}), ("infaas", forecast, {})]))
    row = cocktail_row
    assert row["invariants"] == infaas_row["invariants"] == "ok" and row["requests"] > 10**6
    assert row["requests"] == infaas_row["requests"], "the runs of a setting serve the same requests"
    assert 0 < row["cost"] and 0 <= row["target_attainment"] <= 1 and row["models_mean"] >= 1


def test_c3_and_c7_leave_out_the_settings_where_clipper_serves_one_model():
    rows = table({"ensembles": [0.7, 0.7, 0.7], "single": [0.7, 0.7, 0.7]})
    rows.loc[(rows.constraint == "single") & (rows.policy == "clipper"), "models_mean"] = 1
    rows = rows.assign(vms_mean=rows.models_mean)
    kept, left_out = cocktail.where_clipper_ensembles(rows)
    assert set(kept.constraint) == {"ensembles"} and left_out == "t | single"
    margins = pd.Series({"ensembles": 0.01, "single": 0.01})
    models = cocktail.models_against_clipper(rows, margins)
    assert set(models.per_setting) == {"t | ensembles"} and "Clipper serves one model: t | single" in models.note
    vms = cocktail.vms_against_clipper(rows)
    assert vms.value == pytest.approx(0.3) and verdict(CLAIMS["C7"], vms)[0] == "holds"
    alone = rows[rows.constraint == "single"]
    assert verdict(CLAIMS["C3"], cocktail.models_against_clipper(alone, margins))[0] == "not testable here"


def test_an_unknown_assumption_is_named():
    settings = resolve("cocktail", cocktail.PRESETS, {"scale": "smoke"}, cocktail.RANGES)
    with pytest.raises(ValueError, match="assumption must be one of"):
        cocktail.comparison_under(settings, "lanes", 8, pd.DataFrame())
    with pytest.raises(ValueError, match="infaas_manager must be one of"):
        cocktail.comparison_under(settings, "infaas_manager", "serverless", pd.DataFrame())
    central = pd.DataFrame({"policy": ["cocktail"]})
    assert cocktail.comparison_under(settings, "slot_speed", 1.0, central) is central
    assert cocktail.comparison_under(settings, "clipper_pool", settings.clipper_pool, central) is central
    assert cocktail.comparison_under(settings, "models_per_vm", settings.models_per_vm, central) is central


@pytest.mark.parametrize("knobs, message", [
    ({"main_class": 7}, r"parameter 'main_class' must be an index of `classes`, 0 to 1, got 7"),
    ({"main_trace": "nosuch"}, r"parameter 'main_trace' must be one of `traces` \['openb_folded'\], got 'nosuch'"),
    ({"traces": ["openb_folded", "nosuch"]}, r"parameter 'traces' must name traces of"),
    ({"seeds": []}, r"parameter 'seeds' must not be empty"),
    ({"batches": [8, 32]}, r"parameter 'batches' must include 1 and the serving `batch` 32"),
])
def test_knobs_that_disagree_are_refused_naming_the_parameter(knobs, message):
    settings = resolve("cocktail", cocktail.PRESETS, {"scale": "smoke", **knobs}, cocktail.RANGES)
    with pytest.raises(ValueError, match=message):
        cocktail.check_knobs(settings)
