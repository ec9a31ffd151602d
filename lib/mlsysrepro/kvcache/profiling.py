"""One-time profiling: how much each KV cache matters (BaKlaVa's steps 1 and 2), and a retrieval score.

**Head importance** (BaKlaVa, Gulhan et al. 2025). Forward hooks record, for every query head ``h`` of every
layer, the residual stream ``x`` entering the attention sub-layer and the head's own contribution to it,
``o_h = W_O[:, h] · softmax(q_h K^T) V`` (its slice of the output projection). A head that changes its input more
matters more: ``importance_h = 1 - cos(x, x + o_h)``, averaged over tokens and prompts. A head whose output is
zero scores 0. (The paper compares a head's input with its output; we read the output as the residual stream
after the head, which the summaries do not settle.)

**GQA and layers.** The query heads sharing a KV head share one cache, so their importances are averaged into one
per cache; the layer factor is ShortGPT's block influence ``1 - cos(layer input, layer output)`` (Men et al.
2024), raised to an exponent searched with the budgets (:func:`cache_importance`).

**Retrieval score** (for the DuoAttention-like allocator): on retrieval prompts, the attention the query that
predicts the answer pays to the record it must copy, per cache: high for retrieval heads, near zero for local ones.

Public entry points: :func:`profile_heads`, :func:`cache_importance`, :func:`retrieval_scores`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..transformer.llama import Llama
from ..transformer.retrieval import RECORD_LEN, RetrievalBatch
from .cache import FullCache


@dataclass(frozen=True)
class HeadProfile:
    head: torch.Tensor  # (layers, heads): 1 - cos(x, x + o_h), mean over tokens
    layer: torch.Tensor  # (layers,): 1 - cos(block input, block output)


@torch.no_grad()
def profile_heads(model: Llama, prompts: torch.Tensor, batch: int = 8) -> HeadProfile:
    """Head and layer importance of ``model`` on ``prompts`` (N, T), averaged over every token."""
    cfg = model.cfg
    head_sum = torch.zeros(cfg.layers, cfg.heads, dtype=torch.float64)
    layer_sum = torch.zeros(cfg.layers, dtype=torch.float64)
    residual: dict[int, torch.Tensor] = {}

    def block_input_hook(i):
        def hook(module, args):
            residual[i] = args[0]  # the residual stream entering the block (and its attention sub-layer)
        return hook

    def block_hook(i):
        def hook(module, args, output):
            layer_sum[i] += (1 - F.cosine_similarity(args[0], output, dim=-1)).double().sum()
        return hook

    def out_hook(i):
        def hook(module, args, output):
            context = args[0].unflatten(-1, (cfg.heads, cfg.head_dim))  # (B, T, heads, d)
            w = module.weight.view(cfg.dim, cfg.heads, cfg.head_dim)
            per_head = torch.einsum("bthd,ehd->bthe", context, w)  # each head's o_h: (B, T, heads, dim)
            x = residual[i][..., None, :]
            head_sum[i] += (1 - F.cosine_similarity(x, x + per_head, dim=-1)).double().sum((0, 1))
        return hook

    handles = []
    for i, block in enumerate(model.blocks):
        handles.append(block.register_forward_hook(block_hook(i)))
        handles.append(block.register_forward_pre_hook(block_input_hook(i)))
        handles.append(block.attn.out.register_forward_hook(out_hook(i)))
    try:
        for start in range(0, prompts.shape[0], batch):
            model(prompts[start:start + batch])
    finally:
        for h in handles:
            h.remove()
    tokens = prompts.numel()
    return HeadProfile(head_sum / tokens, layer_sum / tokens)


def cache_importance(profile: HeadProfile, kv_heads: int, layer_exponent: float = 1.0) -> torch.Tensor:
    """(layers, kv_heads): the mean importance of each KV head's query heads times the layer factor
    ``** layer_exponent`` (0 leaves the layer out)."""
    per_cache = profile.head.unflatten(1, (kv_heads, -1)).mean(-1)
    return per_cache * profile.layer[:, None] ** layer_exponent


class _LastQueryAttention(FullCache):
    """A full cache that remembers the attention of each layer's last query."""

    def __init__(self):
        super().__init__()
        self.last: dict[int, torch.Tensor] = {}

    def query_weights(self, layer, queries):
        return torch.arange(queries) == queries - 1  # the last query only

    def observe(self, layer, paid):
        self.last[layer] = paid  # (B, heads, S)


@torch.no_grad()
def retrieval_scores(model: Llama, batch: RetrievalBatch) -> torch.Tensor:
    """(layers, kv_heads): mean attention mass that the query predicting the first answer digit pays to the
    record holding the answer, averaged over a KV head's query heads and the batch."""
    cache = _LastQueryAttention()
    model(batch.tokens[:, :batch.answer_start], cache=cache)
    span = batch.record_start[:, None] + torch.arange(RECORD_LEN)  # (N, RECORD_LEN)
    cfg = model.cfg
    scores = torch.stack([cache.last[layer].gather(2, span[:, None, :].expand(-1, cfg.heads, -1)).sum(-1)
                          for layer in range(cfg.layers)])  # (layers, N, heads)
    return scores.mean(1).unflatten(1, (cfg.kv_heads, -1)).mean(-1)
