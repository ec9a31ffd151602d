import pandas as pd
import pytest

from mlsysrepro.core import beside_paper, resolve
from mlsysrepro.papers import llcg


def log(graph, partition, method, scores, model_bytes=0, **labels):
    return pd.DataFrame({"round": range(len(scores)), "val_score": scores, "test_score": scores,
                         "bytes": [0] + [model_bytes] * (len(scores) - 1), "graph": graph, "partition": partition,
                         "method": method, **labels})


def test_final_score_is_the_mean_of_the_last_rounds_and_gaps_subtract_it_from_the_single_machine():
    frame = pd.concat([
        log("g", "none", "single machine", [0.1, 0.5, 0.9, 0.7]),
        log("g", "metis", "PSGD-PA", [0.1, 0.6, 0.6, 0.6]),
        log("g", "metis", "LLCG", [0.1, 0.7, 0.8, 0.8]),
        log("g", "random", "PSGD-PA", [0.1, 0.2, 0.5, 0.3]),
    ])
    final = llcg.final(frame, tail=2, keys=["partition", "method"])
    assert final[("none", "single machine")] == pytest.approx(0.8)
    gaps = llcg.gaps(frame, tail=2)
    assert gaps.loc[("g", "metis"), "PSGD-PA"] == pytest.approx(0.2)
    assert gaps.loc[("g", "metis"), "LLCG"] == pytest.approx(0.0)
    assert gaps.loc[("g", "random"), "PSGD-PA"] == pytest.approx(0.4)


def test_table1_averages_seeds_and_megabytes_skip_the_initial_round():
    frame = pd.concat([log("g", "metis", "LLCG", [0.0, 0.5], model_bytes=2e6, model="gcn", seed=0),
                       log("g", "metis", "LLCG", [0.0, 0.7], model_bytes=2e6, model="gcn", seed=1)])
    table = llcg.table1(frame, tail=1)
    assert table.loc[("gcn", "LLCG"), "score mean"] == pytest.approx(60.0)
    assert table.loc[("gcn", "LLCG"), "score std"] == pytest.approx(14.142, abs=1e-3)
    assert table.loc[("gcn", "LLCG"), "MB per round"] == pytest.approx(2.0)


CLAIMS = {claim.id: claim for claim in llcg.CLAIMS}


