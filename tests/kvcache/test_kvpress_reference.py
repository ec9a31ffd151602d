"""SnapKV and PyramidKV against NVIDIA kvpress (optional; skipped without ``kvpress``, the ``kvpress`` extra).

On a tiny randomly initialised HF Llama (4 layers, 4 query heads, 2 KV heads), one prefill is compressed by
kvpress's press and by our budgeted cache with the same window, kernel and budgets; the positions each KV head
keeps must be the same sets (a kept key is found by matching its vector among the full cache's keys).
"""

import pytest
import torch

kvpress = pytest.importorskip("kvpress")
transformers = pytest.importorskip("transformers")

from mlsysrepro.kvcache.allocators import pyramid, total_budget  # noqa: E402
from mlsysrepro.kvcache.cache import BudgetedCache  # noqa: E402
from mlsysrepro.kvcache.hf import ATTENTION, HFCache  # noqa: E402
from mlsysrepro.kvcache.policies import SnapKV  # noqa: E402

LAYERS, KV_HEADS, TOKENS, WINDOW, KERNEL, COMPRESSION = 4, 2, 64, 8, 5, 0.5


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=LAYERS,
                                   num_attention_heads=4, num_key_value_heads=KV_HEADS, max_position_embeddings=128)
    return transformers.LlamaForCausalLM(cfg).eval()


def tokens():
    return torch.randint(0, 50, (1, TOKENS), generator=torch.Generator().manual_seed(3))


def keys_of(cache, layer):
    return cache.layers[layer].keys[0]  # (KV heads, entries, head dim)


@torch.no_grad()
def kvpress_kept(model, press) -> list[list[set[int]]]:
    model.set_attn_implementation("eager")
    full, pruned = transformers.DynamicCache(), transformers.DynamicCache()
    model(tokens(), past_key_values=full, use_cache=True)
    with press(model):
        model(tokens(), past_key_values=pruned, use_cache=True)
    kept = []
    for layer in range(LAYERS):
        every, some = keys_of(full, layer), keys_of(pruned, layer)
        same = torch.isclose(some[:, :, None, :], every[:, None, :, :], atol=1e-6).all(-1)  # (H, kept, all)
        kept.append([set(same[h].float().argmax(-1).tolist()) for h in range(KV_HEADS)])
    return kept


@torch.no_grad()
def our_kept(model, budgets: torch.Tensor) -> list[list[set[int]]]:
    model.set_attn_implementation(ATTENTION)
    inner = BudgetedCache(budgets, SnapKV(window=WINDOW, kernel=KERNEL))
    model(tokens(), past_key_values=HFCache(inner, model), use_cache=True)
    return [[set(p for p in inner.positions[layer][0, h].tolist() if p >= 0) for h in range(KV_HEADS)]
            for layer in range(LAYERS)]


def jaccard(a: list[list[set[int]]], b: list[list[set[int]]]) -> list[float]:
    return [len(x & y) / len(x | y) for la, lb in zip(a, b) for x, y in zip(la, lb)]


def test_snapkv_keeps_the_positions_kvpress_keeps(model):
    press = kvpress.SnapKVPress(compression_ratio=COMPRESSION, window_size=WINDOW, kernel_size=KERNEL)
    theirs = kvpress_kept(model, press)
    budget = len(theirs[0][0])
    ours = our_kept(model, torch.full((LAYERS, KV_HEADS), budget))
    assert min(jaccard(ours, theirs)) >= 0.9 and sum(jaccard(ours, theirs)) / (LAYERS * KV_HEADS) >= 0.97


def test_pyramidkv_budgets_and_positions_match_kvpress(model):
    press = kvpress.PyramidKVPress(compression_ratio=COMPRESSION, window_size=WINDOW, kernel_size=KERNEL, beta=20)
    theirs = kvpress_kept(model, press)
    allocation = pyramid((LAYERS, KV_HEADS), total_budget(COMPRESSION, LAYERS * KV_HEADS, TOKENS), 1, TOKENS,
                         beta=20, window=WINDOW)
    assert allocation.budgets[:, 0].tolist() == [len(layer[0]) for layer in theirs]
    ours = our_kept(model, allocation.budgets)
    assert sum(jaccard(ours, theirs)) / (LAYERS * KV_HEADS) >= 0.97
