"""Dally's claim measurements on hand-made tables: where each claim must hold and where it must fail."""

import pandas as pd
import pytest

from mlsysrepro.core.claims import verdict
from mlsysrepro.papers import dally

CLAIMS = {claim.id: claim for claim in dally.CLAIMS}


def trace_table(dally_over_tiresias: dict[str, float]) -> pd.DataFrame:
    rows = []
    for trace, ratio in dally_over_tiresias.items():
        rows += [dict(trace=trace, policy="tiresias", makespan_s=100.0, jct_mean_s=50.0),
                 dict(trace=trace, policy="dally", makespan_s=100.0 * ratio, jct_mean_s=50.0 * ratio)]
    return pd.DataFrame(rows)


def test_c1_c2_hold_when_dally_wins_on_most_traces():
    table = trace_table({f"t{i}": 0.8 + 0.01 * i for i in range(10)} | {"bad": 1.5})
    for claim, metric in (("C1", "makespan_s"), ("C2", "jct_mean_s")):
        measured = dally.gain_over_traces(table, metric)
        assert verdict(CLAIMS[claim], measured)[0] == "holds"
        assert "no better on: bad" in measured.note


def test_c1_fails_when_only_the_best_trace_wins():
    """The old rule (best of the traces > 0) would have said yes here."""
    table = trace_table({f"t{i}": 1.2 for i in range(15)} | {"best": 0.31})
    measured = dally.gain_over_traces(table, "makespan_s")
    assert verdict(CLAIMS["C1"], measured)[0] == "fails"
    assert "best on best (+69%)" in measured.note


def congestion(dally_hours: float, fifo_hours=10.0, tiresias_hours=10.0) -> pd.DataFrame:
    rows = []
    for level in (1.0, 2.0, 4.0):
        rows += [dict(contention=level, policy="fifo", comm_hours=fifo_hours),
                 dict(contention=level, policy="tiresias", comm_hours=tiresias_hours),
                 dict(contention=level, policy="dally", comm_hours=dally_hours),
                 dict(contention=level, policy="dally_no_migration", comm_hours=dally_hours * 1.5)]
    return pd.DataFrame(rows)


def test_c3_judges_every_contended_level_against_both_baselines():
    sharp = dally.communication_cut(congestion(2.0))
    assert sorted(sharp.per_setting) == ["vs fifo, 2x", "vs fifo, 4x", "vs tiresias, 2x", "vs tiresias, 4x"]
    assert verdict(CLAIMS["C3"], sharp)[0] == "holds"
    assert "without re-placement, vs Tiresias: +70% at 2x, +70% at 4x" in sharp.note
    assert verdict(CLAIMS["C3"], dally.communication_cut(congestion(8.0)))[0] == "fails"  # a 20 % cut
    assert verdict(CLAIMS["C3"], dally.communication_cut(congestion(2.0, fifo_hours=3.0)))[0] != "holds"


def test_c3_is_not_testable_without_congestion():
    table = congestion(2.0)
    assert verdict(CLAIMS["C3"], dally.communication_cut(table[table.contention == 1.0]))[0] == "not testable here"


def timer_table(auto_jct: float, fixed_jct: list[float], traces=("a", "b", "c", "d", "e", "f")) -> pd.DataFrame:
    pairs = [(0, 0), (6, 12), (16, 20), (96, 192)]
    rows = []
    for trace in traces:
        rows += [dict(trace=trace, policy="dally_fixed", timers=f"({r}, {n})", rack_wait=r, network_wait=n,
                      jct_mean_s=j) for (r, n), j in zip(pairs, fixed_jct)]
        rows += [dict(trace=trace, policy="dally", timers="auto-tuned", jct_mean_s=auto_jct)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("auto, expected", [(101.0, "holds"), (130.0, "fails")])
def test_c4_compares_with_the_best_fixed_pair_the_tuner_could_set(auto, expected):
    # (96, 192) is the best of the grid but past the caps of a 20-lease history (16, 20); (0, 0) below the floors
    measured = dally.autotuner_vs_best_fixed(timer_table(auto, [90.0, 100.0, 110.0, 80.0]), history=20)
    assert verdict(CLAIMS["C4"], measured)[0] == expected
    assert measured.value == pytest.approx(auto / 100.0)
    assert f"a: (6, 12) in reach, (96, 192) over the grid ({80 / auto:.3f} of the tuner's JCT)" in measured.note
    # a longer history lifts the caps to (80, 100): still short of (96, 192)
    assert dally.autotuner_vs_best_fixed(timer_table(auto, [90.0, 110.0, 100.0, 80.0]), history=100).value == \
        pytest.approx(auto / 100.0)


def test_c4_without_a_pair_in_reach_is_not_testable():
    table = timer_table(100.0, [90.0, 100.0, 110.0, 80.0])
    measured = dally.autotuner_vs_best_fixed(table[~table.timers.isin(["(6, 12)", "(16, 20)"])], history=20)
    assert verdict(CLAIMS["C4"], measured)[0] == "not testable here" and "fixed_timers" in measured.not_testable


def test_c4_leaves_out_traces_where_the_timers_cannot_matter_and_its_control_is_the_shortest_pair():
    matter = timer_table(101.0, [130.0, 100.0, 110.0, 80.0], traces=("a", "b"))
    flat = timer_table(100.0, [100.0, 100.0, 100.0, 100.0], traces=("alibaba",))  # every pair the tuner's JCT
    measured = dally.autotuner_vs_best_fixed(pd.concat([matter, flat]), history=20)
    assert set(measured.per_setting) == {"a", "b"} and "left out, no pair in reach 5% worse" in measured.note
    assert "alibaba" in measured.note
    control = dally.autotuner_vs_best_fixed(pd.concat([matter, flat]), history=20, control=True)
    assert control.value == pytest.approx(1.3)  # (0, 0), no delay scheduling, 30 % behind the best pair in reach
    assert verdict(CLAIMS["C4"], measured.controlled(control))[0] == "holds"
    only_flat = dally.autotuner_vs_best_fixed(flat, history=20)
    assert verdict(CLAIMS["C4"], only_flat)[0] == "not testable here" and "matter on no trace" in only_flat.not_testable
    blind = timer_table(101.0, [101.0, 100.0, 110.0, 80.0], traces=("a", "b"))  # no timers at all does as well
    both = dally.autotuner_vs_best_fixed(blind, 20).controlled(dally.autotuner_vs_best_fixed(blind, 20, control=True))
    assert verdict(CLAIMS["C4"], both)[0] == "not testable here"


def test_c1_and_c2_carry_the_tie_control():
    table = pd.DataFrame([dict(trace=t, policy=p, makespan_s=m) for t in "abc"
                          for p, m in (("tiresias", 100.0), ("dally", 80.0))])
    measured = dally.gain_over_traces(table, "makespan_s")
    assert measured.control.value == 0.0 and verdict(CLAIMS["C1"], measured)[0] == "holds"
