"""Optional: the budgeted cache inside a HuggingFace causal LM (the ``paper`` scale's path to LLaMA-3-8B or
Qwen2.5-7B). Needs ``transformers`` (the optional extra ``hf``; tested with 4.57 and 5.17), which the project does
not install.

A HuggingFace attention layer rotates its keys with RoPE, hands them to ``past_key_values.update`` and then calls
the attention function its config names. :class:`HFCache` is a ``transformers`` cache that forwards ``update`` to
one of our caches (:class:`.cache.BudgetedCache`, :class:`.cache.FullCache`), and :func:`attention` is an
attention function, registered as ``"mlsysrepro_budgeted"``, that masks by the positions our cache returns, runs
torch's fused kernel, and hands our cache the attention it asks for (``query_weights``, ``observe``). So the same
policies and allocators run unchanged on a real model::

    model.set_attn_implementation(ATTENTION)
    cache = HFCache(allocation.cache(make_policy("snapkv")), model)
    out = model(input_ids, past_key_values=cache, use_cache=True)

Limits: sequences of one batch share their positions (no padding).
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache

from ..transformer.llama import Llama, attend

ATTENTION = "mlsysrepro_budgeted"


class HFCache(Cache):
    """A ``transformers`` cache backed by one of ours; ``model`` is the HuggingFace model it serves."""

    def __init__(self, inner, model):
        super().__init__(layers=[])
        self.inner, self.seen, self.start = inner, 0, 0
        self.positions: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for module in model.modules():
            if hasattr(module, "layer_idx") and hasattr(module, "o_proj"):
                module.mlsysrepro_cache = self

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None, **kwargs):
        """Store the new keys in our cache and return what the layer may attend to. The queries' positions are
        counted here (the tokens seen before this forward, then one per new token), the same in transformers 4.x,
        which passes them as ``cache_kwargs["cache_position"]``, and 5.x, which does not."""
        b, _, t, _ = key_states.shape
        if layer_idx == 0:
            self.start, self.seen = self.seen, self.seen + t
        query_pos = torch.arange(self.start, self.start + t, device=key_states.device)[None, :].expand(b, t)
        keys, values, key_pos = self.inner.update(layer_idx, key_states, value_states, query_pos)
        self.positions[layer_idx] = (key_pos, query_pos)
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seen

    def get_query_offset(self, layer_idx: int = 0) -> int:
        return self.seen

    def get_mask_sizes(self, query, layer_idx: int = 0):
        """(key length, offset) for the new queries: ``query`` is their cache positions (4.x) or their count (5.x)."""
        return self.seen + (query.shape[0] if isinstance(query, torch.Tensor) else int(query)), 0

    @property
    def is_compileable(self) -> bool:
        return False


def attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Our masked attention (:func:`mlsysrepro.transformer.llama.attend`) over what the cache returned, the
    attention it asks for passed to its ``observe``; HuggingFace's own mask is not used, and no weights are
    returned to it."""
    cache = module.mlsysrepro_cache
    layer = module.layer_idx
    key_pos, query_pos = cache.positions[layer]
    context, paid = attend(query, key, value, key_pos, query_pos, scaling,
                           cache.inner.query_weights(layer, query.shape[2]))
    cache.inner.observe(layer, paid)
    return context.transpose(1, 2).contiguous(), None


AttentionInterface.register(ATTENTION, attention)


def _halves(weight: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Rows of a q or k projection reordered per head from our interleaved RoPE pairs ``(2i, 2i+1)`` to
    HuggingFace's halves ``(i, i + d/2)``: the same rotation, so the same dot products."""
    order = torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))
    return weight.unflatten(0, (-1, head_dim))[:, order].flatten(0, 1)


@torch.no_grad()
def to_huggingface(model: Llama, attn_implementation: str = "sdpa"):
    """The same network as a ``transformers.LlamaForCausalLM`` (same weights, same logits): the peer our own
    prefill and decoding are timed against (``benchmarks/kvcache_decode.py``)."""
    from transformers import LlamaConfig as HFLlamaConfig, LlamaForCausalLM

    cfg = model.cfg
    hf = LlamaForCausalLM(HFLlamaConfig(
        vocab_size=cfg.vocab, hidden_size=cfg.dim, intermediate_size=cfg.ffn, num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads, rope_theta=cfg.rope_base,
        rms_norm_eps=model.norm.eps, max_position_embeddings=1 << 20, tie_word_embeddings=False,
        attn_implementation=attn_implementation)).to(model.head.weight.dtype).eval()
    hf.model.embed_tokens.weight.copy_(model.embed.weight)
    hf.model.norm.weight.copy_(model.norm.weight)
    hf.lm_head.weight.copy_(model.head.weight)
    for ours, theirs in zip(model.blocks, hf.model.layers):
        k, v = ours.attn.kv.weight.chunk(2)
        gate, up = ours.ffn.gate_up.weight.chunk(2)
        for target, source in ((theirs.input_layernorm, ours.attn_norm.weight),
                               (theirs.self_attn.q_proj, _halves(ours.attn.q.weight, cfg.head_dim)),
                               (theirs.self_attn.k_proj, _halves(k, cfg.head_dim)),
                               (theirs.self_attn.v_proj, v), (theirs.self_attn.o_proj, ours.attn.out.weight),
                               (theirs.post_attention_layernorm, ours.ffn_norm.weight),
                               (theirs.mlp.gate_proj, gate), (theirs.mlp.up_proj, up),
                               (theirs.mlp.down_proj, ours.ffn.down.weight)):
            target.weight.copy_(source)
    return hf
