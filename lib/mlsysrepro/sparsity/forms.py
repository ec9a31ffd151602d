"""The three GEMMs of a projection whose input has batch-shared dropped columns, each in three exact forms
(Sarma et al., NeurIPS 2021, Sec. 3).

With a batch-shared mask (the paper's cases III and IV) whole columns of ``x_t`` are zero and only the ``k``
kept neurons matter. For every group of ``s`` steps that shares a draw (``s`` is the mask's period: 1 for the
paper's case III, T for case IV) the kept columns of ``x`` and rows of ``W^T`` are gathered, and the three GEMMs
of a training step shrink by ``k / H = 1 - p``:

=================  ==========================================  ============================================
stage              dense, masked                               compacted, per draw
=================  ==========================================  ============================================
forward            ``(X * m) W^T``: (T B, H) @ (H, N)            (s B, k) @ (k, N)
backward-data      ``(dY W) * m``: (T B, N) @ (N, H)             (s B, N) @ (N, k), scattered into dX
backward-weight    ``(X * m)^T dY``: (H, T B) @ (T B, N)         (k, s B) @ (s B, N), added into dW^T
=================  ==========================================  ============================================

Each stage has three forms (:data:`STAGE_FORMS`): ``per-draw`` runs one GEMM per draw in a loop, gathering the
kept rows of the weight into one reused buffer; ``batched`` gathers every draw's rows at once, a (T/s, k, N)
weight, and runs one batched GEMM (``torch.bmm``; every draw keeps the same ``k``, so no padding is needed);
``dense`` runs the masked full-width GEMM over all T B rows. All are exact: they compute the same numbers as the
dense masked product (the tests compare every form with it in float64). The weight is stored as ``W^T`` (in x N),
whose kept rows are contiguous. :mod:`.compaction` chooses a form per stage (a kernel); :mod:`.gemm_timing` times
them.
"""

from __future__ import annotations

import torch

from .masks import mask_from_indices

STAGES = ("forward", "backward-data", "backward-weight")
STAGE_FORMS = ("per-draw", "batched", "dense")


def draws(indices: torch.Tensor, period: int):
    """(rows, idx) for every draw: the slice of steps that shares the kept neurons ``idx``."""
    return [(slice(d * period, (d + 1) * period), idx) for d, idx in enumerate(indices)]


def _mask(indices, period, x):
    """The dense (T, 1, H) mask, scaled, of the kept ``indices``, for ``x`` (T, B, H)."""
    return mask_from_indices(indices, x.shape[2], x.dtype, period, x.shape[0]).to(x.device)


def _by_draw(x, indices, period):
    """``x`` (T, B, width) as (draws, s B, width), zero-padded when the last draw is shorter than ``period``."""
    steps, batch, width = x.shape
    padded = indices.shape[0] * period
    if padded > steps:
        x = torch.cat([x, x.new_zeros(padded - steps, batch, width)])
    return x.reshape(indices.shape[0], period * batch, width)


def _kept_columns(x, indices, period, scale):
    """``scale * x[:, :, idx]`` of every draw at once: (draws, s B, k)."""
    grouped = _by_draw(x, indices, period)
    return grouped.gather(2, indices[:, None, :].expand(-1, grouped.shape[1], -1)).mul_(scale)


# -- forward ------------------------------------------------------------------------------------------------

def forward_per_draw(x, weight_t, indices, scale, period):
    """Per draw, ``scale * x[rows][:, :, idx]`` (s B, k) @ ``W^T[idx]`` (k, N), the rows gathered into one buffer."""
    width, out_dim = x.shape[2], weight_t.shape[1]
    out = x.new_empty(*x.shape[:2], out_dim)
    kept_w = weight_t.new_empty(indices.shape[1], out_dim)
    for rows, idx in draws(indices, period):
        kept_x = x[rows].reshape(-1, width).index_select(1, idx).mul_(scale)
        torch.mm(kept_x, torch.index_select(weight_t, 0, idx, out=kept_w), out=out[rows].view(-1, out_dim))
    return out


def forward_batched(x, weight_t, indices, scale, period):
    """Every draw at once: (draws, s B, k) @ ``W^T[indices]`` (draws, k, N) in one ``torch.bmm``."""
    out = torch.bmm(_kept_columns(x, indices, period, scale), weight_t[indices])
    return out.reshape(-1, x.shape[1], weight_t.shape[1])[: x.shape[0]]


def forward_dense(x, weight_t, indices, scale, period):
    """``(x * m) W^T``: one GEMM over all T B rows at the full width (``scale`` is in the mask ``m``)."""
    return ((x * _mask(indices, period, x)).reshape(-1, x.shape[2]) @ weight_t).view(*x.shape[:2], -1)


