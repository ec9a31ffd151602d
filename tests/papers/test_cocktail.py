"""Cocktail's claim measurements on hand-made tables, its constraint classes, and one served setting end to end."""

import numpy as np
import pandas as pd
import pytest

from mlsysrepro.core.claims import verdict
from mlsysrepro.core.settings import resolve
from mlsysrepro.papers import cocktail
from mlsysrepro.serving.ensemble import Voter

CLAIMS = {claim.id: claim for claim in cocktail.CLAIMS}


def table(cocktail_over_infaas: dict[str, list[float]], clipper=3.0) -> pd.DataFrame:
    rows = []
    for setting, ratios in cocktail_over_infaas.items():
        for seed, ratio in enumerate(ratios):
            for policy, cost in (("infaas", 100.0), ("cocktail", 100.0 * ratio), ("clipper", 100.0 * clipper)):
                rows.append(dict(trace="t", constraint=setting, seed=seed, policy=policy, cost=cost,
                                 models_mean={"infaas": 1, "cocktail": 3, "clipper": 10}[policy],
                                 target_attainment=0.95 if policy == "cocktail" else 0.5))
    return pd.DataFrame(rows)


def test_c1_holds_when_cocktail_is_cheaper_on_most_settings_and_fails_when_only_one_is():
    cheap = table({f"c{i}": [0.6, 0.62, 0.61] for i in range(5)} | {"dear": [1.3, 1.31, 1.29]})
    measured = cocktail.ratio_over_settings(cheap, "cost")
    assert verdict(CLAIMS["C1"], measured)[0] == "holds"
    assert "highest on t | dear (1.30)" in measured.note
    one = table({f"c{i}": [1.2, 1.21, 1.19] for i in range(5)} | {"best": [0.5, 0.5, 0.51]})
    assert verdict(CLAIMS["C1"], cocktail.ratio_over_settings(one, "cost"))[0] == "fails"


def test_a_setting_whose_seeds_straddle_one_is_undecided():
    noisy = table({f"c{i}": [0.5, 1.5, 0.9] for i in range(3)})
    assert verdict(CLAIMS["C1"], cocktail.ratio_over_settings(noisy, "cost"))[0] == "inconclusive"


def test_c2_c3_read_clipper_and_c4_reads_cocktails_attainment():
    rows = table({f"c{i}": [0.7, 0.7, 0.71] for i in range(3)})
    assert verdict(CLAIMS["C2"], cocktail.ratio_over_settings(rows, "cost", "cocktail", "clipper"))[0] == "holds"
    models = cocktail.ratio_over_settings(rows, "models_mean", "cocktail", "clipper")
    assert models.value == pytest.approx(0.3) and verdict(CLAIMS["C3"], models)[0] == "holds"
    attainment = cocktail.attainment_over_settings(rows).given(reachable=0.002)
    assert attainment.value == pytest.approx(0.95) and verdict(CLAIMS["C4"], attainment)[0] == "holds"
    assert "InFaaS: median 0.50" in attainment.note
    low = rows.assign(target_attainment=0.6)
    assert verdict(CLAIMS["C4"], cocktail.attainment_over_settings(low).given(reachable=0.002))[0] == "fails"
    # a target no selection reaches on validation: attainment says nothing about Cocktail
    unreachable = cocktail.attainment_over_settings(low).given(reachable=-0.0005)
    assert verdict(CLAIMS["C4"], unreachable)[0] == "not testable here"


def test_a_target_is_reachable_where_the_best_selection_meets_it_on_validation():
    from types import SimpleNamespace

    classes = pd.DataFrame({"name": ["strict", "loose"], "target": [0.974, 0.95]})
    selections = pd.DataFrame({"constraint": ["strict", "strict", "loose", "loose"],
                               "val_accuracy": [0.9735, 0.97, 0.96, 0.93]})
    reach = cocktail.target_reachable(SimpleNamespace(classes=classes), selections)
    assert reach.value == pytest.approx(-0.0005) and reach.note.startswith("strict: best 0.9735")


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
