"""BaKlaVa's claim measurements on hand-made grids of several models: where each must hold and where it must fail."""

import numpy as np
import pandas as pd
import pytest
import torch

from mlsysrepro.core.claims import verdict
from mlsysrepro.papers import baklava

CLAIMS = {claim.id: claim for claim in baklava.CLAIMS}
QUERIES = 400


def hits(accuracy: float, n: int = QUERIES) -> np.ndarray:
    """n query outcomes with exactly round(accuracy * n) hits, the first ones."""
    return np.arange(n) < round(accuracy * n)


def grid(ppl: dict[str, list[float]], retrieval: dict[str, list[float]], full=(6.0, 0.9), models=(0, 1, 2),
         compressions=(0.5, 0.7, 0.85, 0.9), policy="snapkv") -> pd.DataFrame:
    """Every model gets the same rows: the full cache, then each allocator at each compression."""
    rows = []
    for m in models:
        rows.append(dict(model=m, policy="full", allocator="full", compression=0.0, ppl=full[0], retrieval=full[1],
                         correct=hits(full[1])))
        rows += [dict(model=m, policy=policy, allocator=a, compression=c, ppl=p, retrieval=r, correct=hits(r))
                 for a in ppl for c, p, r in zip(compressions, ppl[a], retrieval[a])]
    return pd.DataFrame(rows)


def context_use(cut_ppl: float, models=(0, 1, 2)) -> pd.DataFrame:
    """Every model's perplexity with its whole context (6.0) and cut to the top compression's share."""
    return pd.DataFrame([dict(model=m, compression=c, kept=k, ppl=p) for m in models
                         for c, k, p in ((0.0, 100, 6.0), (0.9, 10, cut_ppl))])


USED = baklava.context_cost(context_use(9.0))  # the model reads its context: cutting it costs 50 %


def test_c1_is_judged_over_the_models_and_holds_only_where_uniform_budgets_fall_short():
    zero = {"baklava": [0] * 4, "uniform": [0] * 4}
    good = grid({"baklava": [6.0, 6.2, 7.0, 8.0], "uniform": [6.1, 6.9, 8.0, 9.0]}, zero)
    measured = baklava.compression_at_baseline(good, "snapkv")
    assert measured.value == 0.7 and measured.baseline.value == 0.5 and len(measured.per_setting) == 3
    costs = baklava.perplexity_cost(good, "snapkv")  # uniform at 90 %: 9.0 / 6.0 - 1 on every model
    assert costs.value == pytest.approx(0.5)
    assert verdict(CLAIMS["C1"], measured.given(compression_costs=costs, uses_context=USED))[0] == "holds"
    # a model that reads only its last tokens: compression that costs is the policy's doing, and no allocator has
    # perplexity to save, so not testable (with the cut's numbers), however the allocators compare
    unused = baklava.context_cost(context_use(6.1))
    result, why = verdict(CLAIMS["C1"], measured.given(compression_costs=costs, uses_context=unused))
    assert result == "not testable here" and "uses_context" in why and "+1.7%" in why
    both = grid({"baklava": [6.0, 6.2, 7.0, 8.0], "uniform": [6.0, 6.2, 8.0, 9.0]}, zero)
    judged = baklava.compression_at_baseline(both, "snapkv").given(
        compression_costs=baklava.perplexity_cost(both, "snapkv"), uses_context=USED)
    assert verdict(CLAIMS["C1"], judged)[0] == "fails"
    # one model of three reaching 70 % is not the claim: k of n, never the best model
    mixed = pd.concat([good[good.model == 0], both[both.model == 1].assign(
        ppl=lambda f: f.ppl.where(f.allocator != "baklava", 6.9)), both[both.model == 2].assign(
        ppl=lambda f: f.ppl.where(f.allocator != "baklava", 6.9))])
    result, why = verdict(CLAIMS["C1"], baklava.compression_at_baseline(mixed, "snapkv").given(
        compression_costs=costs, uses_context=USED))
    assert result == "fails" and "passes on 1 of 3 settings" in why
    # compression that costs nothing: no allocator can stand out, so not testable (never "fails")
    free = grid({"baklava": [6.0, 6.1, 6.2, 6.3], "uniform": [6.0, 6.1, 6.2, 6.4]}, zero)
    result, why = verdict(CLAIMS["C1"], baklava.compression_at_baseline(free, "snapkv").given(
        compression_costs=baklava.perplexity_cost(free, "snapkv"), uses_context=USED))
    assert result == "not testable here" and "fails `measured >= 0.1`" in why


