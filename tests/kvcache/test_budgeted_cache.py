"""The budgeted cache and its policies: budgets hold at every step, large budgets change nothing, each policy
keeps the right entries on hand-built attention, and eviction leaves the survivors' RoPE positions intact."""

import pytest
import torch

from mlsysrepro.kvcache.cache import BudgetedCache, FullCache
from mlsysrepro.kvcache.policies import H2O, SnapKV, StreamingLLM, make_policy

from .conftest import observe_weights

POLICIES = [StreamingLLM(sinks=2), H2O(), SnapKV(window=3, kernel=3)]
PREFILL, LENGTH = 10, 24


@pytest.fixture(scope="module")
def model(tiny_llama):
    return tiny_llama


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, 50, (3, LENGTH), generator=torch.Generator().manual_seed(2))


def decode(model, tokens, cache, after_step=None):
    """Prefill PREFILL tokens, then decode the rest one by one; logits of every position."""
    out = [model(tokens[:, :PREFILL], cache=cache)]
    if after_step:
        after_step(PREFILL)
    for t in range(PREFILL, tokens.shape[1]):
        out.append(model(tokens[:, t:t + 1], torch.full((tokens.shape[0], 1), t), cache))
        if after_step:
            after_step(t + 1)
    return torch.cat(out, dim=1)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
@torch.no_grad()
def test_no_head_ever_holds_more_than_its_budget(model, tokens, policy):
    budgets = torch.tensor([[3, 7], [5, 12]])

    def check(seen):
        held = cache.held()  # (layers, B, kv_heads)
        assert (held <= budgets[:, None, :]).all()
        # once a head has seen more tokens than its budget it is exactly full (sinks and windows counted inside)
        assert torch.equal(held, torch.minimum(budgets, torch.tensor(seen))[:, None, :].expand_as(held))

    cache = BudgetedCache(budgets, policy)
    decode(model, tokens, cache, check)


@pytest.mark.parametrize("policy", [H2O(), SnapKV(window=2, kernel=3)], ids=lambda p: p.name)
@torch.no_grad()
def test_a_pooled_layer_never_exceeds_its_total_and_keeps_each_heads_floor(model, tokens, policy):
    budgets = torch.tensor([[4, 8], [6, 6]])

    def check(seen):
        held = cache.held()
        assert (held.sum(-1) <= budgets.sum(-1)[:, None]).all()
        assert (held >= min(3, seen)).all()
        if seen >= 12:  # more tokens than any pool: the pools are full
            assert torch.equal(held.sum(-1), budgets.sum(-1)[:, None].expand(-1, tokens.shape[0]))

    cache = BudgetedCache(budgets, policy, pooled=True, floor=3)
    decode(model, tokens, cache, check)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
@torch.no_grad()
def test_budgets_at_least_the_sequence_length_change_nothing(model, tokens, policy):
    full = decode(model, tokens, FullCache())
    budgeted = decode(model, tokens, BudgetedCache(torch.full((2, 2), LENGTH), policy))
    # a policy that reads attention decodes through the written-out weights, the full cache through SDPA
    torch.testing.assert_close(budgeted, full, rtol=0, atol=1e-12)


def kept_after_one_step(policy, budget, weights, prefill=True, heads=1):
    """Feed one layer of a single-head cache ``len(positions)`` entries and hand-built attention ``weights``
    (queries x keys); return the positions it keeps."""
    s = weights.shape[-1]
    cache = BudgetedCache(torch.tensor([[budget]]), policy)
    k = torch.randn(1, 1, s, 4, dtype=torch.float64)
    cache.update(0, k, k, torch.arange(s)[None])
    observe_weights(cache, 0, weights.reshape(1, heads, -1, s).double())
    pos = cache.positions[0][0, 0]
    return sorted(pos[pos >= 0].tolist())


def test_streamingllm_keeps_the_sinks_and_the_last_tokens():
    weights = torch.rand(10, 10)
    assert kept_after_one_step(StreamingLLM(sinks=2), 5, weights) == [0, 1, 7, 8, 9]