def gap_table(psgd: list[float], llcg_gaps: list[float], ggs: list[float]) -> pd.DataFrame:
    index = pd.MultiIndex.from_product([[f"g{i}" for i in range(len(psgd) // 2)], ["metis", "random"]],
                                       names=["graph", "partition"])
    return pd.DataFrame({"PSGD-PA": psgd, "LLCG": llcg_gaps, "GGS": ggs}, index=index)


def steady(table: pd.DataFrame) -> pd.Series:
    """A single machine that keeps its score on every graph of ``table``."""
    graphs = table.index.get_level_values("graph").unique()
    return pd.Series(0.0, index=pd.Index(graphs, name="graph"))


def test_gap_claims_hold_as_in_the_paper_and_fail_when_the_baseline_passes_too():
    from mlsysrepro.core.claims import verdict

    paper_like = gap_table([0.05, 0.08] * 5, [0.0, 0.002] * 5, [0.001, 0.003] * 5)
    drop = steady(paper_like)
    assert verdict(CLAIMS["C1"], llcg.gap_claim(paper_like, "PSGD-PA", drop, baseline="LLCG"))[0] == "holds"
    assert verdict(CLAIMS["C2"], llcg.gap_claim(paper_like, "LLCG", drop, baseline="PSGD-PA"))[0] == "holds"
    assert verdict(CLAIMS["C9"], llcg.gap_claim(paper_like, "GGS", drop, baseline="PSGD-PA"))[0] == "holds"
    no_gap = gap_table([0.0, 0.002] * 5, [0.0, 0.002] * 5, [0.0, 0.0] * 5)  # PSGD-PA reaches the single machine too
    assert verdict(CLAIMS["C1"], llcg.gap_claim(no_gap, "PSGD-PA", steady(no_gap), baseline="LLCG"))[0] == "fails"
    result, why = verdict(CLAIMS["C2"], llcg.gap_claim(no_gap, "LLCG", steady(no_gap), baseline="PSGD-PA"))
    assert result == "fails" and "baseline" in why


def test_gap_claims_leave_out_the_graphs_where_the_single_machine_overfits():
    table = gap_table([0.05, 0.08, -0.03, -0.04], [0.0, 0.002, 0.0, 0.0], [0.0] * 4)
    drop = pd.Series({"g0": 0.001, "g1": 0.05}).rename_axis("graph")  # g1's reference ends 5 points below its best
    measured = llcg.gap_claim(table, "PSGD-PA", drop, baseline="LLCG")
    assert set(measured.per_setting) == {"g0, metis", "g0, random"}
    assert set(measured.baseline.per_setting) == {"g0, metis", "g0, random"}
    assert "not judged, the single machine overfits: g1 (drops 0.050)" in measured.note
    assert set(llcg.gap_claim(table, "PSGD-PA", drop.clip(upper=0.0)).per_setting) == {
        "g0, metis", "g0, random", "g1, metis", "g1, random"}


def test_cut_effect_compares_random_with_metis_per_graph():
    from mlsysrepro.core.claims import verdict

    grows = llcg.cut_effect(gap_table([0.01, 0.05] * 5, [0.0] * 10, [0.0] * 10))
    assert grows.per_setting == {f"g{i}": pytest.approx(0.04) for i in range(5)}
    assert verdict(CLAIMS["C7"], grows)[0] == "holds"
    assert verdict(CLAIMS["C7"], llcg.cut_effect(gap_table([0.05, 0.01] * 5, [0.0] * 10, [0.0] * 10)))[0] == "fails"


def test_correction_parity_reads_the_sampled_and_full_rows_and_needs_the_correction_to_matter():
    """The old C6 subtracted the first two rows of the sorted index: full neighbours minus the single machine."""
    from mlsysrepro.core.claims import verdict

    correction = pd.Series({"full neighbours": 0.80, "none (single machine)": 0.95, "sampled (10 per layer)": 0.805})
    measured = llcg.correction_parity(correction, uncorrected=0.70)
    assert measured.value == pytest.approx(0.005)
    assert verdict(CLAIMS["C6"], measured)[0] == "holds"
    no_effect = llcg.correction_parity(correction, uncorrected=0.80)  # the correction does not matter
    assert verdict(CLAIMS["C6"], no_effect)[0] == "not testable here"
    far = pd.Series({"full neighbours": 0.90, "none (single machine)": 0.95, "sampled (10 per layer)": 0.80})
    assert verdict(CLAIMS["C6"], llcg.correction_parity(far, uncorrected=0.70))[0] == "fails"


def test_counted_bytes_ratio_and_ggs_ratio():
    from mlsysrepro.core.claims import verdict

    logs = pd.concat([log("g", "metis", "LLCG", [0.1, 0.2, 0.3], model_bytes=0).assign(engine="distributed",
                                                                                    model_bytes=[0, 8, 8]),
                      log("g", "metis", "PSGD-PA", [0.1, 0.2, 0.3]).assign(engine="distributed", model_bytes=[0, 8, 8]),
                      log("g", "metis", "LLCG", [0.1, 0.2, 0.3]).assign(engine="serial", model_bytes=[0, 1, 1])])
    assert verdict(CLAIMS["C3"], llcg.counted_bytes_ratio(logs))[0] == "holds"
    logs.loc[(logs.method == "LLCG") & (logs.engine == "distributed"), "model_bytes"] = [0, 16, 16]
    assert verdict(CLAIMS["C3"], llcg.counted_bytes_ratio(logs))[0] == "fails"
    paper = pd.DataFrame([dict(graph=g, partition=p, method=m, bytes=b)
                          for g in ("a", "b", "c") for p in ("metis", "random")
                          for m, b in (("GGS", 5e8), ("LLCG", 1e6))])
    trained = pd.concat([log(g, p, m, [0.0, 0.1], model_bytes=b) for g in ("a", "b", "c") for p in ("metis", "random")
                         for m, b in (("GGS", 1e7), ("LLCG", 1e6))])
    measured = llcg.ggs_over_llcg(paper, trained)
    assert measured.value == pytest.approx(500.0) and "a, metis 10" in measured.note
    assert verdict(CLAIMS["C4"], measured)[0] == "holds"
    assert verdict(CLAIMS["C4"], llcg.ggs_over_llcg(paper.assign(bytes=1e6), trained))[0] == "fails"
    itself = llcg.ggs_over_llcg(paper, trained, "LLCG")  # the negative control: LLCG against itself
    assert itself.value == pytest.approx(1.0) and verdict(CLAIMS["C4"], measured.controlled(itself))[0] == "holds"


def test_runs_reject_an_unknown_engine():
    settings = resolve("llcg", llcg.PRESETS, {"scale": "smoke", "engine": "mpi"})
    with pytest.raises(ValueError, match=r"parameter 'engine' must be one of \['serial', 'distributed'\]"):
        llcg.Runs(settings)


def test_settings_are_set_beside_the_paper_preset():
    table = beside_paper(resolve("llcg", llcg.PRESETS, {"scale": "smoke"}), llcg.PAPER_SETTING)
    assert table.loc["parts", "paper"] == llcg.PRESETS["paper"]["parts"]
    assert table.loc["rounds", "this run (smoke)"] == llcg.PRESETS["smoke"]["rounds"]


def test_local_steps_gap_takes_the_better_schedule_and_model_margins_every_model():
    from mlsysrepro.core.claims import verdict

    assert llcg.local_steps_gap(0.9, growing=0.85, best_k=0.87).value == pytest.approx(0.03)
    assert verdict(CLAIMS["C5"], llcg.local_steps_gap(0.9, growing=0.85, best_k=0.895))[0] == "fails"
    table = pd.DataFrame({"score mean": [70.0, 71.0, 60.0, 62.0, 50.0, 49.0]},
                         index=pd.MultiIndex.from_product([["gcn", "gat", "appnp"], ["PSGD-PA", "LLCG"]],
                                                          names=["model", "method"]))
    measured = llcg.model_margins(table)
    assert measured.per_setting == {"gcn": 1.0, "gat": 2.0, "appnp": -1.0}
    assert verdict(CLAIMS["C8"], measured)[0] == "fails"  # "every model": one behind is enough
    ahead = table.assign(**{"score mean": [70.0, 71.0, 60.0, 62.0, 49.0, 50.0]})
    assert verdict(CLAIMS["C8"], llcg.model_margins(ahead).controlled(llcg.model_margins(ahead, reversed_=True)))[0] \
        == "holds"
    tied = table.assign(**{"score mean": [70.0, 70.0, 60.0, 60.0, 50.0, 50.0]})  # a tie passes ">= 0" both ways
    assert verdict(CLAIMS["C8"], llcg.model_margins(tied).controlled(llcg.model_margins(tied, reversed_=True)))[0] \
        == "not testable here"
    # C5: more local steps leave the gap, and the correction removes it; where it does not, the rule cannot tell
    stays = llcg.local_steps_gap(0.9, growing=0.85, best_k=0.87)
    assert verdict(CLAIMS["C5"], stays.controlled(llcg.corrected_gap(0.9, 0.898)))[0] == "holds"
    assert verdict(CLAIMS["C5"], stays.controlled(llcg.corrected_gap(0.9, 0.86)))[0] == "not testable here"
    assert verdict(CLAIMS["K1"], llcg.engines_agree(1e-7))[0] == "holds"


def test_gaps_at_the_best_round_read_each_seeds_peak_so_an_overfitting_single_machine_is_not_understated():
    frame = pd.concat([
        log("g", "none", "single machine", [0.1, 0.9, 0.6, 0.6], seed=0),  # peaks, then overfits
        log("g", "none", "single machine", [0.1, 0.7, 0.6, 0.6], seed=1),
        log("g", "metis", "PSGD-PA", [0.1, 0.6, 0.7, 0.7], seed=0),
        log("g", "metis", "PSGD-PA", [0.1, 0.6, 0.7, 0.7], seed=1),
    ])
    assert llcg.gaps(frame, tail=2).loc[("g", "metis"), "PSGD-PA"] == pytest.approx(-0.1)
    assert llcg.gaps(frame, tail=2, score="best").loc[("g", "metis"), "PSGD-PA"] == pytest.approx(0.8 - 0.7)
    with pytest.raises(ValueError, match="score must be one of"):
        llcg.gaps(frame, tail=2, score="last")
    steady_drop = pd.Series({"g": 0.0}).rename_axis("graph")
    measured = llcg.gap_claim(llcg.gaps(frame, 2), "PSGD-PA", steady_drop,
                              best_table=llcg.gaps(frame, 2, score="best"))
    assert "at the best round: median +0.1000, 1 of 1" in measured.note
    drop = llcg.single_machine_drop(frame, tail=2)
    assert drop.loc["g"] == pytest.approx((0.9 + 0.7) / 2 - 0.6)
    left = llcg.gap_claim(llcg.gaps(frame, 2), "PSGD-PA", drop)
    assert left.not_testable.startswith("the single machine overfits on every graph, ending g (drops 0.200)")


def test_skew_effect_compares_what_the_correction_recovers_on_the_more_and_the_less_skewed_partition():
    table = gap_table([0.05, 0.01, 0.04, 0.02], [0.01, 0.01, 0.0, 0.02], [0.0] * 4)
    skews = pd.Series({("g0", "metis"): 0.5, ("g0", "random"): 0.01, ("g1", "metis"): 0.02,
                       ("g1", "random"): 0.3}).rename_axis(["graph", "partition"])
    measured = llcg.skew_effect(table, skews)
    # g0: metis (skewed) recovers 0.04, random 0.0 -> +0.04; g1: random (skewed) recovers 0.0, metis 0.04 -> -0.04
    assert measured.per_setting == pytest.approx({"g0": 0.04, "g1": -0.04})


def test_gaps_per_seed_pair_each_seed_with_the_single_machine_of_the_same_seed_and_carry_intervals():
    frame = pd.concat([log("g", "none", "single machine", [0.8, 0.8], seed=0),
                       log("g", "none", "single machine", [0.6, 0.6], seed=1),
                       log("g", "metis", "PSGD-PA", [0.7, 0.7], seed=0),
                       log("g", "metis", "PSGD-PA", [0.5, 0.5], seed=1),
                       log("g", "random", "PSGD-PA", [0.75, 0.75], seed=0),
                       log("g", "random", "PSGD-PA", [0.58, 0.58], seed=1)])
    per_seed = llcg.gaps(frame, tail=1, by_seed=True)["PSGD-PA"]
    assert per_seed.loc[("g", "metis", 0)] == pytest.approx(0.1) and per_seed.loc[("g", "metis", 1)] == \
        pytest.approx(0.1)
    measured = llcg.gap_claim(llcg.gaps(frame, tail=1, by_seed=True), "PSGD-PA", pd.Series({"g": 0.0}))
    assert measured.per_setting == pytest.approx({"g, metis": 0.1, "g, random": 0.035})
    assert measured.per_setting_interval["g, random"][0] < 0.035 < measured.per_setting_interval["g, random"][1]