# -- backward-data ------------------------------------------------------------------------------------------

def backward_data_per_draw(grad, weight_t, indices, scale, period, width):
    """Per draw, ``grad[rows]`` (s B, N) @ ``W^T[idx]^T`` (N, k), written into the kept columns of a zero dX.

    This orientation (dX, not dX^T) ran faster on 2 CPU cores when we measured both in one process, interleaved
    (15.9 against 28.4 ms for H 650, N 2600, batch 20, T 35)."""
    steps, batch, out_dim = grad.shape
    grad_x = grad.new_zeros(steps, batch, width)
    kept_w = weight_t.new_empty(indices.shape[1], out_dim)
    for rows, idx in draws(indices, period):
        kept = grad[rows].reshape(-1, out_dim) @ torch.index_select(weight_t, 0, idx, out=kept_w).t()
        grad_x[rows].view(-1, width).index_copy_(1, idx, kept.mul_(scale))
    return grad_x


def backward_data_batched(grad, weight_t, indices, scale, period, width):
    """Every draw at once: (draws, s B, N) @ ``W^T[indices]^T`` (draws, N, k), scattered into a zero dX."""
    steps, batch, _ = grad.shape
    kept = torch.bmm(_by_draw(grad, indices, period), weight_t[indices].transpose(1, 2)).mul_(scale)
    grad_x = grad.new_zeros(indices.shape[0], kept.shape[1], width)
    grad_x.scatter_(2, indices[:, None, :].expand(-1, kept.shape[1], -1), kept)
    return grad_x.reshape(-1, batch, width)[:steps]


def backward_data_dense(grad, weight_t, indices, scale, period, width):
    """``(dY W) * m``: one full-width GEMM, the dropped columns zeroed afterwards."""
    steps, batch, out_dim = grad.shape
    mask = mask_from_indices(indices, width, grad.dtype, period, steps).to(grad.device)
    return (grad.reshape(-1, out_dim) @ weight_t.t()).view(steps, batch, width) * mask


# -- backward-weight ----------------------------------------------------------------------------------------

def backward_weight_per_draw(x, grad, indices, scale, period):
    """Per draw, (k, s B) @ (s B, N), added into the kept rows of a zero dW^T."""
    width, out_dim = x.shape[2], grad.shape[2]
    grad_w = grad.new_zeros(width, out_dim)
    kept_grad = grad.new_empty(indices.shape[1], out_dim)
    for rows, idx in draws(indices, period):
        kept_x = x[rows].reshape(-1, width).index_select(1, idx).mul_(scale)
        grad_w.index_add_(0, idx, torch.mm(kept_x.t(), grad[rows].reshape(-1, out_dim), out=kept_grad))
    return grad_w


def backward_weight_batched(x, grad, indices, scale, period):
    """Every draw at once: (draws, k, s B) @ (draws, s B, N), added into the kept rows of a zero dW^T."""
    kept = torch.bmm(_kept_columns(x, indices, period, scale).transpose(1, 2), _by_draw(grad, indices, period))
    grad_w = grad.new_zeros(x.shape[2], grad.shape[2])
    return grad_w.index_add_(0, indices.reshape(-1), kept.reshape(-1, grad.shape[2]))


def backward_weight_dense(x, grad, indices, scale, period):
    """``(X * m)^T dY``: one GEMM over all T B rows at the full width (the dropped rows come out zero)."""
    return (x * _mask(indices, period, x)).reshape(-1, x.shape[2]).t() @ grad.reshape(-1, grad.shape[2])


FORWARD = {"per-draw": forward_per_draw, "batched": forward_batched, "dense": forward_dense}
BACKWARD_DATA = {"per-draw": backward_data_per_draw, "batched": backward_data_batched, "dense": backward_data_dense}
BACKWARD_WEIGHT = {"per-draw": backward_weight_per_draw, "batched": backward_weight_batched,
                   "dense": backward_weight_dense}



def stage_calls(x, indices, w_t, dy, scale: float, period: int = 1) -> dict[str, dict[str, callable]]:
    """``{stage: {form: callable}}``: every form of the three GEMMs of one compacted projection, on ``x``
    (T, B, H), ``w_t`` (H, N) and the output gradient ``dy`` (T, B, N)."""
    hidden = x.shape[2]
    return {
        "forward": {form: (lambda f=f: f(x, w_t, indices, scale, period)) for form, f in FORWARD.items()},
        "backward-data": {form: (lambda f=f: f(dy, w_t, indices, scale, period, hidden))
                          for form, f in BACKWARD_DATA.items()},
        "backward-weight": {form: (lambda f=f: f(x, dy, indices, scale, period))
                            for form, f in BACKWARD_WEIGHT.items()},
    }