def test_h2o_keeps_the_heaviest_accumulated_attention_and_the_recent_window():
    weights = torch.zeros(10, 10)
    weights[:, 2] = 0.5  # heavy hitters: 2, 6, 4 (in that order), then nothing
    weights[:, 6] = 0.3
    weights[:, 4] = 0.2
    weights[:, 9] = 1.0  # recent anyway
    # budget 6: a recent window of 3 (8, 7 and 9) and the 3 heaviest of the rest
    assert kept_after_one_step(H2O(recent_fraction=0.5), 6, weights) == [2, 4, 6, 7, 8, 9]
    # a budget of 4: window 2, heavy 2
    assert kept_after_one_step(H2O(recent_fraction=0.5), 4, weights) == [2, 6, 8, 9]


def test_snapkv_keeps_the_observation_window_and_the_pooled_top_scores():
    weights = torch.zeros(10, 10)
    weights[:7, 1] = 1.0  # attention before the observation window does not count
    weights[8:, 4] = 0.6  # the window's (last 2 queries') votes: 4, then 1 a little
    weights[8:, 1] = 0.1
    # kernel 1: the top 2 votes (4 and 1) plus the window (8, 9)
    assert kept_after_one_step(SnapKV(window=2, kernel=1), 4, weights) == [1, 4, 8, 9]
    # kernel 3: position 4's vote spreads (averaged) to 3 and 5, which now outrank 1
    assert kept_after_one_step(SnapKV(window=2, kernel=3), 5, weights) == [3, 4, 5, 8, 9]


def test_snapkv_pools_only_the_keys_before_the_window():
    """The window attends mostly to itself; pooling across it would lend that attention to position 7."""
    weights = torch.zeros(10, 10)
    weights[8:, 8:] = 0.4
    weights[8:, 2] = 0.1  # averaged with kernel 3: position 3 gets (0.2 + 0 + 0.1) / 3, the most
    weights[8:, 4] = 0.05
    assert kept_after_one_step(SnapKV(window=2, kernel=3), 3, weights) == [3, 8, 9]


def test_grouped_query_heads_pool_their_attention_into_one_score():
    weights = torch.zeros(2, 10, 10)  # two query heads read the same KV head
    weights[0, :, 3] = 1.0
    weights[1, :, 5] = 0.6
    weights[1, :, 7] = 0.5
    assert kept_after_one_step(H2O(recent_fraction=0.0), 2, weights, heads=2) == [3, 5]


class ReplayMask(FullCache):
    """Keeps everything, but shows each step only the positions a recorded budgeted run attended to."""

    def __init__(self, visible):
        super().__init__()
        self.visible, self.calls = visible, 0

    def update(self, layer, k, v, positions):
        keys, values, pos = super().update(layer, k, v, positions)
        seen = self.visible[self.calls]  # (B, kv_heads, S') positions the budgeted cache returned
        self.calls += 1
        shown = (pos[..., None] == seen[..., None, :]).any(-1)
        return keys, values, pos.masked_fill(~shown, -1)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
@torch.no_grad()
def test_rope_positions_survive_eviction(model, tokens, policy):
    budgets = torch.tensor([[4, 9], [6, 5]])
    visible = []
    cache = BudgetedCache(budgets, policy)
    update = cache.update

    def recording_update(layer, k, v, positions):
        keys, values, pos = update(layer, k, v, positions)
        visible.append(pos.clone())
        return keys, values, pos

    cache.update = recording_update
    evicted = decode(model, tokens, cache)
    reference = decode(model, tokens, ReplayMask(visible))
    torch.testing.assert_close(evicted, reference, rtol=0, atol=1e-10)
    assert not torch.allclose(evicted, decode(model, tokens, FullCache()), atol=1e-4)  # eviction did change logits


def test_bad_budgets_and_policy_names_are_rejected():
    with pytest.raises(ValueError, match="budgets"):
        BudgetedCache(torch.tensor([[0, 3]]), H2O())
    with pytest.raises(ValueError, match="floor"):
        BudgetedCache(torch.tensor([[2, 3]]), H2O(), pooled=True, floor=3)
    with pytest.raises(ValueError, match="policy must be one of"):
        make_policy("lru")


@torch.no_grad()
def test_memory_accounting_counts_kept_entries_and_allocated_slots(model, tokens):
    cache = BudgetedCache(torch.tensor([[4, 8], [8, 8]]), StreamingLLM())
    decode(model, tokens, cache)
    per_entry = 2 * model.cfg.head_dim * 8  # key and value, float64
    assert cache.held_bytes() == (4 + 8 + 8 + 8) * tokens.shape[0] * per_entry
    # each layer is as wide as its largest budget plus the slot a decoded token is written into
    assert cache.allocated_bytes() == (9 + 9 + 9 + 9) * tokens.shape[0] * per_entry


