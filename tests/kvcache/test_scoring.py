"""The token-scorer contract: one selection rule for caches and pruners, scorers registered by name."""

from dataclasses import dataclass

import pytest
import torch

from mlsysrepro.kvcache.cache import BudgetedCache
from mlsysrepro.kvcache.policies import H2O, SnapKV, StreamingLLM
from mlsysrepro.kvcache.scoring import (SCORERS, Observation, TokenScorer, keep_mask, make_scorer, ranked,
                                        register_scorer)

from .conftest import observe_weights


def test_keep_mask_keeps_the_protected_tokens_then_the_highest_priority_within_the_budget():
    positions = torch.arange(10).expand(1, 2, 10).clone()
    positions[0, 1, 8:] = -1  # head 1 holds 8 tokens
    score = torch.tensor([0.1, 0.0, 0.9, 0.0, 0.8, 0.0, 0.7, 0.0, 0.0, 0.0]).expand(1, 2, 10)
    keep = keep_mask(H2O(recent_fraction=0.5), score, positions, torch.tensor([4, 6]))
    assert keep[0, 0].nonzero().flatten().tolist() == [2, 4, 8, 9]  # window 2 (8, 9), the two heaviest (2, 4)
    assert keep[0, 1].nonzero().flatten().tolist() == [0, 2, 4, 5, 6, 7]  # window 3 (5, 6, 7), then 2, 4, 0
    assert (keep.sum(-1) == torch.tensor([[4, 6]])).all()


def test_ranked_protects_sinks_and_window_and_never_keeps_an_empty_slot():
    positions = torch.tensor([[[0, 1, 2, 3, 4, -1]]])
    priority = ranked(StreamingLLM(sinks=1), torch.zeros(1, 1, 6), positions, torch.tensor([1]), torch.tensor([2]))
    assert priority[0, 0].tolist() == [float("inf"), 1.0, 2.0, float("inf"), float("inf"), float("-inf")]


@pytest.mark.parametrize("policy", [H2O(), SnapKV(window=3, kernel=1), StreamingLLM(sinks=2)], ids=lambda p: p.name)
def test_the_budgeted_cache_keeps_what_keep_mask_selects(policy):
    """After a prefill, every head of a cache holds exactly the tokens of the shared rule, on random attention
    (SnapKV without max-pooling, whose ties the cache may break either way)."""
    g = torch.Generator().manual_seed(0)
    s, budgets = 16, torch.tensor([[5, 9]])
    weights = torch.rand(2, 2, s, s, generator=g, dtype=torch.float64).tril()
    cache = BudgetedCache(budgets, policy)
    k = torch.randn(2, 2, s, 4, generator=g, dtype=torch.float64)
    cache.update(0, k, k, torch.arange(s).expand(2, s))
    observe_weights(cache, 0, weights)
    positions = torch.arange(s).expand(2, 2, s)
    query_weights = policy.query_weights(s, True)
    paid = None if query_weights is None else (weights * query_weights.double()[:, None]).sum(2)
    score = policy.accumulate(torch.zeros(2, 2, s, dtype=torch.float64), Observation(paid, prefill=True, queries=s))
    expected = keep_mask(policy, score, positions, budgets[0])
    for b in range(2):
        for h in range(2):
            held = cache.positions[0][b, h]
            assert sorted(held[held >= 0].tolist()) == expected[b, h].nonzero().flatten().tolist()


@dataclass(frozen=True)
class Oldest(TokenScorer):
    """A scorer that keeps the oldest tokens: the smallest position ranks highest."""

    name = "oldest-for-test"

    def priority(self, score, positions):
        return -positions.to(score.dtype)


def test_a_registered_scorer_runs_inside_the_cache_by_name():
    register_scorer(Oldest)
    try:
        scorer = make_scorer("oldest-for-test")
        cache = BudgetedCache(torch.tensor([[3]]), scorer)
        k = torch.randn(1, 1, 8, 4)
        cache.update(0, k, k, torch.arange(8)[None])
        observe_weights(cache, 0, torch.rand(1, 1, 8, 8))
        held = cache.positions[0][0, 0]
        assert sorted(held[held >= 0].tolist()) == [0, 1, 2]
        with pytest.raises(ValueError, match="already registered"):
            register_scorer(Oldest)
    finally:
        SCORERS.pop("oldest-for-test")
    # the list names what is registered now (the pruners too, once imported)
    with pytest.raises(ValueError, match=r"scorer must be one of \[.*'h2o'.*\], got 'oldest-for-test'"):
        make_scorer("oldest-for-test")


def test_a_content_scorer_reads_the_states_of_an_observation():
    """A pruner before prefill sees no attention: its score comes from the tokens' states (here, their norm)."""

    @dataclass(frozen=True)
    class Norm(TokenScorer):
        name = "norm-for-test"

        def accumulate(self, score, seen):
            return seen.states.norm(dim=-1)[:, None, :]

        def priority(self, score, positions):
            return score

    states = torch.zeros(1, 6, 3)
    states[0, [1, 4], 0] = torch.tensor([5.0, 2.0])
    score = Norm().accumulate(torch.zeros(1, 1, 6), Observation(states=states))
    keep = keep_mask(Norm(), score, torch.arange(6).expand(1, 1, 6), torch.tensor([2]))
    assert keep[0, 0].nonzero().flatten().tolist() == [1, 4]


def test_temporal_threshold_folds_a_prefill_as_one_query_at_a_time():
    """AsymVLM's text eviction reads a prefill through its query weights: the result equals the moving average
    ``s <- decay * s + (1 - decay) * a_t`` applied query by query."""
    from mlsysrepro.kvcache.policies import TemporalThreshold

    policy = TemporalThreshold(decay=0.8)
    weights = torch.rand(1, 2, 6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    start = torch.rand(1, 2, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    paid = (weights * policy.query_weights(6, True)[:, None]).sum(2)
    folded = policy.accumulate(start.clone(), Observation(paid, prefill=True, queries=6))
    expected = start.clone()
    for t in range(6):
        expected = 0.8 * expected + 0.2 * weights[:, :, t]
    torch.testing.assert_close(folded, expected)
