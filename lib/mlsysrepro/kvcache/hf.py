"""Optional: the budgeted cache inside a HuggingFace causal LM (the ``paper`` scale's path to LLaMA-3-8B or
Qwen2.5-7B). Needs ``transformers`` (tested with 4.57), which the project does not install.

A HuggingFace attention layer rotates its keys with RoPE, hands them to ``past_key_values.update`` and then calls
the attention function its config names. :class:`HFCache` is a ``transformers`` cache that forwards ``update`` to
one of our caches (:class:`.cache.BudgetedCache`, :class:`.cache.FullCache`), and :func:`attention` is an
attention function, registered as ``"mlsysrepro_budgeted"``, that masks by the positions our cache returns and
passes the weights back to it (``observe``). So the same policies and allocators run unchanged on a real model::

    model.set_attn_implementation(ATTENTION)
    cache = HFCache(allocation.cache(make_policy("snapkv")), model)
    out = model(input_ids, past_key_values=cache, use_cache=True)

Limits: sequences of one batch share their positions (no padding), and eager attention only (no fused kernel).
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache

from ..transformer.llama import attend

ATTENTION = "mlsysrepro_budgeted"


class HFCache(Cache):
    """A ``transformers`` cache backed by one of ours; ``model`` is the HuggingFace model it serves."""

    def __init__(self, inner, model):
        super().__init__(layers=[])
        self.inner, self.seen = inner, 0
        self.positions: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for module in model.modules():
            if hasattr(module, "layer_idx") and hasattr(module, "o_proj"):
                module.mlsysrepro_cache = self

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        b, _, t, _ = key_states.shape
        query_pos = cache_kwargs["cache_position"][None, :].expand(b, t)
        keys, values, key_pos = self.inner.update(layer_idx, key_states, value_states, query_pos)
        self.positions[layer_idx] = (key_pos, query_pos)
        if layer_idx == 0:
            self.seen += t
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seen

    def get_mask_sizes(self, cache_position, layer_idx):
        return self.seen + cache_position.shape[0], 0

    @property
    def is_compileable(self) -> bool:
        return False


def attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Our masked attention (:func:`mlsysrepro.transformer.llama.attend`) over what the cache returned, the
    weights passed to the cache's ``observe``; HuggingFace's own mask is not used."""
    cache = module.mlsysrepro_cache
    key_pos, query_pos = cache.positions[module.layer_idx]
    context, weights = attend(query, key, value, key_pos, query_pos, scaling)
    cache.inner.observe(module.layer_idx, weights)
    return context.transpose(1, 2).contiguous(), weights


AttentionInterface.register(ATTENTION, attention)
