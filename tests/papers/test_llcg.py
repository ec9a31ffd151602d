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


def test_runs_reject_an_unknown_engine():
    settings = resolve("llcg", llcg.PRESETS, {"scale": "smoke", "engine": "mpi"})
    with pytest.raises(ValueError, match=r"parameter 'engine' must be one of \['serial', 'distributed'\]"):
        llcg.Runs(settings)


def test_settings_are_set_beside_the_paper_preset():
    table = beside_paper(resolve("llcg", llcg.PRESETS, {"scale": "smoke"}), llcg.PAPER_SETTING)
    assert table.loc["parts", "paper"] == llcg.PRESETS["paper"]["parts"]
    assert table.loc["rounds", "this run (smoke)"] == llcg.PRESETS["smoke"]["rounds"]
