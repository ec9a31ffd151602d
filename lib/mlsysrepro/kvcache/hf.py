"""Optional: the budgeted cache inside a HuggingFace causal LM (the ``paper`` scale's path to LLaMA-3-8B or
Qwen2.5-7B). Needs ``transformers`` (the optional extra ``hf``; tested with 4.57 and 5.17), which the project does
not install.

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
    weights passed to the cache's ``observe``; HuggingFace's own mask is not used."""
    cache = module.mlsysrepro_cache
    key_pos, query_pos = cache.positions[module.layer_idx]
    context, weights = attend(query, key, value, key_pos, query_pos, scaling)
    cache.inner.observe(module.layer_idx, weights)
    return context.transpose(1, 2).contiguous(), weights


AttentionInterface.register(ATTENTION, attention)