def test_c2_and_c3_carry_intervals_over_the_queries_and_need_a_model_that_retrieves():
    g = grid({"baklava": [6] * 4, "uniform": [6] * 4}, {"baklava": [0.9, 0.9, 0.5, 0.1], "uniform": [0.9, 0.5, 0.05, 0.01]})
    costs = baklava.retrieval_cost(g, "snapkv", 0.7)  # uniform loses 0.4 at 70 %
    solves = baklava.full_retrieval(g)
    assert costs.value == pytest.approx(0.4) and min(low for low, _ in costs.per_setting_interval.values()) > 0.1
    assert verdict(CLAIMS["C2"], baklava.retrieval_at(g, "snapkv", 0.7).given(
        compression_costs_retrieval=costs, full_cache_retrieves=solves))[0] == "holds"
    assert verdict(CLAIMS["C3"], baklava.high_compression_gain(g, "snapkv").given(full_cache_retrieves=solves))[0] \
        == "holds"
    weak = grid({"baklava": [6] * 4, "uniform": [6] * 4}, {"baklava": [0.3] * 4, "uniform": [0.1] * 4}, full=(6.0, 0.3))
    result, why = verdict(CLAIMS["C3"], baklava.high_compression_gain(weak, "snapkv").given(
        full_cache_retrieves=baklava.full_retrieval(weak)))
    assert result == "not testable here" and "full_cache_retrieves" in why
    noise = grid({"baklava": [6] * 4, "uniform": [6] * 4}, {"baklava": [0, 0, 0.06, 0], "uniform": [0, 0, 0.045, 0]})
    assert verdict(CLAIMS["C3"], baklava.high_compression_gain(noise, "snapkv").given(
        full_cache_retrieves=solves))[0] != "holds"


def agreement(b: float, other: float, retrieval: float) -> pd.DataFrame:
    return pd.DataFrame([[1.0, b, other, retrieval]], index=["A"], columns=["A", "B", "ptb", "retrieval"])


def test_c4_is_judged_per_prompt_set_over_the_models():
    text_only = [agreement(0.99, 0.92, 0.5), agreement(0.98, 0.9, 0.6), agreement(0.97, 0.91, 0.4)]
    measured = baklava.ranking_consistency(text_only)
    assert set(measured.per_setting) == {"B", "ptb", "retrieval"} and measured.per_setting_interval["B"][0] > 0.9
    result, why = verdict(CLAIMS["C4"], measured)
    assert result == "holds" and "passes on 2 of 3 settings" in why
    assert verdict(CLAIMS["C4"], baklava.ranking_consistency(
        [agreement(0.99, 0.5, 0.5), agreement(0.98, 0.6, 0.4), agreement(0.97, 0.55, 0.45)]))[0] == "fails"


