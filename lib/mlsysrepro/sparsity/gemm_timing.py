"""The three GEMMs of a projection that reads a dropped hidden state, timed one by one (Sarma et al., Sec. 3).

For a sequence ``X`` (T steps, batch B, width H) feeding a weight ``W`` (N x H, stored as ``W^T``, H x N,
as :mod:`.lstm` stores it) through a dropout mask:

=================  ==========================================  ============================================
stage              dense, masked (cases I-IV)                   compacted (case III, k kept neurons a step)
=================  ==========================================  ============================================
forward            ``(X * m) W^T``: (T B, H) @ (H, N)            ``X[:, :, idx] W^T[idx]``: T x (B, k) @ (k, N)
backward-data      ``(dY W) * m``: (T B, N) @ (N, H)             T x (B, N) @ (N, k), scattered into dX
backward-weight    ``dY^T (X * m)``: (N, T B) @ (T B, H)         T x (k, B) @ (B, N), added into rows idx of dW^T
=================  ==========================================  ============================================

:func:`time_stages` times both columns on the same data, in this process, and gives the speed-up of
each stage beside the ideal one, ``H / k = 1 / (1 - p)``. The compacted path includes its gathers and
scatters, which the ideal ignores, and runs T GEMMs of B rows where the dense path runs one of T B
rows: with a small batch the per-step GEMMs re-read their weight every step and are bound by memory
bandwidth on a CPU, which is where the measured speed-up falls short of the ideal.
"""

from __future__ import annotations

import statistics
import time

import torch

from .masks import kept_indices, mask_from_indices


def median_seconds(fn, repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn`` after one warm-up call."""
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def dense_stages(x, mask, w_t, dy):
    """The three dense GEMMs of ``(X * mask) W^T`` and their gradients, as callables."""
    steps, batch, hidden = x.shape
    xm = (x * mask).reshape(steps * batch, hidden)
    dy2 = dy.reshape(steps * batch, -1)
    return {
        "forward": lambda: (x * mask).reshape(steps * batch, hidden) @ w_t,
        "backward-data": lambda: (dy2 @ w_t.t()).view(steps, batch, hidden) * mask,
        "backward-weight": lambda: xm.t() @ dy2,
    }


def compact_stages(x, indices, w_t, dy):
    """The three compacted GEMMs, with the gathers and scatters they need (as :class:`.lstm.CompactProjection`)."""
    steps, batch, hidden = x.shape
    k = indices.shape[1]
    gather_index = indices[:, None, :].expand(steps, batch, k)
    kept_x = x.gather(2, gather_index)
    flat = indices.reshape(-1)

    def forward():
        return torch.bmm(x.gather(2, gather_index), w_t.index_select(0, flat).view(steps, k, -1))

    def backward_data():
        kept_w = w_t.index_select(0, flat).view(steps, k, -1)
        return torch.zeros_like(x).scatter_(2, gather_index, torch.bmm(dy, kept_w.transpose(1, 2)))

    def backward_weight():
        grads = torch.bmm(kept_x.transpose(1, 2), dy).reshape(steps * k, -1)
        return torch.zeros_like(w_t).index_add_(0, flat, grads)

    return {"forward": forward, "backward-data": backward_data, "backward-weight": backward_weight}


def time_stages(steps: int, batch: int, hidden: int, out_dim: int, p: float, repeats: int = 10,
                seed: int = 0) -> list[dict]:
    """Median seconds per stage, dense-masked (structured mask) against compacted, with speed-ups."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, batch, hidden, generator=g)
    w_t = torch.randn(hidden, out_dim, generator=g)
    dy = torch.randn(steps, batch, out_dim, generator=g)
    indices = kept_indices(steps, hidden, p, g)
    dense = dense_stages(x, mask_from_indices(indices, hidden), w_t, dy)
    compact = compact_stages(x, indices, w_t, dy)
    rows = []
    for stage in dense:
        d, c = median_seconds(dense[stage], repeats), median_seconds(compact[stage], repeats)
        rows.append({"stage": stage, "p": p, "dense_s": d, "compact_s": c, "speedup": d / c,
                     "ideal_speedup": hidden / indices.shape[1]})
    return rows