@torch.no_grad()
def test_perplexity_through_the_full_cache_equals_the_one_pass_loss(model, tokens):
    from mlsysrepro.kvcache.evaluation import continuation_nll
    nll = continuation_nll(model, tokens, PREFILL, FullCache, batch=2)
    logits = model(tokens)
    reference = torch.nn.functional.cross_entropy(logits[:, PREFILL - 1:-1].transpose(1, 2), tokens[:, PREFILL:],
                                                  reduction="none")
    torch.testing.assert_close(nll, reference.float(), rtol=0, atol=1e-5)


@torch.no_grad()
def test_a_compressed_context_is_read_once_and_nothing_is_evicted_while_the_rest_is_read(model, tokens):
    """kvpress' protocol: the context is compressed once; the rest is read in one pass, so each continuation
    token's loss depends on the compressed context and the tokens before it only, never on how long the rest is."""
    from mlsysrepro.kvcache.evaluation import continuation_nll
    budgets = torch.full((model.cfg.layers, model.cfg.kv_heads), 4)
    compressed = lambda: BudgetedCache(budgets, StreamingLLM(sinks=2))  # noqa: E731
    nll = continuation_nll(model, tokens, PREFILL, compressed, batch=len(tokens))
    shorter = continuation_nll(model, tokens[:, :PREFILL + 5], PREFILL, compressed, batch=len(tokens))
    torch.testing.assert_close(shorter, nll[:, :5], rtol=0, atol=1e-6)
    full = continuation_nll(model, tokens, PREFILL, FullCache, batch=len(tokens))
    roomy = torch.full((model.cfg.layers, model.cfg.kv_heads), LENGTH)  # a budget that never evicts is the full cache
    torch.testing.assert_close(continuation_nll(model, tokens, PREFILL, lambda: BudgetedCache(roomy, StreamingLLM()),
                                                batch=len(tokens)), full, rtol=0, atol=1e-5)
    assert not torch.allclose(nll, full)  # the context was compressed
    with pytest.raises(ValueError, match="context"):
        continuation_nll(model, tokens, LENGTH, FullCache)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
@torch.no_grad()
def test_caches_sharing_one_prefill_read_exactly_what_each_would_have_alone(model, tokens, policy):
    """continuation_nlls prefills once and loads every budgeted cache of the policy from it: the numbers are the
    ones a prefill through each cache gives, bit for bit, for per-head and pooled budgets alike."""
    from mlsysrepro.kvcache.evaluation import (answers_correct, answers_correct_each, continuation_nll,
                                               continuation_nlls)
    makers = [lambda: BudgetedCache(torch.tensor([[3, 7], [5, 2]]), policy),
              lambda: BudgetedCache(torch.tensor([[2, 2], [9, 1]]), policy),
              lambda: BudgetedCache(torch.tensor([[4, 4], [6, 2]]), policy, pooled=True, floor=1),
              lambda: BudgetedCache(torch.full((2, 2), LENGTH), policy)]
    shared = continuation_nlls(model, tokens, PREFILL, makers, batch=2)
    for make, nll in zip(makers, shared):
        assert torch.equal(nll, continuation_nll(model, tokens, PREFILL, make, batch=2))
    assert not torch.equal(shared[0], shared[1])  # the budgets matter, so the test could see a wrong load
    start = LENGTH - 4
    for make, found in zip(makers, answers_correct_each(model, tokens, PREFILL, start, makers)):
        assert torch.equal(found, answers_correct(model, tokens, PREFILL, start, make))


@torch.no_grad()
def test_a_cache_loads_only_a_whole_prefill_of_its_own_policy(model, tokens):
    keeper = BudgetedCache(torch.full((2, 2), PREFILL), SnapKV())
    model(tokens[:, :PREFILL], cache=keeper)
    with pytest.raises(ValueError, match="scored with"):
        BudgetedCache(torch.full((2, 2), 4), H2O()).load(keeper)
    loaded = BudgetedCache(torch.full((2, 2), 4), SnapKV()).load(keeper)
    assert (loaded.held() == 4).all()
    with pytest.raises(ValueError, match="fresh cache"):
        loaded.load(keeper)
    with pytest.raises(ValueError, match="evicted entries"):
        BudgetedCache(torch.full((2, 2), 2), SnapKV()).load(loaded)