def test_c4s_control_compares_different_models_and_catches_a_ranking_the_architecture_fixes():
    import torch

    from mlsysrepro.kvcache.profiling import HeadProfile

    generator = torch.Generator().manual_seed(0)

    def models(layer: torch.Tensor, count: int = 4) -> list[dict]:
        """``count`` models of 8 layers x 8 heads (32 caches), each profiled on four prompt sets that barely differ."""
        made = []
        for _ in range(count):
            head = torch.rand(8, 8, generator=generator) + 0.5
            made.append({k: HeadProfile(head * (1 + 0.01 * torch.rand(8, 8, generator=generator)), layer)
                         for k in ("A", "B", "ptb", "retrieval")})
        return made

    fixed = models(2.0 ** torch.arange(8.0))  # the layer factor dominates: every model ranks the caches alike
    control = baklava.cross_model_consistency(fixed, kv_heads=4)
    assert control.value > 0.8 and verdict(CLAIMS["C4"], control)[0] == "holds"  # the rule passes across models too
    consistent = baklava.ranking_consistency([baklava.consistency(p, 4) for p in fixed])
    assert verdict(CLAIMS["C4"], consistent.controlled(control))[0] == "not testable here"
    own = models(torch.ones(8))  # no layer factor: each model's own heads decide, and models disagree
    apart = baklava.cross_model_consistency(own, kv_heads=4)
    assert verdict(CLAIMS["C4"], apart)[0] == "fails"
    assert verdict(CLAIMS["C4"], baklava.ranking_consistency([baklava.consistency(p, 4) for p in own])
                   .controlled(apart))[0] == "holds"
    assert baklava.cross_model_consistency(own[:1], kv_heads=4).not_testable


def c5_grid(ours: float, rival: float, control: float, models=(0, 1, 2)) -> pd.DataFrame:
    accuracies = {"baklava": [ours] * 4, "pyramid": [rival] * 4, "adakv": [rival - 0.1] * 4, "reversed": [control] * 4}
    return pd.concat([grid({a: [6.0] * 4 for a in accuracies}, accuracies, models=models, policy=p)
                      for p in ("snapkv", "h2o")]).drop_duplicates(subset=["model", "policy", "allocator", "compression"])


POWERED = {"full_cache_retrieves": 0.9, "compression_costs_retrieval": 0.4}


def test_c5_is_paired_non_inferiority_with_a_control_that_must_fail():
    tie = baklava.noninferiority(c5_grid(0.5, 0.5, 0.2))
    assert tie.per_setting["snapkv 70%"] == 0.0 and tie.baseline.per_setting["snapkv 70%"] == pytest.approx(-0.3)
    assert verdict(CLAIMS["C5"], tie.given(**POWERED))[0] == "holds"
    behind = baklava.noninferiority(c5_grid(0.4, 0.5, 0.2))  # 10 points behind, far past the 2.5-point margin
    assert verdict(CLAIMS["C5"], behind.given(**POWERED))[0] == "fails"
    # a control as good as the rivals: the test cannot tell a good allocation from a bad one
    blind = baklava.noninferiority(c5_grid(0.5, 0.5, 0.5))
    assert verdict(CLAIMS["C5"], blind.given(**POWERED))[0] == "not testable here"
    assert verdict(CLAIMS["C5"], tie.given(full_cache_retrieves=0.9, compression_costs_retrieval=0.02))[0] \
        == "not testable here"


def ablated(importance, answer_cost, model: int = 0, ppl_cost=None) -> pd.DataFrame:
    """One model's ablation frame over 16 caches (4 layers x 4 KV heads); the costliest cache in answer log-loss
    also costs the most accuracy, and each cache's accuracy cost is its answer cost's share of the largest."""
    answer_cost = np.asarray(answer_cost, dtype=float)
    ppl_cost = np.linspace(0, 0.1, 16) if ppl_cost is None else np.asarray(ppl_cost, dtype=float)
    return pd.DataFrame({"model": model, "layer": np.arange(16) // 4, "kv_head": np.arange(16) % 4,
                         "importance": importance, "delta_ppl": ppl_cost * 20,
                         "delta_retrieval": answer_cost / answer_cost.max() * 0.9, "answer_cost": answer_cost,
                         "retrieval_cost": answer_cost / answer_cost.max() * 0.9, "ppl_cost": ppl_cost})


