"""Vision-token pruning: every pruner keeps exactly its budget, a budget of every token reproduces the unpruned
logits, schedules reach their FLOPs targets, the adaptive budget stays in its clamp, and the text eviction never
goes below its budget nor evicts the image or the sinks."""

import pytest
import torch

from mlsysrepro.kvcache import schedules
from mlsysrepro.kvcache.cache import BudgetedCache
from mlsysrepro.kvcache.policies import TemporalThreshold
from mlsysrepro.kvcache.pruners import AsymVLM, Oracle, RelevanceScorer, Teacher, spread_order
from mlsysrepro.kvcache.pruning import (AdaptiveBudget, PruningPlan, answer_saliency, pruned_prefill,
                                       text_to_vision_relevance)
from mlsysrepro.kvcache.scoring import Observation, make_scorer
from mlsysrepro.transformer.flops import prefill_flops
from mlsysrepro.transformer.llama import LlamaConfig
from mlsysrepro.transformer.vlm import TinyVLM, VLMConfig

CFG = VLMConfig(image=16, patch=4, vit_dim=16, vit_layers=1, vit_heads=2,
                decoder=LlamaConfig(vocab=30, dim=16, layers=3, heads=2, kv_heads=1, ffn=24))
N = CFG.vision_tokens  # 16


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyVLM(CFG).eval()


@pytest.fixture(scope="module")
def inputs():
    g = torch.Generator().manual_seed(1)
    return torch.rand(5, 16, 16, generator=g), torch.randint(0, 30, (5, 6), generator=g)


def pruner(name, model, inputs):
    if name == "asymvlm":
        return AsymVLM(network=RelevanceScorer(CFG.decoder.dim, hidden=8).eval())
    if name == "oracle":
        return Oracle(relevance=(torch.arange(N) % 5 == 0).float().expand(len(inputs[0]), -1))
    if name == "teacher":
        return Teacher(relevance=text_to_vision_relevance(model, *inputs))
    if name == "pooling":
        return make_scorer(name, side=CFG.side)
    return make_scorer(name)


NAMES = ["random", "pooling", "fastv", "pyramiddrop", "sparsevlm", "visionzip", "fitprune", "asymvlm", "oracle",
         "teacher"]
AT_LAYER = {"fastv": 1, "pyramiddrop": 1, "sparsevlm": 1, "fitprune": 1}


@pytest.mark.parametrize("name", NAMES)
def test_every_pruner_keeps_exactly_its_budget(model, inputs, name):
    layer = AT_LAYER.get(name, 0)
    stages = ((layer, 7), (layer + 1, 3)) if name == "pyramiddrop" else ((layer, 7),)
    out = pruned_prefill(model, *inputs, PruningPlan(pruner(name, model, inputs), stages))
    text = inputs[1].shape[1]
    expected = [N + text] * layer + [7 + text] * (CFG.decoder.layers - layer)
    if name == "pyramiddrop":
        expected[layer + 1:] = [3 + text] * (CFG.decoder.layers - layer - 1)
    assert out.lengths.tolist() == [expected] * len(inputs[0])
    assert torch.isfinite(out.logits).all()


@pytest.mark.parametrize("name", NAMES)
def test_a_budget_of_every_token_reproduces_the_unpruned_logits(model, inputs, name):
    layer = AT_LAYER.get(name, 0)
    out = pruned_prefill(model, *inputs, PruningPlan(pruner(name, model, inputs), ((layer, N),)))
    with torch.no_grad():
        full = model(*inputs)
    torch.testing.assert_close(out.logits, full, rtol=1e-5, atol=1e-5)


def test_pruning_removes_tokens_and_changes_the_answer(model, inputs):
    kept = pruned_prefill(model, *inputs, PruningPlan(make_scorer("random"), ((0, 2),)))
    with torch.no_grad():
        full = model(*inputs)
    assert not torch.allclose(kept.logits, full)


def test_the_oracle_keeps_the_relevant_patches(model, inputs):
    relevance = torch.zeros(len(inputs[0]), N)
    relevance[:, [3, 9, 12]] = 1
    plan = PruningPlan(Oracle(relevance=relevance), ((0, 3),))
    score = plan.pruner.accumulate(torch.zeros(5, 1, N), Observation(paid=torch.rand(5, 1, N)))
    keep = plan.pruner.select(score[:, 0], torch.arange(N).expand(5, -1), 3)
    assert keep.tolist() == [[3, 9, 12]] * 5


