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

    def query_weights(self, layer: int, queries: int) -> torch.Tensor | None:
        """How much the attention of each of the ``queries`` new queries counts in what :meth:`observe` receives:
        (T,) weights, or None when the cache reads no attention (then none is materialised: the layer runs the
        fused kernel only)."""

    def observe(self, layer: int, paid: torch.Tensor | None) -> None:
        """See the attention the new queries paid each of the S entries that ``update`` returned, summed over
        the queries with :meth:`query_weights`: (B, heads, S), or None when those were None."""


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_angles(positions: torch.Tensor, head_dim: int, base: float, dtype=torch.float32
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE's ``cos`` and ``sin`` (B, 1, T, head_dim / 2) of ``position * base^(-2i/d)`` for ``positions`` (B, T):
    computed once per forward pass and shared by every layer's queries and keys."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=dtype, device=positions.device) / head_dim)
    angles = positions.to(dtype)[:, None, :, None] * inv_freq
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rotate each pair ``(x[2i], x[2i+1])`` of ``x`` (B, H, T, d) by the angles of :func:`rope_angles`."""
    cos, sin = rope
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """RoPE (Su et al. 2021, eq. 34): ``x`` (B, H, T, d) rotated for ``positions`` (B, T)."""
    return apply_rotary(x, rope_angles(positions, x.shape[-1], base, x.dtype))


#: queries whose attention weights are written out at once when a cache asks for them (bounds the memory of a
#: long prefill to B x heads x PAID_CHUNK x S)
PAID_CHUNK = 512


def _is_causal_self_attention(keys: torch.Tensor, key_pos: torch.Tensor, positions: torch.Tensor) -> bool:
    """The keys are the queries' own, at increasing positions: the position mask is the causal mask."""
    t = positions.shape[1]
    if keys.shape[2] != t or (t > 1 and not bool((positions.diff(dim=-1) > 0).all())):
        return False
    return bool((key_pos == positions[:, None, :]).all())


def _weights(q: torch.Tensor, keys: torch.Tensor, visible: torch.Tensor | None, scale: float,
             rows: torch.Tensor) -> torch.Tensor:
    """(B, kv_heads, group, n, W): the attention weights of the query ``rows`` (n,) of ``q`` (B, heads, T, d) over
    the first W keys. ``visible`` (B, kv_heads, T, S), or None for causal self-attention, where the rows need only
    the keys up to the last of them (W); else W = S."""
    b, heads, _, d = q.shape
    kv_heads = keys.shape[1]
    group, n = heads // kv_heads, len(rows)
    width = keys.shape[2] if visible is not None else int(rows[-1]) + 1
    chunk = (q[:, :, rows] * scale).reshape(b, kv_heads, group * n, d)  # a KV head's query heads share its keys
    scores = (chunk @ keys[:, :, :width].transpose(-1, -2)).view(b, kv_heads, group, n, width)
    hidden = torch.arange(width, device=q.device) > rows[:, None] if visible is None else ~visible[:, :, None, rows]
    return scores.masked_fill_(hidden, float("-inf")).softmax(-1)


def _paid(q: torch.Tensor, keys: torch.Tensor, visible: torch.Tensor | None, scale: float,
          query_weights: torch.Tensor) -> torch.Tensor:
    """(B, heads, S): the attention weights of the queries with a nonzero weight, times that weight, summed over
    the queries; written out ``PAID_CHUNK`` queries at a time (:func:`_weights`)."""
    b, heads = q.shape[:2]
    kv_heads, s = keys.shape[1], keys.shape[2]
    paid = q.new_zeros(b, kv_heads, heads // kv_heads, s)
    chosen = query_weights.nonzero()[:, 0]
    for start in range(0, len(chosen), PAID_CHUNK):
        rows = chosen[start:start + PAID_CHUNK]
        weights = _weights(q, keys, visible, scale, rows)
        paid[..., :weights.shape[-1]] += query_weights[rows].to(weights.dtype) @ weights  # sum over the queries
    return paid.flatten(1, 2)


def attend(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, key_pos: torch.Tensor,
           positions: torch.Tensor, scale: float, query_weights: torch.Tensor | None = None
           ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention of queries ``q`` (B, heads, T, d) at ``positions`` (B, T) over what a cache returned: ``keys``,
    ``values`` (B, kv_heads, S, d) at ``key_pos`` (B, kv_heads, S), masked by position (``0 <= n <= m``).

    The context comes from torch's fused ``scaled_dot_product_attention`` (causal when the keys are the queries'
    own, else under the position mask, the query heads of a KV head reading its keys without a copy). Only when
    the cache asks for the attention it paid (``query_weights`` (T,), see :class:`KVCache`) are weights written
    out, for the queries whose weight is nonzero; decoding one token for such a cache, those weights are the
    attention itself (one pass, no fused kernel). Returns the context (B, heads, T, d) and the paid attention
    (B, heads, S), or None."""
    b, heads, t, d = q.shape
    kv_heads = keys.shape[1]
    group = heads // kv_heads
    if t == 1 and query_weights is not None:  # decoding for a cache that reads it: the weights are the attention
        hidden = ((key_pos < 0) | (key_pos > positions[:, None, :]))[:, :, None]  # (B, kv_heads, 1, S)
        scores = (q.reshape(b, kv_heads, group, d) * scale) @ keys.transpose(-1, -2)  # (B, kv_heads, group, S)
        weights = scores.masked_fill_(hidden, float("-inf")).softmax(-1)
        context = (weights @ values).view(b, heads, 1, d)  # the group's queries read their KV head
        return context, (weights * float(query_weights[0])).flatten(1, 2)
    causal = _is_causal_self_attention(keys, key_pos, positions)
    if causal:
        context = nn.functional.scaled_dot_product_attention(q, keys, values, is_causal=True, scale=scale,
                                                             enable_gqa=True)
        visible = None
    else:
        visible = (key_pos[:, :, None, :] >= 0) & (key_pos[:, :, None, :] <= positions[:, None, :, None])
        mask = visible if t == 1 else visible[:, :, None].expand(-1, -1, group, -1, -1).flatten(2, 3)
        grouped = q.reshape(b, kv_heads, group * t, d)  # the T queries of each of a KV head's query heads
        context = nn.functional.scaled_dot_product_attention(grouped, keys, values, attn_mask=mask, scale=scale)
        context = context.view(b, heads, t, d)
    paid = None if query_weights is None else _paid(q, keys, visible, scale, query_weights)
    return context, paid


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig, layer: int):
        super().__init__()
        self.cfg, self.layer = cfg, layer
        self.q = nn.Linear(cfg.dim, cfg.heads * cfg.head_dim, bias=False)
        self.kv = nn.Linear(cfg.dim, 2 * cfg.kv_heads * cfg.head_dim, bias=False)
        self.out = nn.Linear(cfg.heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache | None,
                rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        cfg = self.cfg
        b, t, _ = x.shape
        q = self.q(x).view(b, t, cfg.heads, cfg.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2, cfg.kv_heads, cfg.head_dim).permute(2, 0, 3, 1, 4)
        q, k = apply_rotary(q, rope), apply_rotary(k, rope)
        if cache is None:  # one pass over whole sequences (positions increase along T): the fused causal kernel
            context = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            return self.out(context.transpose(1, 2).reshape(b, t, -1))
        keys, values, key_pos = cache.update(self.layer, k, v, positions)  # (B, kv_heads, S, ...)
        context, paid = attend(q, keys, values, key_pos, positions, cfg.head_dim ** -0.5,
                               cache.query_weights(self.layer, t))
        cache.observe(self.layer, paid)
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

    def forward(self, x, positions, cache, rope=None):
        """``rope``: :func:`rope_angles` of ``positions``, when the caller computed them for every block."""
        if rope is None:
            rope = rope_angles(positions, self.attn.cfg.head_dim, self.attn.cfg.rope_base, x.dtype)
        x = x + self.attn(self.attn_norm(x), positions, cache, rope)
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
        rope = rope_angles(positions, self.cfg.head_dim, self.cfg.rope_base, x.dtype)
        for block in self.blocks:
            x = block(x, positions, cache, rope)
        return self.head(self.norm(x))
