"""The HuggingFace adapter (optional; skipped without ``transformers``): on a tiny randomly initialised
LlamaForCausalLM, our full cache reproduces HuggingFace's own decoding, and budgets hold."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from mlsysrepro.kvcache.cache import BudgetedCache, FullCache  # noqa: E402
from mlsysrepro.kvcache.hf import ATTENTION, HFCache  # noqa: E402
from mlsysrepro.kvcache.policies import H2O, SnapKV  # noqa: E402


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    m = transformers.LlamaForCausalLM(cfg).double().eval()
    m.set_attn_implementation(ATTENTION)
    return m


def decode(model, tokens, past, prefill=6):
    out = [model(tokens[:, :prefill], past_key_values=past, use_cache=True).logits]
    for t in range(prefill, tokens.shape[1]):
        out.append(model(tokens[:, t:t + 1], past_key_values=past, use_cache=True).logits)
    return torch.cat(out, 1)


@torch.no_grad()
def test_our_full_cache_decodes_like_huggingface(model):
    tokens = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1))
    model.set_attn_implementation("eager")
    reference = decode(model, tokens, transformers.DynamicCache())
    one_pass = model(tokens).logits
    model.set_attn_implementation(ATTENTION)
    ours = decode(model, tokens, HFCache(FullCache(), model))
    # HuggingFace's eager softmax runs in float32, ours in the model's float64
    torch.testing.assert_close(ours, reference, rtol=0, atol=1e-6)
    torch.testing.assert_close(ours, one_pass, rtol=0, atol=1e-6)
    large = decode(model, tokens, HFCache(BudgetedCache(torch.full((2, 2), 16), SnapKV(window=4)), model))
    assert torch.equal(large, ours)


@pytest.mark.parametrize("policy", [H2O(), SnapKV(window=2, kernel=3)], ids=["h2o", "snapkv"])
@torch.no_grad()
def test_budgets_hold_inside_a_huggingface_model(model, policy):
    tokens = torch.randint(0, 50, (2, 20), generator=torch.Generator().manual_seed(2))
    budgets = torch.tensor([[3, 7], [5, 4]])
    inner = BudgetedCache(budgets, policy)
    logits = decode(model, tokens, HFCache(inner, model))
    assert torch.equal(inner.held(), budgets[:, None, :].expand(-1, 2, -1))
    assert torch.isfinite(logits).all()


@torch.no_grad()
def test_our_llama_copied_into_huggingface_computes_the_same_logits():
    from mlsysrepro.kvcache.hf import to_huggingface
    from mlsysrepro.transformer.llama import Llama, LlamaConfig

    torch.manual_seed(0)
    ours = Llama(LlamaConfig(vocab=50, dim=32, layers=2, heads=4, kv_heads=2, ffn=64)).double().eval()
    tokens = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(3))
    hf = to_huggingface(ours)
    torch.testing.assert_close(hf(tokens).logits, ours(tokens), rtol=0, atol=1e-6)
    cache = FullCache()
    prefill = ours(tokens[:, :8], cache=cache)
    step = ours(tokens[:, 8:9], torch.full((2, 1), 8), cache)
    torch.testing.assert_close(torch.cat((prefill, step), 1), hf(tokens[:, :9]).logits, rtol=0, atol=1e-6)
