"""Prefill FLOPs of a decoder whose sequence shrinks as tokens are pruned (FastV's accounting, Chen et al. 2024).

Per decoder layer, a prefill over ``n`` tokens of width ``d`` with a feed-forward of width ``m`` costs

    4 n d² + 2 n² d + 2 n d m                                               (FastV, Sec. 4; VisionZip; SparseVLM)

multiply-accumulates: the four projections, the attention scores and their weighted sum, and the feed-forward.
The cost of a pruned prefill is the sum over layers with ``n`` the tokens that layer actually runs on; only tokens
removed from the sequence count as saved (a masked token costs as much as a kept one). The image encoder is left
out, as in those papers: every method runs it in full.
"""

from __future__ import annotations

import torch

from .llama import LlamaConfig


def layer_flops(n: torch.Tensor | int, dim: int, ffn: int) -> torch.Tensor:
    """``4 n d² + 2 n² d + 2 n d m`` for ``n`` tokens (a tensor of counts, or one)."""
    n = torch.as_tensor(n, dtype=torch.float64)
    return 4 * n * dim ** 2 + 2 * n ** 2 * dim + 2 * n * dim * ffn


def prefill_flops(cfg: LlamaConfig, lengths: torch.Tensor) -> torch.Tensor:
    """The prefill cost of each sequence: ``lengths`` (..., layers) holds the tokens each layer runs on."""
    lengths = torch.as_tensor(lengths)
    if lengths.shape[-1] != cfg.layers:
        raise ValueError(f"lengths must give one count per layer ({cfg.layers}), got shape {tuple(lengths.shape)}")
    return layer_flops(lengths, cfg.dim, cfg.ffn).sum(-1)


def saving(cfg: LlamaConfig, lengths: torch.Tensor, full: torch.Tensor, extra: torch.Tensor | float = 0.0
           ) -> torch.Tensor:
    """The share of the unpruned prefill's FLOPs saved: ``1 - (pruned + extra) / unpruned``, where ``full`` (...)
    is each sequence's unpruned length and ``extra`` a pruner's own cost (its scorer's)."""
    full = torch.as_tensor(full)
    unpruned = prefill_flops(cfg, full[..., None].expand(*full.shape, cfg.layers))
    return 1 - (prefill_flops(cfg, lengths) + extra) / unpruned