def test_c6_ranks_the_caches_against_the_ablation_and_needs_a_ground_truth_with_an_order():
    graded = np.linspace(0.05, 0.6, 16)  # every cache's shrinking costs the answers, each more than the last
    solves = {"full_cache_retrieves": 0.9}
    agree = baklava.ranking_against_ablation([ablated(graded + 1, graded, m) for m in range(3)])
    assert agree.per_setting == {"model 0": pytest.approx(1), "model 1": pytest.approx(1), "model 2": pytest.approx(1)}
    assert verdict(CLAIMS["C6"], agree.given(**solves))[0] == "holds"
    reversed_ = baklava.ranking_against_ablation([ablated(-graded, graded, m) for m in range(3)])
    result, why = verdict(CLAIMS["C6"], reversed_.given(**solves))
    assert result == "fails" and "passes on 0 of 3 settings" in why
    # one costly cache among fifteen that cost nothing: even a heuristic putting it first cannot show rho 0.5
    single = np.r_[np.zeros(15), 0.9]
    blind = baklava.ranking_against_ablation([ablated(np.arange(16), single, m) for m in range(3)])
    result, why = verdict(CLAIMS["C6"], blind.given(**solves))
    assert result == "not testable here" and "ground_truth_ranks" in why
    assert "1 of 16 caches cost measurably; shrinking cache 3.3 costs the most accuracy, 0.90, and its importance " \
           "ranks 1 of 16" in blind.note


def test_c6_is_rejudged_with_and_without_the_layer_factor():
    from mlsysrepro.core.claims import robustness
    from mlsysrepro.kvcache.profiling import HeadProfile

    layer, head = np.arange(16) // 4, np.arange(16) % 4
    cost = layer + 0.1 * head + 0.05  # the ground truth orders the caches by layer first
    # the heads' own scores rank only within a layer, and wrongly; the layer factor supplies the layers' order
    profile = HeadProfile(head=torch.arange(4.0, 0.0, -1).repeat(4, 1), layer=torch.tensor([1.0, 10.0, 100.0, 1000.0]))
    frames = [ablated(np.zeros(16), cost, m) for m in range(3)]
    measured = baklava.ranking_claim(frames, [profile] * 3, baklava.full_retrieval(grid({}, {}, models=(0, 1, 2))))
    assert verdict(CLAIMS["C6"], measured)[0] == "holds"
    layer_factor, ground_truth = robustness(CLAIMS["C6"], measured)
    assert layer_factor["verdicts"] == {"0": "fails", "1": "holds"}
    assert layer_factor["text"].startswith("depends on layer_exponent")
    assert ground_truth["assumption"] == "ground_truth"  # every ground truth of this frame orders by layer first
    assert set(ground_truth["verdicts"]) == {"answer_loss", "retrieval", "perplexity"}


def test_c6_is_rejudged_against_each_ground_truth_with_its_own_power_check():
    from mlsysrepro.core.claims import robustness

    graded = np.linspace(0.05, 0.6, 16)
    # the answers' cost follows the importance; the text's perplexity costs nothing measurable but in one cache
    frames = [ablated(graded, graded, m, ppl_cost=np.r_[np.zeros(15), 0.02]) for m in range(3)]
    solves = baklava.full_retrieval(grid({}, {}, models=(0, 1, 2)))
    measured = baklava.ranking_claim(frames, [flat_profile(graded)] * 3, solves)
    assert verdict(CLAIMS["C6"], measured)[0] == "holds"
    entry = {e["assumption"]: e for e in robustness(CLAIMS["C6"], measured)}["ground_truth"]
    assert entry["verdicts"] == {"answer_loss": "holds", "retrieval": "holds", "perplexity": "not testable here"}
    assert entry["text"].startswith("depends on ground_truth")
    with pytest.raises(ValueError, match="truth must be one of"):
        baklava.ranking_against_ablation(frames, "accuracy")


def flat_profile(importance):
    """A profile whose cache importance (layer factor 1, one query head per KV head) is ``importance``, 4 x 4."""
    from mlsysrepro.kvcache.profiling import HeadProfile

    return HeadProfile(head=torch.as_tensor(importance, dtype=torch.float32).reshape(4, 4), layer=torch.ones(4))


