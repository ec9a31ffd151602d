"""Compacted GEMMs: a projection whose input has batch-shared dropped columns runs at the kept width
(Sarma et al., NeurIPS 2021, Sec. 3).

With a batch-shared mask (the paper's cases III and IV) whole columns of ``x_t`` are zero and only the ``k``
kept neurons matter: for every group of steps that shares a draw, the kept columns of ``x`` and rows of ``W^T``
are gathered and GEMMs of width ``k`` (instead of H) run, in :class:`CompactProjection`:

- forward:          (s B, k) @ (k, N) per draw      instead of (T B, H) @ (H, N)
- backward-data:    (k, N) @ (N, s B) per draw      (dX^T; the dropped neurons' gradient is zero, never computed)
- backward-weight:  (k, s B) @ (s B, N) per draw    (only the kept rows of W^T receive gradient)

so all three shrink by ``k / H = 1 - p``. ``s`` is the mask's period: 1 for the paper's case III, so
its GEMMs have only B rows and re-read a gathered weight every step; T for case IV, one GEMM of T B rows.
The weight is stored as ``W^T`` (in x N), the layout whose kept rows are contiguous copies.
:func:`masked_projection` is the one entry point: dense ``(x * mask) W^T`` for a dense :class:`Drop`, compacted
for a batch-shared one. :mod:`mlsysrepro.recurrent.lstm` uses it for every LSTM input projection;
:mod:`.gemm_timing` times its three GEMMs against the dense ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .masks import draw_period, dropout_mask, kept_indices


@dataclass
class Drop:
    """One dropout draw for a (T, B, width) tensor: a broadcastable ``mask``, or for the compacted
    batch-shared cases the kept ``indices`` (one row of k per draw), their ``scale`` (H / k) and the
    ``period`` (steps per draw)."""

    mask: torch.Tensor | None = None
    indices: torch.Tensor | None = None
    scale: float = 1.0
    period: int = 1

    @classmethod
    def draw(cls, mode: str, p: float, steps: int, batch: int, width: int, generator: torch.Generator,
             compact: bool = True, dtype: torch.dtype = torch.float32, period: int = 1,
             device: torch.device | str = "cpu") -> "Drop":
        """Drawn from ``generator`` (a CPU generator: a draw is the same on every device), moved to ``device``."""
        if compact and mode in ("structured", "fixed") and p > 0:
            period = draw_period(mode, steps, period)
            indices = kept_indices(steps, width, p, generator, period).to(device)
            return cls(indices=indices, scale=width / indices.shape[1], period=period)
        return cls(mask=dropout_mask(mode, steps, batch, width, p, generator, dtype, period).to(device))


def draws(indices: torch.Tensor, period: int):
    """(rows, idx) for every draw: the slice of steps that shares the kept neurons ``idx``."""
    return [(slice(d * period, (d + 1) * period), idx) for d, idx in enumerate(indices)]


def compact_forward(x, weight_t, indices, scale, period):
    """Forward: per draw, ``scale * x[rows][:, :, idx]`` (s B, k) @ ``W^T[idx]`` (k, out)."""
    width = x.shape[2]
    out = x.new_empty(*x.shape[:2], weight_t.shape[1])
    for rows, idx in draws(indices, period):
        kept_x = x[rows].reshape(-1, width).index_select(1, idx).mul_(scale)
        torch.mm(kept_x, weight_t.index_select(0, idx), out=out[rows].view(-1, out.shape[2]))
    return out


def compact_backward_data(grad, weight_t, indices, scale, period, width):
    """Backward-data: per draw, ``W^T[idx]`` (k, out) @ ``grad[rows]^T`` (out, s B), written into the kept rows
    of a zero dX^T (width, T, B), returned as dX (T, B, width).

    The GEMM computes dX^T rather than dX = grad @ W^T[idx]^T: the same FLOPs with the short side (s B) as
    the output's columns; on 2 CPU cores MKL ran it faster in every shape we timed (H 650, out 4H or 10,000,
    batch 20 and 64, one process, interleaved rounds).
    """
    steps, batch, out = grad.shape
    grad_xt = grad.new_zeros(width, steps, batch)
    for rows, idx in draws(indices, period):
        kept_grad_t = weight_t.index_select(0, idx) @ grad[rows].reshape(-1, out).t()
        grad_xt[:, rows].view(width, -1).index_copy_(0, idx, kept_grad_t.mul_(scale))
    return grad_xt.permute(1, 2, 0).contiguous()


def compact_backward_weight(x, grad, indices, scale, period, weight_shape):
    """Backward-weight: per draw, (k, s B) @ (s B, out), added into the kept rows of a zero dW^T."""
    width = x.shape[2]
    grad_w = grad.new_zeros(weight_shape)
    for rows, idx in draws(indices, period):
        kept_x = x[rows].reshape(-1, width).index_select(1, idx).mul_(scale)
        grad_w.index_add_(0, idx, kept_x.t() @ grad[rows].reshape(-1, grad.shape[2]))
    return grad_w


class CompactProjection(torch.autograd.Function):
    """``scale * x_t[:, idx] @ W^T[idx]`` for every group of ``period`` steps sharing the kept neurons
    ``idx``, with a backward of the same width ``k``: :func:`compact_forward`,
    :func:`compact_backward_data`, :func:`compact_backward_weight`.

    ``weight_t`` is ``W^T`` (in x out), so the kept rows are contiguous copies. One GEMM per draw, in a
    loop over the draws: a single batched GEMM over a (T, k, out) gathered weight was about twice as
    slow on a 2-core CPU (the copy leaves the cache). The backward re-gathers the kept rows rather than
    keep them, and adds the weight gradient into them with ``index_add_`` (autograd's backward of an
    indexed weight, ``index_put_`` with accumulation, is several times slower on the CPU).
    """

    @staticmethod
    def forward(ctx, x, weight_t, indices, scale, period):
        ctx.save_for_backward(x, weight_t, indices)
        ctx.scale, ctx.period = scale, period
        return compact_forward(x, weight_t, indices, scale, period)

    @staticmethod
    def backward(ctx, grad):
        x, weight_t, indices = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_x = compact_backward_data(grad, weight_t, indices, ctx.scale, ctx.period, x.shape[2])
        if ctx.needs_input_grad[1]:
            grad_w = compact_backward_weight(x, grad, indices, ctx.scale, ctx.period, weight_t.shape)
        return grad_x, grad_w, None, None, None


def masked_projection(x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None, drop: Drop) -> torch.Tensor:
    """``(x * mask) W^T + b`` for a sequence ``x`` (T, B, in) and ``weight_t = W^T`` (in, out); compacted to the
    kept columns (:class:`CompactProjection`) when ``drop`` has indices."""
    if drop.indices is None:
        out = (x * drop.mask) @ weight_t
    else:
        out = CompactProjection.apply(x.contiguous(), weight_t, drop.indices, drop.scale, drop.period)
    return out if bias is None else out + bias
