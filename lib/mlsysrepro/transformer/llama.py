"""A Llama-style decoder on one screen (Touvron et al. 2023; GQA: Ainslie et al. 2023; RoPE: Su et al. 2021).

Each block is ``x + Attention(RMSNorm(x))`` then ``x + SwiGLU(RMSNorm(x))``. Attention has ``heads`` query heads
and ``kv_heads`` key/value heads; query head ``h`` reads KV head ``h // (heads / kv_heads)``.

**Positions travel with the keys.** RoPE rotates a query at position ``m`` and a key at position ``n`` so that
their dot product depends only on ``m - n``. Keys are rotated once, when written, with their own position; a
KV cache stores the rotated keys with those positions, so after entries are evicted the survivors keep their
true positions. The causal mask is computed from positions too: a query at position ``m`` attends to a key at
position ``n`` iff ``0 <= n <= m``; a cache marks an empty slot with position ``-1``. So a cache may hold
different keys, and different numbers of them, in each KV head. Without a cache (training, profiling) the
sequence attends to itself causally through torch's fused ``scaled_dot_product_attention``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    vocab: int = 128
    dim: int = 128
    layers: int = 4
    heads: int = 8
    kv_heads: int = 4
    ffn: int = 352  # SwiGLU hidden width (about 8/3 dim, as Llama)
    rope_base: float = 10_000.0

    def __post_init__(self):
        if self.dim % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"dim ({self.dim}) must divide by heads ({self.heads}) and heads by kv_heads "
                             f"({self.kv_heads})")

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


class KVCache(Protocol):
    """What attention asks of a cache (the seam of design.md)."""

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Store ``k, v`` (B, kv_heads, T, head_dim) at ``positions`` (B, T); return the keys, values and positions
        (B, kv_heads, S) the layer attends to now, empty slots at position -1."""

    def observe(self, layer: int, weights: torch.Tensor) -> None:
        """See the attention weights (B, heads, T, S) just computed over what ``update`` returned."""


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """RoPE: rotate each pair ``(x[2i], x[2i+1])`` of ``x`` (B, H, T, d) by ``position * base^(-2i/d)``."""
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=x.dtype, device=x.device) / d)
    angles = positions.to(x.dtype)[:, None, :, None] * inv_freq  # (B, 1, T, d/2)
    cos, sin = angles.cos(), angles.sin()
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


def attend(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, key_pos: torch.Tensor,
           positions: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of queries ``q`` (B, heads, T, d) at ``positions`` (B, T) over what a cache returned: ``keys``,
    ``values`` (B, kv_heads, S, d) at ``key_pos`` (B, kv_heads, S), masked by position (``0 <= n <= m``). The
    query heads of a KV head read its keys through one grouped matmul, without copying them. Returns the context
    (B, heads, T, d) and the weights (B, heads, T, S)."""
    b, heads, t, d = q.shape
    kv_heads = keys.shape[1]
    group = heads // kv_heads
    scores = (q.reshape(b, kv_heads, group * t, d) @ keys.transpose(-1, -2) * scale).view(b, kv_heads, group, t, -1)
    visible = (key_pos[:, :, None, :] >= 0) & (key_pos[:, :, None, :] <= positions[:, None, :, None])
    weights = scores.masked_fill(~visible[:, :, None], float("-inf")).softmax(-1)
    context = weights.view(b, kv_heads, group * t, -1) @ values  # (B, kv_heads, group * T, d)
    return context.view(b, heads, t, d), weights.flatten(1, 2)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig, layer: int):
        super().__init__()
        self.cfg, self.layer = cfg, layer
        self.q = nn.Linear(cfg.dim, cfg.heads * cfg.head_dim, bias=False)
        self.kv = nn.Linear(cfg.dim, 2 * cfg.kv_heads * cfg.head_dim, bias=False)
        self.out = nn.Linear(cfg.heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        cfg = self.cfg
        b, t, _ = x.shape
        q = self.q(x).view(b, t, cfg.heads, cfg.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2, cfg.kv_heads, cfg.head_dim).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, positions, cfg.rope_base), rotate(k, positions, cfg.rope_base)
        if cache is None:  # one pass over whole sequences (positions increase along T): the fused causal kernel
            context = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            return self.out(context.transpose(1, 2).reshape(b, t, -1))
        keys, values, key_pos = cache.update(self.layer, k, v, positions)  # (B, kv_heads, S, ...)
        context, weights = attend(q, keys, values, key_pos, positions, cfg.head_dim ** -0.5)
        cache.observe(self.layer, weights)
        return self.out(context.transpose(1, 2).reshape(b, t, -1))


class SwiGLU(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.gate_up = nn.Linear(cfg.dim, 2 * cfg.ffn, bias=False)
        self.down = nn.Linear(cfg.ffn, cfg.dim, bias=False)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(nn.functional.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig, layer: int):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(cfg.dim), Attention(cfg, layer)
        self.ffn_norm, self.ffn = RMSNorm(cfg.dim), SwiGLU(cfg)

    def forward(self, x, positions, cache):
        x = x + self.attn(self.attn_norm(x), positions, cache)
        return x + self.ffn(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.layers))
        self.norm = RMSNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        """Logits (B, T, vocab) for ``tokens`` (B, T) at ``positions`` (default 0..T-1); with a ``cache`` the
        tokens are appended to what it holds (prefill: many tokens, decoding: one)."""
        return self.forward_embeddings(self.embed(tokens), positions, cache)

    def forward_embeddings(self, x: torch.Tensor, positions: torch.Tensor | None = None,
                           cache: KVCache | None = None) -> torch.Tensor:
        """The same from input embeddings ``x`` (B, T, dim): how a vision-language model feeds image tokens."""
        if positions is None:
            positions = torch.arange(x.shape[1], device=x.device).expand(x.shape[0], -1)
        for block in self.blocks:
            x = block(x, positions, cache)
        return self.head(self.norm(x))
