import pytest
import torch

from mlsysrepro.kvcache.cache import FullCache
from mlsysrepro.transformer.llama import LlamaConfig, rotate

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


class EvictingCache(FullCache):
    """Really removes the same entries, so the survivors move to other slots."""

    def __init__(self, evicted):
        super().__init__()
        self.evicted = evicted

    def update(self, layer, k, v, positions):
        keys, values, pos = super().update(layer, k, v, positions)
        drop = pos < 0  # the empty slots of the last step go too
        for lay, head, p in self.evicted:
            if lay == layer and p < positions.min():
                drop[:, head] |= pos[:, head] == p
        # per head a different number survives: pad the shorter heads with empty slots (position -1) at the front
        keep = (~drop).sum(-1).max()
        order = torch.sort((~drop).to(torch.int8), dim=-1, stable=True).indices[..., -keep:]
        gather = lambda t: torch.gather(t, 2, order[..., None].expand(*order.shape, t.shape[-1]))
        kept_pos = torch.gather(torch.where(drop, -1, pos), 2, order)
        self.keys[layer], self.values[layer], self.positions[layer] = gather(keys), gather(values), kept_pos
        return self.keys[layer], self.values[layer], kept_pos


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
    def __init__(self):
        super().__init__()
        self.seen = []

    def observe(self, layer, weights):
        self.seen.append((layer, weights))


@torch.no_grad()
def test_the_cache_observes_causal_weights_per_query_head(model, tokens):
    cache = Recorder()
    model(tokens[:, :5], cache=cache)
    assert [layer for layer, _ in cache.seen] == list(range(CFG.layers))
    weights = cache.seen[0][1]
    assert weights.shape == (2, CFG.heads, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, CFG.heads, 5, dtype=torch.float64))
    assert (weights.triu(1) == 0).all()  # no query sees a later key


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="heads"):
        LlamaConfig(dim=32, heads=4, kv_heads=3)