def test_a_cost_within_its_noise_counts_as_none():
    rng = np.random.default_rng(0)
    full = torch.from_numpy(rng.exponential(0.5, 64))
    hurt = full + 0.4 + torch.from_numpy(rng.normal(0, 0.05, 64))  # every query's answer loses about 0.4 nats
    noise = full + torch.from_numpy(rng.normal(0, 0.5, 64))  # no cost: answers move both ways
    costs = baklava.ablation_costs(full, [hurt, noise, full.clone()])
    assert costs.cost[0] == pytest.approx(costs.delta[0]) and costs.low[0] > 0.3
    assert costs.low[1] < 0 < costs.high[1] and costs.cost[1] == 0
    assert costs.cost[2] == 0


def test_the_paired_difference_redraws_items_within_each_model():
    same = [hits(0.5), hits(0.7)]
    assert baklava.paired_difference(same, same) == (0.0, (0.0, 0.0))
    value, (low, high) = baklava.paired_difference([hits(0.6, 400)], [hits(0.5, 400)])
    assert value == pytest.approx(0.1) and 0.06 < low < 0.1 < high < 0.14  # 40 discordant pairs of 400


def test_k1_judges_every_budget_with_its_own_interval():
    def speed(low_50, high_50):
        return pd.DataFrame({"cache": ["full", "uniform 50%", "baklava 50%", "baklava 90%"],
                             "speedup_vs_full": [1.0, 0.5, (low_50 + high_50) / 2, 1.3],
                             "speedup_low": [1.0, 0.4, low_50, 1.2], "speedup_high": [1.0, 0.6, high_50, 1.4]})

    measured = baklava.decode_speedups(speed(0.8, 1.1))
    assert measured.per_setting == pytest.approx({"baklava 50%": 0.95, "baklava 90%": 1.3})  # uniform: not judged
    assert verdict(CLAIMS["K1"], measured)[0] == "inconclusive"  # one budget's interval straddles 1
    assert verdict(CLAIMS["K1"], baklava.decode_speedups(speed(1.01, 1.1)))[0] == "holds"
    assert verdict(CLAIMS["K1"], baklava.decode_speedups(speed(0.8, 0.95)))[0] == "fails"  # one slower budget


def test_c1_to_c3_are_rejudged_under_each_eviction_policy_with_its_own_power_checks():
    from mlsysrepro.core.claims import robustness

    zero = {"baklava": [0] * 4, "uniform": [0] * 4}
    snap = grid({"baklava": [6.0, 6.2, 7.0, 8.0], "uniform": [6.1, 6.9, 8.0, 9.0]}, zero)
    # under StreamingLLM both allocators keep baseline perplexity to 70 %: uniform passes too, so C1 fails there
    stream = grid({"baklava": [6.0, 6.2, 7.0, 8.0], "uniform": [6.0, 6.2, 8.0, 9.0]}, zero, policy="streamingllm")
    measured = baklava.policy_claims(pd.concat([snap, stream[stream.policy != "full"]]), USED, 0.7)
    assert set(measured) == {"C1", "C2", "C3"}
    (entry,) = robustness(CLAIMS["C1"], measured["C1"])
    assert entry["verdicts"] == {"snapkv": "holds", "streamingllm": "fails"}
    assert entry["text"].startswith("depends on eviction_policy")
    assert measured["C1"].grid["eviction_policy"]["streamingllm"].preconditions  # its own power checks
    flat = {"baklava": [6.0] * 4, "uniform": [6.0] * 4}  # compression costs nothing under StreamingLLM
    free = grid(flat, zero, policy="streamingllm")
    again = baklava.policy_claims(pd.concat([snap, free[free.policy != "full"]]), USED, 0.7)
    (entry,) = robustness(CLAIMS["C1"], again["C1"])
    assert entry["verdicts"]["streamingllm"] == "not testable here"


def test_the_claims_need_both_policies_of_the_assumption():
    from mlsysrepro.core.settings import resolve

    settings = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "policies": ["snapkv"]}, baklava.RANGES)
    with pytest.raises(ValueError, match="policies must include"):  # before anything is trained
        baklava.prepare(settings)
