"""Allocators return integer budgets that sum to the target and respect floors and caps; BaKlaVa's importance
puts a head whose output is zero last."""

import pytest
import torch

from mlsysrepro.kvcache import allocators as A
from mlsysrepro.kvcache.profiling import cache_importance, profile_heads, retrieval_scores
from mlsysrepro.transformer.llama import Llama, LlamaConfig

SHAPE, FLOOR, CAP = (4, 3), 5, 200


def check(allocation, total, floor=FLOOR, cap=CAP):
    b = allocation.budgets
    assert b.dtype == torch.long and b.shape == SHAPE
    assert int(b.sum()) == total
    assert int(b.min()) >= floor and int(b.max()) <= cap


@pytest.mark.parametrize("compression", [0.1, 0.5, 0.7, 0.85, 0.95])
def test_every_allocator_meets_the_total_exactly(compression):
    total = A.total_budget(compression, 12, CAP)
    importance = torch.rand(SHAPE, generator=torch.Generator().manual_seed(3))
    if total < 12 * FLOOR:
        with pytest.raises(ValueError, match="total"):
            A.uniform(SHAPE, total, FLOOR, CAP)
        return
    check(A.uniform(SHAPE, total, FLOOR, CAP), total)
    check(A.pyramid(SHAPE, total, FLOOR, CAP, beta=20, window=0), total)
    check(A.adakv(SHAPE, total, FLOOR, CAP), total)
    check(A.duo(SHAPE, total, FLOOR, CAP, importance), total)
    for gamma in (0.0, 1.0, 4.0):
        check(A.baklava(SHAPE, total, FLOOR, CAP, importance, gamma), total)
        check(A.reversed_importance(SHAPE, total, FLOOR, CAP, importance, gamma), total)


def test_distribute_is_proportional_above_the_floor_and_water_fills_the_cap():
    b = A.distribute(torch.tensor([1.0, 1.0, 2.0]), total=3 + 40, floor=1, cap=100)
    assert b.tolist() == [11, 11, 21]
    b = A.distribute(torch.tensor([1.0, 1.0, 100.0]), total=150, floor=0, cap=100)
    assert b.tolist() == [25, 25, 100]  # the capped cache's excess goes to the others, evenly
    b = A.distribute(torch.tensor([0.0, 3.0]), total=7, floor=2, cap=10)
    assert b.tolist() == [2, 5]


def test_uniform_is_even_and_baklava_with_gamma_zero_is_uniform():
    total = 12 * 17 + 5
    u = A.uniform(SHAPE, total, FLOOR, CAP).budgets
    assert int(u.max() - u.min()) == 1
    importance = torch.rand(SHAPE)
    assert torch.equal(A.baklava(SHAPE, total, FLOOR, CAP, importance, 0.0).budgets, u)


def test_baklava_gives_more_important_caches_more():
    importance = torch.arange(12, dtype=torch.float64).view(SHAPE) + 1
    b = A.baklava(SHAPE, 600, FLOOR, CAP, importance, 1.0).budgets.flatten()
    assert (b[1:] >= b[:-1]).all() and b[-1] > b[0]


def test_pyramid_shrinks_with_depth():
    b = A.pyramid(SHAPE, 12 * 50, FLOOR, CAP, beta=5, window=0).budgets
    per_layer = b.sum(1)
    assert (per_layer[1:] < per_layer[:-1]).all()
    assert (b.max(1).values - b.min(1).values <= 1).all()  # equal within a layer


def test_pyramid_stays_linear_and_keeps_the_window_as_kvpress_does():
    """4 layers of one head, 128 tokens, 25 % compression, window 16: kvpress 0.5.5 keeps [112, 101, 91, 80]."""
    b = A.pyramid((4, 1), A.total_budget(0.25, 4, 128), 4, 128, beta=20, window=16).budgets.flatten()
    assert b.tolist() == [112, 101, 91, 80]
    tight = A.pyramid((4, 1), A.total_budget(0.9, 4, 128), 4, 128, beta=20, window=16).budgets.flatten()
    assert tight.max() - tight.min() <= 1  # the bottom would fall below the window: every layer gets the mean


def test_pyramid_needs_the_policy_window_and_matches_kvpress_only_with_it():
    """kvpress 0.5.5, 2 layers of one head, 256 tokens at 50 %, window 16: [240, 16]; without the window the
    linear profile would drop the last layer to 6 entries, below the window every layer keeps."""
    total = A.total_budget(0.5, 2, 256)
    assert A.pyramid((2, 1), total, 1, 256, beta=20, window=16).budgets.flatten().tolist() == [240, 16]
    assert A.pyramid((2, 1), total, 1, 256, beta=20, window=0).budgets.flatten().tolist() == [250, 6]
    with pytest.raises(TypeError):
        A.pyramid((2, 1), total, 1, 256, beta=20)  # the window is not optional
    with pytest.raises(ValueError, match="window"):
        A.pyramid((2, 1), total, 1, 256, beta=20, window=-1)


