"""The three GEMMs of a projection that reads a dropped hidden state, timed one by one (Sarma et al., Sec. 3).

For a sequence ``X`` (T steps, batch B, width H) feeding a weight ``W`` (N x H, stored as ``W^T``, H x N,
as :mod:`mlsysrepro.recurrent.lstm` stores it) through a batch-shared mask re-drawn every ``s`` steps (k kept neurons):

=================  ==========================================  ============================================
stage              dense, masked (what cases I and II need)    compacted (:mod:`.compaction`), one GEMM per draw
=================  ==========================================  ============================================
forward            ``(X * m) W^T``: (T B, H) @ (H, N)            T/s x (s B, k) @ (k, N)
backward-data      ``(dY W) * m``: (T B, N) @ (N, H)             T/s x (s B, N) @ (N, k), scattered into dX
backward-weight    ``(X * m)^T dY``: (H, T B) @ (T B, N)         T/s x (k, s B) @ (s B, N), added into dW^T
=================  ==========================================  ============================================

:func:`time_stages` times both columns on the same data, in this process, and gives the speed-up of
each stage beside the ideal one, ``H / k = 1 / (1 - p)``. The compacted column is the library's own
code (:func:`.compaction.compact_forward` and its two backward functions), gathers and scatters included,
which the ideal ignores. With ``s = 1`` (the paper's case III) it runs T GEMMs of B rows where the
dense path runs one of T B rows: each small GEMM re-reads its gathered weight and, on a 2-core CPU, runs
at a fraction of the large GEMM's rate, which is where the measured speed-up falls short of the ideal.
"""

from __future__ import annotations

import torch

from ..core.timing import interleaved
from .compaction import compact_backward_data, compact_backward_weight, compact_forward
from .masks import kept_indices, mask_from_indices

STAGES = ("forward", "backward-data", "backward-weight")


def dense_stages(x, mask, w_t, dy):
    """The three dense GEMMs of ``(X * mask) W^T`` and their gradients, as callables."""
    steps, batch, hidden = x.shape
    dy2 = dy.reshape(steps * batch, -1)
    return {
        "forward": lambda: (x * mask).reshape(steps * batch, hidden) @ w_t,
        "backward-data": lambda: (dy2 @ w_t.t()).view(steps, batch, hidden) * mask,
        "backward-weight": lambda: (x * mask).reshape(steps * batch, hidden).t() @ dy2,
    }


def compact_stages(x, indices, w_t, dy, scale: float, period: int = 1):
    """The three compacted GEMMs of :class:`.compaction.CompactProjection`, as callables."""
    return {
        "forward": lambda: compact_forward(x, w_t, indices, scale, period),
        "backward-data": lambda: compact_backward_data(dy, w_t, indices, scale, period, x.shape[2]),
        "backward-weight": lambda: compact_backward_weight(x, dy, indices, scale, period, w_t.shape),
    }


def time_stages(steps: int, batch: int, hidden: int, out_dim: int, p: float, period: int = 1, repeats: int = 10,
                seed: int = 0) -> list[dict]:
    """Median seconds per stage, dense-masked against compacted, with the measured and the ideal speed-ups."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, batch, hidden, generator=g)
    w_t = torch.randn(hidden, out_dim, generator=g)
    dy = torch.randn(steps, batch, out_dim, generator=g)
    indices = kept_indices(steps, hidden, p, g, period)
    scale = hidden / indices.shape[1]
    dense = dense_stages(x, mask_from_indices(indices, hidden, period=period, steps=steps), w_t, dy)
    compact = compact_stages(x, indices, w_t, dy, scale, period)
    rows = []
    for stage in STAGES:
        timed = interleaved({"dense": dense[stage], "compact": compact[stage]}, repeats)
        d, c = timed["dense"].median, timed["compact"].median
        rows.append({"stage": stage, "p": p, "period": period, "batch": batch, "dense_s": d, "compact_s": c,
                     "speedup": d / c, "ideal_speedup": scale})
    return rows