@torch.no_grad()
def test_answers_are_read_after_the_compressed_context_and_scored_digit_by_digit(model, tokens):
    from mlsysrepro.kvcache.evaluation import answers_correct
    from mlsysrepro.transformer.retrieval import VALUE_DIGITS
    start = LENGTH - VALUE_DIGITS
    greedy = model(tokens).argmax(-1)  # full attention: each position's greedy next token
    planted = tokens.clone()
    planted[:, start:] = greedy[:, start - 1:-1]  # a sequence whose answer is the greedy choice, digit by digit
    again = model(planted).argmax(-1)
    expected = (again[:, start - 1:-1] == planted[:, start:]).all(-1)
    assert torch.equal(answers_correct(model, planted, PREFILL, start, FullCache), expected)
    with pytest.raises(ValueError, match="context"):
        answers_correct(model, planted, start + 1, start, FullCache)


@torch.no_grad()
def test_large_heads_evict_a_slack_of_entries_at_once_and_still_never_exceed_their_budget(model):
    budgets = torch.tensor([[70, 130], [96, 100]])  # slack: 70 // 32 = 2 in layer 0, 96 // 32 = 3 in layer 1
    cache = BudgetedCache(budgets, H2O())
    tokens = torch.randint(0, 50, (2, 170), generator=torch.Generator().manual_seed(3))
    model(tokens[:, :40], cache=cache)
    low = []
    for t in range(40, 170):
        model(tokens[:, t:t + 1], torch.full((2, 1), t), cache)
        held = cache.held()
        assert (held <= budgets[:, None, :]).all()
        low.append(held)
    assert cache.slack == [2, 3]
    fewest = torch.stack(low)[-20:].min(0).values  # once full, a head dips at most slack - 1 below its budget
    assert torch.equal(fewest, (budgets - torch.tensor([[1], [2]]))[:, None, :].expand_as(fewest))


@torch.no_grad()
def test_the_slack_never_evicts_protected_entries(model):
    """H2O with a recent window as large as the budget protects every entry but the oldest: even with a slack of
    2, one entry goes per step and the head keeps exactly the last 70 positions."""
    cache = BudgetedCache(torch.tensor([[70, 70], [70, 70]]), H2O(recent_fraction=1.0))
    tokens = torch.randint(0, 50, (1, 100), generator=torch.Generator().manual_seed(4))
    model(tokens[:, :10], cache=cache)
    for t in range(10, 100):
        model(tokens[:, t:t + 1], torch.full((1, 1), t), cache)
        kept = cache.positions[0][0, 0]
        assert sorted(kept[kept >= 0].tolist()) == list(range(max(0, t - 69), t + 1))
    assert cache.slack == [2, 2]


def test_decode_timing_in_fresh_processes_gives_one_row_per_cache_with_an_interval_over_the_processes(model):
    from functools import partial

    from mlsysrepro.kvcache.evaluation import decode_speed, decode_speed_in_processes

    caches = {"full": FullCache, "budget 4": partial(BudgetedCache, torch.full((2, 2), 4), StreamingLLM(sinks=2))}
    here = decode_speed(model, caches, PREFILL, 4, repeats=2)
    table = decode_speed_in_processes(model, caches, PREFILL, 4, repeats=2, processes=2)
    assert list(table.cache) == ["full", "budget 4"] and (table.processes == 2).all()
    full = table.set_index("cache").loc["full"]
    assert (full.speedup_vs_full, full.speedup_low, full.speedup_high) == (1.0, 1.0, 1.0)  # its own baseline
    budget = table.set_index("cache").loc["budget 4"]
    assert budget.speedup_low <= budget.speedup_vs_full <= budget.speedup_high and budget.tokens_per_s > 0
    # what the caches hold does not depend on the process that decoded through them
    assert list(table.held_bytes) == list(here.held_bytes) and list(table.allocated_bytes) == list(here.allocated_bytes)
    with pytest.raises(ValueError, match="processes must be >= 1"):
        decode_speed_in_processes(model, caches, PREFILL, 4, processes=0)
