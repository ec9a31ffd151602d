import pytest
import torch

from mlsysrepro.kvcache.cache import FullCache
from mlsysrepro.transformer.llama import LlamaConfig, attend, rotate

CFG = LlamaConfig(vocab=50, dim=32, layers=2, heads=4, kv_heads=2, ffn=64)


@pytest.fixture(scope="module")
def model(tiny_llama):
    return tiny_llama


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, CFG.vocab, (2, 12), generator=torch.Generator().manual_seed(1))


@torch.no_grad()
def test_decoding_token_by_token_through_the_full_cache_equals_one_pass(model, tokens):
    full = model(tokens)
    cache = FullCache()
    steps = [model(tokens[:, t:t + 1], torch.full((2, 1), t), cache) for t in range(tokens.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-10)
    assert cache.entries() == CFG.layers * 2 * CFG.kv_heads * tokens.shape[1]


@torch.no_grad()
def test_prefill_then_decode_equals_one_pass(model, tokens):
    cache = FullCache()
    first = model(tokens[:, :8], cache=cache)
    rest = [model(tokens[:, t:t + 1], torch.full((2, 1), t), cache) for t in range(8, 12)]
    torch.testing.assert_close(torch.cat([first, *rest], dim=1), model(tokens), rtol=0, atol=1e-10)


@torch.no_grad()
def test_rope_makes_attention_depend_on_relative_positions_only(model, tokens):
    shifted = torch.arange(12).expand(2, 12) + 1000
    torch.testing.assert_close(model(tokens, shifted), model(tokens), rtol=0, atol=1e-8)
    q = torch.randn(1, 1, 1, 8, dtype=torch.float64)
    k = torch.randn(1, 1, 1, 8, dtype=torch.float64)
    dot = lambda m, n: (rotate(q, torch.tensor([[m]]), 10_000.0) * rotate(k, torch.tensor([[n]]), 10_000.0)).sum()
    assert dot(7, 3) == pytest.approx(float(dot(104, 100)), abs=1e-10)
    assert dot(7, 3) != pytest.approx(float(dot(7, 5)), abs=1e-6)


class MaskingCache(FullCache):
    """Keeps every entry but marks ``evicted`` (layer, kv head, position) as empty once it is older than the tokens
    being written (a cache never evicts the token it is adding): full attention with those keys masked out."""

    def __init__(self, evicted):
        super().__init__()
        self.evicted = evicted

    def update(self, layer, k, v, positions):
        keys, values, pos = super().update(layer, k, v, positions)
        pos = pos.clone()
        for lay, head, p in self.evicted:
            if lay == layer and p < positions.min():
                pos[:, head][pos[:, head] == p] = -1
        return keys, values, pos


class EvictingCache:
    """Really removes the same entries, so the survivors move to other slots."""

    def __init__(self, evicted):
        self.evicted = evicted
        self.keys, self.values, self.positions = {}, {}, {}

    def update(self, layer, k, v, positions):
        pos = positions[:, None, :].expand(k.shape[0], k.shape[1], -1)
        if layer in self.keys:
            k, v = torch.cat((self.keys[layer], k), 2), torch.cat((self.values[layer], v), 2)
            pos = torch.cat((self.positions[layer], pos), 2)
        drop = pos < 0  # the empty slots of the last step go too
        for lay, head, p in self.evicted:
            if lay == layer and p < positions.min():
                drop[:, head] |= pos[:, head] == p
        # per head a different number survives: pad the shorter heads with empty slots (position -1) at the front
        keep = (~drop).sum(-1).max()
        order = torch.sort((~drop).to(torch.int8), dim=-1, stable=True).indices[..., -keep:]
        gather = lambda t: torch.gather(t, 2, order[..., None].expand(*order.shape, t.shape[-1]))
        kept_pos = torch.gather(torch.where(drop, -1, pos), 2, order)
        self.keys[layer], self.values[layer], self.positions[layer] = gather(k), gather(v), kept_pos
        return self.keys[layer], self.values[layer], kept_pos

    def query_weights(self, layer, queries):
        return None

    def observe(self, layer, paid):
        pass


@torch.no_grad()
def test_rope_positions_survive_eviction(model, tokens):
    evicted = [(0, 0, 2), (0, 1, 5), (1, 1, 0), (1, 1, 3), (1, 0, 7)]
    masked, evicting = MaskingCache(evicted), EvictingCache(evicted)
    out_masked = [model(tokens[:, t:t + 1], torch.full((2, 1), t), masked) for t in range(12)]
    out_evicted = [model(tokens[:, t:t + 1], torch.full((2, 1), t), evicting) for t in range(12)]
    torch.testing.assert_close(torch.cat(out_evicted, 1), torch.cat(out_masked, 1), rtol=0, atol=1e-10)
    assert not torch.allclose(torch.cat(out_masked, 1), model(tokens))  # the eviction did change something
    assert evicting.positions[1].shape[-1] == 12 - 1  # layer 1, head 1 lost two entries, head 0 one


class Recorder(FullCache):
    """Asks for the attention of one query (``chosen``) and records what it paid."""

    def __init__(self, chosen):
        super().__init__()
        self.chosen, self.seen = chosen, []

    def query_weights(self, layer, queries):
        return torch.nn.functional.one_hot(torch.tensor(self.chosen), queries).double()

    def observe(self, layer, paid):
        self.seen.append((layer, paid))


@torch.no_grad()
def test_the_cache_observes_causal_attention_per_query_head(model, tokens):
    cache = Recorder(chosen=2)
    model(tokens[:, :5], cache=cache)
    assert [layer for layer, _ in cache.seen] == list(range(CFG.layers))
    paid = cache.seen[0][1]
    assert paid.shape == (2, CFG.heads, 5)
    torch.testing.assert_close(paid.sum(-1), torch.ones(2, CFG.heads, dtype=torch.float64))
    assert (paid[..., 3:] == 0).all()  # query 2 sees no later key
    assert (paid[..., :3] > 0).all()


def test_attend_matches_written_out_attention_over_a_cache_with_holes():
    """The fused path, with a position mask and grouped query heads, against the textbook formula; the paid
    attention against the weights summed with the queries' weights."""
    g = torch.Generator().manual_seed(0)
    b, heads, kv_heads, t, s, d = 2, 4, 2, 3, 7, 8
    q = torch.randn(b, heads, t, d, generator=g, dtype=torch.float64)
    keys = torch.randn(b, kv_heads, s, d, generator=g, dtype=torch.float64)
    values = torch.randn(b, kv_heads, s, d, generator=g, dtype=torch.float64)
    key_pos = torch.tensor([0, 1, 2, -1, 4, 5, 6]).repeat(b, kv_heads, 1)
    key_pos[1, 0, 1] = -1  # a hole in one head of one sequence only
    positions = torch.tensor([4, 5, 6]).expand(b, t)
    query_weights = torch.tensor([0.5, 0.0, 2.0], dtype=torch.float64)
    context, paid = attend(q, keys, values, key_pos, positions, d ** -0.5, query_weights)
    per_head = lambda x: x.repeat_interleave(heads // kv_heads, 1)
    visible = (per_head(key_pos)[:, :, None] >= 0) & (per_head(key_pos)[:, :, None] <= positions[:, None, :, None])
    weights = (q @ per_head(keys).transpose(-1, -2) * d ** -0.5).masked_fill(~visible, float("-inf")).softmax(-1)
    torch.testing.assert_close(context, weights @ per_head(values))
    torch.testing.assert_close(paid, (weights * query_weights[:, None]).sum(2))
    assert attend(q, keys, values, key_pos, positions, d ** -0.5)[1] is None


def test_the_full_cache_grows_without_losing_entries():
    cache = FullCache()
    written = [torch.full((1, 2, n, 4), float(i)) for i, n in enumerate([10, 1, 30, 1])]
    start = 0
    for k in written:
        keys, values, pos = cache.update(0, k, k, torch.arange(start, start + k.shape[2])[None])
        start += k.shape[2]
    torch.testing.assert_close(keys, torch.cat(written, 2))
    assert pos.tolist()[0][0] == list(range(42)) and cache.entries() == 2 * 42
    assert cache.held_bytes() == 2 * 2 * 42 * 4 * 4 < cache.allocated_bytes()


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="heads"):
        LlamaConfig(dim=32, heads=4, kv_heads=3)