def test_answer_saliency_is_a_distribution_that_follows_the_answers_dependence(model, inputs):
    pixels, question = inputs
    answer = torch.zeros(len(pixels), dtype=torch.long)
    saliency = answer_saliency(model, pixels, question, answer)
    assert saliency.shape == (len(pixels), N) and torch.allclose(saliency.sum(-1), torch.ones(len(pixels)))
    assert not any(p.grad is not None for p in model.parameters())  # the model is only read
    other = answer_saliency(model, pixels, question, torch.ones(len(pixels), dtype=torch.long))
    assert not torch.allclose(saliency, other)  # another answer depends on the tokens differently


def test_the_teacher_keeps_its_most_relevant_tokens_and_refuses_a_missing_relevance(model, inputs):
    relevance = text_to_vision_relevance(model, *inputs)
    teacher = Teacher(relevance=relevance)
    keep = teacher.select(teacher.accumulate(torch.zeros(5, 1, N), None)[:, 0], torch.arange(N).expand(5, -1), 4)
    assert keep.tolist() == relevance.topk(4, -1).indices.sort(-1).values.tolist()
    with pytest.raises(ValueError, match="teacher: relevance"):
        Teacher().accumulate(torch.zeros(5, 1, N), None)


def test_spread_order_spreads_the_first_tokens_over_the_grid():
    rank = spread_order(4)
    first = rank.argsort()[:4]  # the four best-ranked patches: one in each 2x2 quadrant
    quadrants = {(int(p) // 4 // 2, int(p) % 4 // 2) for p in first}
    assert quadrants == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert sorted(rank.tolist()) == list(range(16))


def test_pooling_averages_every_dropped_token_into_a_kept_one(model, inputs):
    pooling = make_scorer("pooling", side=CFG.side)
    states = torch.arange(N, dtype=torch.float32).view(1, N, 1)
    keep = pooling.select(pooling.accumulate(torch.zeros(1, 1, N), None)[:, 0], torch.arange(N)[None], 4)
    merged = pooling.merge(states, torch.arange(N)[None], keep, CFG.side, None)
    assert merged.shape == (1, 4, 1)
    assert float(merged.mean()) == pytest.approx(float(states.mean()))  # 4 equal quadrants of 4 patches


def test_visionzip_merges_the_rest_into_its_contextual_tokens(model, inputs):
    zip_ = make_scorer("visionzip", contextual_share=0.5)
    score = torch.arange(N, dtype=torch.float32)[None]  # the last tokens dominate
    keep = zip_.select(score, torch.arange(N)[None], 4)
    assert {14, 15} <= set(keep[0].tolist())  # two dominant, two contextual
    states = torch.randn(1, N, 3)
    merged = zip_.merge(states, torch.arange(N)[None], keep, CFG.side, score)
    torch.testing.assert_close(merged[0, -2:], states[0, 14:])  # dominant tokens absorb nothing
    assert torch.isfinite(merged).all()


def test_the_adaptive_budget_stays_in_its_clamp_and_grows_with_top_p():
    scores = torch.randn(50, N, generator=torch.Generator().manual_seed(3)) * 3
    low = AdaptiveBudget(0.3, 2, 10).counts(scores)
    high = AdaptiveBudget(0.9, 2, 10).counts(scores)
    assert low.min() >= 2 and high.max() <= 10 and (high >= low).all() and high.float().mean() > low.float().mean()
    peaked = torch.full((1, N), -10.0)
    peaked[0, 4] = 10
    assert AdaptiveBudget(0.9, 1, N).counts(peaked).item() == 1


def test_adaptive_pruning_keeps_each_rows_own_count(model, inputs):
    network = RelevanceScorer(CFG.decoder.dim, hidden=8).eval()
    budget = AdaptiveBudget(0.6, 2, 12)
    out = pruned_prefill(model, *inputs, PruningPlan(AsymVLM(network=network), ((0, 12),), budget))
    with torch.no_grad():
        vision, _ = model.encode(inputs[0])
        expected = budget.counts(network(vision, model.embed_question(inputs[1])))
    assert out.kept.tolist() == expected.tolist()
    assert out.lengths[:, 0].tolist() == (expected + inputs[1].shape[1]).tolist()


def test_plans_reject_attention_before_prefill_and_growing_stages():
    with pytest.raises(ValueError, match="before prefill"):
        PruningPlan(make_scorer("fastv"), ((0, 4),))
    with pytest.raises(ValueError, match="never more"):
        PruningPlan(make_scorer("random"), ((0, 4), (1, 6)))
    with pytest.raises(ValueError, match="layer 0"):
        PruningPlan(make_scorer("fastv"), ((1, 4),), AdaptiveBudget(0.5, 1, 4))


def test_relevance_is_a_distribution_over_the_vision_tokens(model, inputs):
    relevance = text_to_vision_relevance(model, *inputs)
    assert relevance.shape == (5, N) and (relevance >= 0).all()
    torch.testing.assert_close(relevance.sum(-1), torch.ones(5))


def test_the_flops_counter_matches_a_hand_count():
    cfg = LlamaConfig(vocab=10, dim=4, layers=2, heads=2, kv_heads=1, ffn=6)
    # layer 1: n = 3 -> 4*3*16 + 2*9*4 + 2*3*4*6 = 192 + 72 + 144 = 408; layer 2: n = 2 -> 128 + 32 + 96 = 256
    assert float(prefill_flops(cfg, torch.tensor([3, 2]))) == 408 + 256


def test_schedules_reach_their_target_and_later_pruning_keeps_fewer_tokens():
    cfg = CFG.decoder
    before = schedules.single_stage(cfg, 0, 0.5, N, 4)
    after = schedules.single_stage(cfg, 1, 0.5, N, 4)
    assert schedules.stage_saving(cfg, {0: before}, N, 4) >= 0.5 > schedules.stage_saving(cfg, {0: before + 1}, N, 4)
    assert after < before
    pyramid = schedules.pyramid(cfg, (1, 2), 0.4, N, 4)
    assert schedules.stage_saving(cfg, pyramid, N, 4) >= 0.4 and pyramid[1] >= pyramid[2]


def test_fit_counts_prefers_the_layer_whose_attention_is_concentrated():
    cfg = CFG.decoder
    flat = torch.linspace(0, 1, N + 1)
    peaked = torch.ones(N + 1)
    peaked[0] = 0
    counts = schedules.fit_counts(cfg, (1, 2), 0.3, N, 4, torch.stack((flat, peaked)))
    assert schedules.stage_saving(cfg, counts, N, 4) >= 0.3
    assert counts[2] < counts[1] or counts[2] == 1


@torch.no_grad()
def test_text_eviction_never_goes_below_its_budget_nor_evicts_the_image_or_sinks(model, inputs):
    decoder = model.decoder
    vision, _ = model.encode(inputs[0])
    text = decoder.embed(torch.randint(0, 30, (5, 20), generator=torch.Generator().manual_seed(4)))
    policy = TemporalThreshold(vision=N, sinks=1, recent=2)
    budget = N + 6
    cache = BudgetedCache(torch.full((CFG.decoder.layers, CFG.decoder.kv_heads), budget), policy)
    decoder.forward_embeddings(torch.cat((vision, text[:, :10]), 1), cache=cache)
    for step in range(10, 20):
        decoder.forward_embeddings(text[:, step:step + 1], torch.full((5, 1), N + step), cache)
        held = cache.held()
        assert (held <= budget).all() and (held >= budget).all()  # over budget from the start: exactly the budget
        for positions in cache.positions.values():
            kept = positions[positions >= 0].view(5, CFG.decoder.kv_heads, -1)
            assert all(set(range(N + 1)) <= set(row.tolist()) for row in kept.flatten(0, 1))  # image and sink
            assert all({N + step - 1, N + step} <= set(row.tolist()) for row in kept.flatten(0, 1))  # recent


@torch.no_grad()
def test_text_eviction_keeps_everything_under_its_budget(model, inputs):
    policy = TemporalThreshold(vision=N)
    cache = BudgetedCache(torch.full((CFG.decoder.layers, CFG.decoder.kv_heads), 100), policy)
    vision, _ = model.encode(inputs[0])
    model.decoder.forward_embeddings(vision, cache=cache)
    assert (cache.held() == N).all()


def test_the_temporal_threshold_evicts_the_faded_tokens_first_whatever_their_age():
    policy = TemporalThreshold(decay=0.5)
    score = torch.tensor([[[0.4, 0.05, 0.1, 0.3, 0.2]]])  # the oldest token is still read: it stays longest
    positions = torch.arange(5)[None, None]
    assert policy.priority(score, positions)[0, 0].argsort().tolist() == [1, 2, 4, 3, 0]
    faded = policy.accumulate(score.clone(), type("Seen", (), {"queries": 2, "paid": torch.tensor(
        [[[0.0, 0.0, 0.0, 0.0, 0.5]]])})())
    assert faded[0, 0].tolist() == pytest.approx([0.1, 0.0125, 0.025, 0.075, 0.55])  # decay^2, then what it was paid


def test_a_saving_out_of_reach_where_a_method_prunes_is_refused():
    cfg = CFG.decoder
    assert schedules.single_stage(cfg, 0, 0.6, N, 4) >= 1
    with pytest.raises(schedules.Unreachable, match="layer 2 saves at most"):
        schedules.single_stage(cfg, 2, 0.6, N, 4)
    with pytest.raises(schedules.Unreachable):
        schedules.pyramid(cfg, (2,), 0.6, N, 4)