def test_the_reversed_control_has_baklavas_budgets_in_reverse_order_of_importance():
    importance = torch.tensor([[0.1, 0.4, 0.2], [0.8, 0.3, 0.05]])
    ours = A.baklava((2, 3), 300, 4, 128, importance, 2.0).budgets.flatten()
    control = A.reversed_importance((2, 3), 300, 4, 128, importance, 2.0).budgets.flatten()
    assert sorted(control.tolist()) == sorted(ours.tolist())
    order = importance.flatten().argsort()
    assert (control[order].diff() <= 0).all() and (ours[order].diff() >= 0).all()


def test_adakv_pools_layers_with_a_floor_of_alpha_times_the_mean():
    allocation = A.adakv(SHAPE, 12 * 50, FLOOR, CAP, alpha=0.2)
    assert allocation.pooled and allocation.floor == 10


def test_duo_gives_full_caches_to_the_top_retrieval_heads_and_streams_the_rest():
    score = torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.2, 0.3], [0.0, 0.0, 0.05], [0.7, 0.0, 0.0]])
    b = A.duo(SHAPE, total=2 * CAP + (FLOOR + 50) + 9 * FLOOR, floor=FLOOR, cap=CAP, retrieval_score=score).budgets
    assert b[0, 1] == CAP and b[1, 0] == CAP  # the two best
    assert b[3, 0] == FLOOR + 50  # the third takes what is left
    assert int((b == FLOOR).sum()) == 9


def test_compression_outside_zero_one_is_rejected():
    with pytest.raises(ValueError, match="compression must be in"):
        A.total_budget(1.0, 12, 100)


CFG = LlamaConfig(vocab=30, dim=32, layers=3, heads=4, kv_heads=2, ffn=64)


@torch.no_grad()
def test_baklava_importance_puts_a_silenced_head_last():
    torch.manual_seed(0)
    model = Llama(CFG).eval()
    silenced = (1, 0)  # layer 1, KV head 0: both of its query heads write nothing
    group = CFG.heads // CFG.kv_heads
    cols = slice(silenced[1] * group * CFG.head_dim, (silenced[1] + 1) * group * CFG.head_dim)
    model.blocks[silenced[0]].attn.out.weight[:, cols] = 0
    prompts = torch.randint(0, CFG.vocab, (6, 20), generator=torch.Generator().manual_seed(1))
    importance = cache_importance(profile_heads(model, prompts, batch=4), CFG.kv_heads)
    assert importance.shape == (CFG.layers, CFG.kv_heads)
    assert float(importance[silenced]) == pytest.approx(0, abs=1e-6)
    assert (importance.flatten().argsort()[0] == silenced[0] * CFG.kv_heads + silenced[1])
    # the silenced cache's importance is zero up to rounding, of either sign (the BLAS's summation order decides)
    assert (importance.flatten() > 100 * abs(float(importance[silenced]))).sum() == importance.numel() - 1


@torch.no_grad()
def test_head_importance_is_one_minus_the_cosine_computed_by_hand():
    torch.manual_seed(1)
    model = Llama(CFG).double().eval()
    prompt = torch.randint(0, CFG.vocab, (1, 7))
    profile = profile_heads(model, prompt)
    # by hand for layer 0, head 3: x is the embedding; o_h its slice of the attention output
    x = model.embed(prompt)
    attn = model.blocks[0].attn
    captured = {}
    handle = attn.out.register_forward_hook(lambda m, a, o: captured.setdefault("ctx", a[0]))
    model(prompt)
    handle.remove()
    d = CFG.head_dim
    o = captured["ctx"][..., 3 * d:4 * d] @ attn.out.weight[:, 3 * d:4 * d].T
    expected = (1 - torch.nn.functional.cosine_similarity(x, x + o, dim=-1)).mean()
    assert float(profile.head[0, 3]) == pytest.approx(float(expected), abs=1e-12)


@torch.no_grad()
def test_retrieval_score_finds_the_head_that_reads_the_record():
    from mlsysrepro.transformer.retrieval import RetrievalBatch
    torch.manual_seed(0)
    model = Llama(CFG).eval()
    tokens = torch.randint(0, CFG.vocab, (4, 40))
    batch = RetrievalBatch(tokens, answer_start=35, record_start=torch.tensor([3, 10, 12, 20]),
                           answer_mask=torch.zeros_like(tokens, dtype=torch.bool))
    scores = retrieval_scores(model, batch)
    assert scores.shape == (CFG.layers, CFG.kv_heads)
    assert ((scores > 0) & (scores < 1)).all()
    # nearly uniform attention of a random model: about RECORD_LEN / context of the mass
    assert float(scores.mean()) == pytest.approx(10 / 35, rel=0.5)
