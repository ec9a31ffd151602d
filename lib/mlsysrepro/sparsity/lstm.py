"""A multi-layer LSTM with explicit gate GEMMs, whose structured dropout shrinks the GEMMs (Sarma et al., NeurIPS 2021).

One layer, per time step (Hochreiter & Schmidhuber; the gate order of ``torch.nn.LSTM``)::

    [i, f, g, o] = x_t W_ih^T + b + h_{t-1} W_hh^T
    c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g),    h_t = sigmoid(o) tanh(c_t)

Dropout sits where Zaremba et al. (2014) put it, on the non-recurrent connections: on every layer's
input (the embeddings for layer 1, the layer below's ``h`` otherwise) and, in the models, on the top
layer's output before the decoder. The recurrent ``h_{t-1} W_hh^T`` is never dropped, so it never shrinks.

Each input projection runs once for the whole sequence, :func:`masked_projection`; its weight is
stored as ``W_ih^T`` (in x 4H). With a dense mask
(cases I, II, IV, and III when ``compact=False``) it is ``(x * mask) W^T``: full-width GEMMs. With case
III the mask is shared by the batch, so at step t whole columns of ``x_t`` are zero and only the ``k``
kept neurons matter: the kept columns of ``x`` and rows of ``W^T`` are gathered and one batched GEMM of
width ``k`` (instead of H) runs for all steps. Autograd turns the gathers into scatters and the batched
GEMM's backward into two GEMMs of the same width ``k``:

- forward:          (T, B, k) @ (T, k, N)   instead of (T B, H) @ (H, N)
- backward-data:    (T, B, N) @ (T, N, k)   (the dropped neurons' gradient is zero, never computed)
- backward-weight:  (T, k, B) @ (T, B, N)   (only the kept rows of W^T receive gradient)

so all three shrink by ``k / H = 1 - p``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .masks import MODES, dropout_mask, kept_indices, mask_from_indices


@dataclass
class Drop:
    """One dropout draw for a (T, B, width) tensor: a broadcastable ``mask``, or for the compacted
    structured case the kept ``indices`` (T, k) and their ``scale`` (H / k)."""

    mask: torch.Tensor | None = None
    indices: torch.Tensor | None = None
    scale: float = 1.0

    @classmethod
    def draw(cls, mode: str, p: float, steps: int, batch: int, width: int, generator: torch.Generator,
             compact: bool = True, dtype: torch.dtype = torch.float32) -> "Drop":
        if mode == "structured" and p > 0:
            indices = kept_indices(steps, width, p, generator)
            if compact:
                return cls(indices=indices, scale=width / indices.shape[1])
            return cls(mask=mask_from_indices(indices, width, dtype))
        return cls(mask=dropout_mask(mode, steps, batch, width, p, generator, dtype))


#: Most weight entries one compacted call gathers at once (a 10,000-word decoder goes a few steps at a time).
GATHER_LIMIT = 1 << 23


class CompactProjection(torch.autograd.Function):
    """``scale * x_t[:, idx_t] @ W^T[idx_t]`` for every step t, with a backward of the same width.

    ``weight_t`` is ``W^T`` (in x out), so the kept rows are contiguous copies. The backward re-gathers
    them (cheaper in memory than keeping a (T, k, out) copy) and adds the weight gradient into the kept
    rows with one ``index_add_``; autograd's own backward for an indexed weight (``index_put_`` with
    accumulation) is several times slower on the CPU.
    """

    @staticmethod
    def forward(ctx, x, weight_t, indices, scale):
        steps, batch, _ = x.shape
        k = indices.shape[1]
        kept_x = x.gather(2, indices[:, None, :].expand(steps, batch, k))  # (T, B, k)
        kept_w = weight_t.index_select(0, indices.reshape(-1)).view(steps, k, -1)  # (T, k, out)
        ctx.save_for_backward(kept_x, weight_t, indices)
        ctx.scale, ctx.in_features = scale, x.shape[2]
        return torch.bmm(kept_x, kept_w).mul_(scale)

    @staticmethod
    def backward(ctx, grad):
        kept_x, weight_t, indices = ctx.saved_tensors
        steps, batch, k = kept_x.shape
        grad = grad * ctx.scale
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:  # backward-data: (T, B, out) @ (T, out, k)
            kept_w = weight_t.index_select(0, indices.reshape(-1)).view(steps, k, -1)
            kept_grad = torch.bmm(grad, kept_w.transpose(1, 2))
            grad_x = grad.new_zeros(steps, batch, ctx.in_features).scatter_(
                2, indices[:, None, :].expand(steps, batch, k), kept_grad)
        if ctx.needs_input_grad[1]:  # backward-weight: (T, k, B) @ (T, B, out), into the kept rows only
            kept_grad_w = torch.bmm(kept_x.transpose(1, 2), grad).reshape(steps * k, -1)
            grad_w = torch.zeros_like(weight_t).index_add_(0, indices.reshape(-1), kept_grad_w)
        return grad_x, grad_w, None, None


def masked_projection(x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None, drop: Drop) -> torch.Tensor:
    """``(x * mask) W^T + b`` for a sequence ``x`` (T, B, in) and ``weight_t = W^T`` (in, out); compacted to the
    kept columns (:class:`CompactProjection`, a few steps at a time, at most :data:`GATHER_LIMIT` weight
    entries gathered per call) when ``drop`` has indices."""
    if drop.indices is None:
        out = (x * drop.mask) @ weight_t
    else:
        k = drop.indices.shape[1]
        chunk = max(1, GATHER_LIMIT // (k * weight_t.shape[1]))
        out = torch.cat([CompactProjection.apply(x[t:t + chunk], weight_t, drop.indices[t:t + chunk], drop.scale)
                         for t in range(0, x.shape[0], chunk)])
    return out if bias is None else out + bias


class LSTM(nn.Module):
    """``num_layers`` LSTM layers on (T, B, input_size); dropout ``mode`` from :data:`.masks.MODES`.

    ``forward(x, state, generator)`` returns the top layer's outputs (T, B, H), not dropped, and the
    final ``(h, c)`` per layer. ``compact=False`` computes structured dropout with dense masked GEMMs
    (the reference the tests compare the compacted path with).
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 2, p: float = 0.0,
                 mode: str = "standard", compact: bool = True):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.hidden_size, self.num_layers, self.p, self.mode, self.compact = hidden_size, num_layers, p, mode, compact
        sizes = [input_size] + [hidden_size] * (num_layers - 1)
        # W_ih^T (in x 4H): the layout whose kept rows a compacted projection copies contiguously
        self.w_ih = nn.ParameterList(nn.Parameter(torch.empty(d, 4 * hidden_size)) for d in sizes)
        self.w_hh = nn.ParameterList(nn.Parameter(torch.empty(4 * hidden_size, hidden_size)) for _ in sizes)
        self.bias = nn.ParameterList(nn.Parameter(torch.zeros(4 * hidden_size)) for _ in sizes)
        bound = hidden_size**-0.5
        for w in [*self.w_ih, *self.w_hh]:
            nn.init.uniform_(w, -bound, bound)

    def drop(self, steps: int, batch: int, width: int, generator: torch.Generator | None,
             dtype: torch.dtype = torch.float32) -> Drop:
        """This module's dropout draw for a (steps, batch, width) input; none in eval mode."""
        if not self.training or self.p == 0 or self.mode == "none":
            return Drop(mask=torch.ones(1, 1, width, dtype=dtype))
        return Drop.draw(self.mode, self.p, steps, batch, width, generator, self.compact, dtype)

    def forward(self, x: torch.Tensor, state=None, generator: torch.Generator | None = None):
        steps, batch, _ = x.shape
        if state is None:
            zeros = x.new_zeros(batch, self.hidden_size)
            state = [(zeros, zeros)] * self.num_layers
        final, layer_input = [], x
        for l in range(self.num_layers):
            drop = self.drop(steps, batch, layer_input.shape[2], generator, x.dtype)
            projected = masked_projection(layer_input, self.w_ih[l], self.bias[l], drop)  # (T, B, 4H), all steps
            h, c = state[l]
            outputs = []
            for t in range(steps):  # the recurrence is sequential; everything else is batched
                i, f, g, o = (projected[t] + h @ self.w_hh[l].t()).chunk(4, 1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
                outputs.append(h)
            layer_input = torch.stack(outputs)
            final.append((h, c))
        return layer_input, final
