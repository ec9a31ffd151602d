"""BaKlaVa's claim measurements on hand-made grids: where each must hold and where it must fail."""

import pandas as pd

from mlsysrepro.core.claims import verdict
from mlsysrepro.papers import baklava

CLAIMS = {claim.id: claim for claim in baklava.CLAIMS}


def grid(ppl: dict[str, list[float]], retrieval: dict[str, list[float]], compressions=(0.5, 0.7, 0.85, 0.9),
         policy="snapkv") -> pd.DataFrame:
    return pd.DataFrame([dict(policy=policy, allocator=a, compression=c, ppl=p, retrieval=r)
                         for a in ppl for c, p, r in zip(compressions, ppl[a], retrieval[a])])


def test_c1_holds_only_where_uniform_budgets_fall_short():
    good = grid({"baklava": [6.0, 6.2, 7.0, 8.0], "uniform": [6.1, 6.9, 8.0, 9.0]}, {"baklava": [0] * 4, "uniform": [0] * 4})
    measured = baklava.compression_at_baseline(good, full_ppl=6.0)
    assert (measured.value, measured.baseline.value) == (0.7, 0.5)
    costs = baklava.perplexity_cost(good, 6.0)  # uniform at 90 %: 9.0 / 6.0 - 1
    assert costs.value == 0.5 and verdict(CLAIMS["C1"], measured.given(compression_costs=costs))[0] == "holds"
    both = grid({"baklava": [6.0, 6.2, 7.0, 8.0], "uniform": [6.0, 6.2, 8.0, 9.0]}, {"baklava": [0] * 4, "uniform": [0] * 4})
    judged = baklava.compression_at_baseline(both, full_ppl=6.0).given(compression_costs=baklava.perplexity_cost(both, 6.0))
    assert verdict(CLAIMS["C1"], judged)[0] == "fails"
    # compression that costs nothing: no allocator can stand out, so not testable (never "fails")
    free = grid({"baklava": [6.0, 6.1, 6.2, 6.3], "uniform": [6.0, 6.1, 6.2, 6.4]}, {"baklava": [0] * 4, "uniform": [0] * 4})
    result, why = verdict(CLAIMS["C1"], baklava.compression_at_baseline(free, 6.0).given(
        compression_costs=baklava.perplexity_cost(free, 6.0)))
    assert result == "not testable here" and "measured 0.06667, fails `measured >= 0.1`" in why
    assert baklava.highest_compression(grid({"a": [7.0, 6.0, 6.0, 6.0]}, {"a": [0] * 4}), 6.0, "a") == 0.0


def test_c2_and_c3_carry_intervals_over_the_queries():
    g = grid({"baklava": [6] * 4, "uniform": [6] * 4}, {"baklava": [0.9, 0.9, 0.5, 0.1], "uniform": [0.9, 0.5, 0.05, 0.01]})
    costs = baklava.retrieval_cost(g, 0.9, 0.7, 512)  # uniform loses 0.4 at 70 %
    assert costs.value == 0.4 and costs.interval[0] > 0.1
    assert verdict(CLAIMS["C2"], baklava.retrieval_at(g, 0.9, 0.7, 512).given(compression_costs_retrieval=costs))[0] \
        == "holds"
    few = baklava.retrieval_at(g, 0.9, 0.7, 8).given(compression_costs_retrieval=baklava.retrieval_cost(g, 0.9, 0.7, 8))
    assert verdict(CLAIMS["C2"], few)[0] == "not testable here"  # eight queries cannot even show uniform's loss
    assert verdict(CLAIMS["C3"], baklava.high_compression_gain(g, 512))[0] == "holds"
    noise = grid({"baklava": [6] * 4, "uniform": [6] * 4}, {"baklava": [0, 0, 12 / 128, 0], "uniform": [0, 0, 9 / 128, 0]})
    assert verdict(CLAIMS["C3"], baklava.high_compression_gain(noise, 128))[0] != "holds"


def test_c4_takes_the_weakest_prompt_set():
    agreement = pd.DataFrame([[1.0, 0.99, 0.95, 0.53]], index=["A"], columns=["A", "B", "ptb", "retrieval"])
    measured = baklava.ranking_consistency(agreement)
    assert measured.value == 0.53 and verdict(CLAIMS["C4"], measured)[0] == "fails"


def test_c5_is_strict_and_counts_retrieval_too():
    cells = pd.concat([grid({"baklava": [6.0] * 4, "pyramid": [6.1] * 4, "adakv": [6.2] * 4},
                            {"baklava": [0.5] * 4, "pyramid": [0.4] * 4, "adakv": [0.45] * 4}, policy=p)
                       for p in ("snapkv", "h2o")])
    powered = {"compression_costs": 0.5, "compression_costs_retrieval": 0.4}
    assert verdict(CLAIMS["C5"], baklava.margin_over_rivals(cells).given(**powered))[0] == "holds"
    behind = cells.assign(ppl=cells.ppl.where(cells.allocator != "baklava", 6.15))  # behind PyramidKV by < 1 %
    measured = baklava.margin_over_rivals(behind).given(**powered)
    assert verdict(CLAIMS["C5"], measured)[0] == "fails"
    assert verdict(CLAIMS["C5"], measured.given(compression_costs=0.03))[0] == "not testable here"
    assert "snapkv 50% ppl" in measured.note


def test_k1_reads_the_slowest_budget_with_its_interval():
    speed = pd.DataFrame({"cache": ["full", "baklava 50%", "baklava 90%"], "speedup_vs_full": [1.0, 1.3, 0.9],
                          "speedup_low": [1.0, 1.2, 0.8], "speedup_high": [1.0, 1.4, 1.1]})
    measured = baklava.slowest_decode(speed)
    assert measured.value == 0.9 and measured.interval == (0.8, 1.1)
    assert verdict(CLAIMS["K1"], measured)[0] == "inconclusive"
