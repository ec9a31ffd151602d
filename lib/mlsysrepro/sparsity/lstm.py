"""A multi-layer LSTM with explicit gate GEMMs, whose structured dropout shrinks the GEMMs (Sarma et al., NeurIPS 2021).

One layer, per time step (Hochreiter & Schmidhuber; the gate order of ``torch.nn.LSTM``)::

    [i, f, g, o] = x_t W_ih^T + b + h_{t-1} W_hh^T
    c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g),    h_t = sigmoid(o) tanh(c_t)

Dropout sits where Zaremba et al. (2014) put it, on the non-recurrent connections: on every layer's
input (the embeddings for layer 1, the layer below's ``h`` otherwise) and, in the models, on the top
layer's output before the decoder. The recurrent ``h_{t-1} W_hh^T`` is never dropped, so it never shrinks;
the time loop and its backward pass are :class:`.recurrence.Recurrence`, the same for every mode.

Each input projection runs once for the whole sequence, :func:`masked_projection`; its weight is
stored as ``W_ih^T`` (in x 4H). With a dense mask (cases I and II, and III or IV when ``compact=False``)
it is ``(x * mask) W^T``: one full-width GEMM over all T B rows. With a batch-shared mask (cases III
and IV) whole columns of ``x_t`` are zero and only the ``k`` kept neurons matter: for every group of
steps that shares a draw, the kept columns of ``x`` and rows of ``W^T`` are gathered and GEMMs of width
``k`` (instead of H) run, in :class:`CompactProjection`:

- forward:          (s B, k) @ (k, N) per draw      instead of (T B, H) @ (H, N)
- backward-data:    (k, N) @ (N, s B) per draw      (dX^T; the dropped neurons' gradient is zero, never computed)
- backward-weight:  (k, s B) @ (s B, N) per draw    (only the kept rows of W^T receive gradient)

so all three shrink by ``k / H = 1 - p``. ``s`` is the mask's period: 1 for the paper's case III, so
its GEMMs have only B rows and re-read a gathered weight every step; T for case IV, one GEMM of T B rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .masks import check, draw_period, dropout_mask, kept_indices
from .recurrence import Recurrence


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


class LSTM(nn.Module):
    """``num_layers`` LSTM layers on (T, B, input_size); dropout ``mode`` from :data:`.masks.MODES`.

    ``forward(x, state, generator)`` returns the top layer's outputs (T, B, H), not dropped, and the
    final ``(h, c)`` per layer. ``compact=False`` computes the batch-shared cases with dense masked
    GEMMs (the reference the tests compare the compacted path with). ``period`` re-draws a structured
    mask every ``period`` steps (1, the default, is the paper's case III; see :mod:`.masks`).
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 2, p: float = 0.0,
                 mode: str = "standard", compact: bool = True, period: int = 1):
        super().__init__()
        check(mode, p, period)
        self.hidden_size, self.num_layers, self.p, self.mode = hidden_size, num_layers, p, mode
        self.compact, self.period = compact, period
        sizes = [input_size] + [hidden_size] * (num_layers - 1)
        # W_ih^T (in x 4H): the layout whose kept rows a compacted projection copies contiguously
        self.w_ih = nn.ParameterList(nn.Parameter(torch.empty(d, 4 * hidden_size)) for d in sizes)
        self.w_hh = nn.ParameterList(nn.Parameter(torch.empty(4 * hidden_size, hidden_size)) for _ in sizes)
        self.bias = nn.ParameterList(nn.Parameter(torch.zeros(4 * hidden_size)) for _ in sizes)
        bound = hidden_size**-0.5
        for w in [*self.w_ih, *self.w_hh]:
            nn.init.uniform_(w, -bound, bound)

    def drop(self, steps: int, batch: int, width: int, generator: torch.Generator | None,
             dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> Drop:
        """This module's dropout draw for a (steps, batch, width) input; none in eval mode."""
        if not self.training or self.p == 0 or self.mode == "none":
            return Drop(mask=torch.ones(1, 1, width, dtype=dtype, device=device))
        return Drop.draw(self.mode, self.p, steps, batch, width, generator, self.compact, dtype, self.period, device)

    def forward(self, x: torch.Tensor, state=None, generator: torch.Generator | None = None):
        steps, batch, _ = x.shape
        if state is None:
            zeros = x.new_zeros(batch, self.hidden_size)
            state = [(zeros, zeros)] * self.num_layers
        final, layer_input = [], x
        for l in range(self.num_layers):
            drop = self.drop(steps, batch, layer_input.shape[2], generator, x.dtype, x.device)
            projected = masked_projection(layer_input, self.w_ih[l], self.bias[l], drop)  # (T, B, 4H), all steps
            h, c = state[l]
            layer_input, c = Recurrence.apply(projected, self.w_hh[l].t(), h, c)  # the sequential half
            final.append((layer_input[-1], c))
        return layer_input, final
