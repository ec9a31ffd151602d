"""A multi-layer LSTM with explicit gate GEMMs, whose structured dropout shrinks the GEMMs (Sarma et al., NeurIPS 2021).

One layer, per time step (Hochreiter & Schmidhuber; the gate order of ``torch.nn.LSTM``)::

    [i, f, g, o] = x_t W_ih^T + b + h_{t-1} W_hh^T
    c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g),    h_t = sigmoid(o) tanh(c_t)

Dropout sits where Zaremba et al. (2014) put it, on the non-recurrent connections: on every layer's
input (the embeddings for layer 1, the layer below's ``h`` otherwise) and, in the models, on the top
layer's output before the decoder. The recurrent ``h_{t-1} W_hh^T`` is never dropped, so it never shrinks;
the time loop and its backward pass are :class:`.recurrence.Recurrence`, the same for every mode.

``fused=True`` runs a layer whose dropout is a mask (every dense draw: cases I and II, and III or IV with
``kernel="dense"``) through ``torch.lstm``, the fused kernel behind ``torch.nn.LSTM`` (oneDNN on a CPU), on the
dropped input: the same function, for runs that need the model and not the timing of its GEMMs (the accuracy runs).
The speed measurements leave it off, so that every mode they compare runs the same time loop.

Each input projection runs once for the whole sequence through
:func:`mlsysrepro.sparsity.compaction.masked_projection`; its weight is stored as ``W_ih^T`` (in x 4H). With a
dense mask (cases I and II, and III or IV with ``kernel="dense"``) it is ``(x * mask) W^T``: one full-width GEMM
over all T B rows. With a batch-shared mask (cases III and IV) the ``kernel`` (a name of
:data:`mlsysrepro.sparsity.compaction.KERNELS`) runs its GEMMs at the kept width ``k``
(:class:`mlsysrepro.sparsity.compaction.CompactProjection`).
"""

from __future__ import annotations

import torch
from torch import nn

from ..sparsity.compaction import Drop, check_kernel, masked_projection
from ..sparsity.masks import check
from .recurrence import Recurrence


class LSTM(nn.Module):
    """``num_layers`` LSTM layers on (T, B, input_size); dropout ``mode`` from :data:`mlsysrepro.sparsity.masks.MODES`.

    ``forward(x, state, generator)`` returns the top layer's outputs (T, B, H), not dropped, and the
    final ``(h, c)`` per layer. ``kernel`` computes the batch-shared cases' projections (``"dense"``: dense
    masked GEMMs, the reference the tests compare every compacted kernel with). ``period`` re-draws a structured
    mask every ``period`` steps (1, the default, is the paper's case III; see :mod:`mlsysrepro.sparsity.masks`).
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 2, p: float = 0.0,
                 mode: str = "standard", kernel: str = "per-draw", period: int = 1, fused: bool = False):
        super().__init__()
        check(mode, p, period)
        check_kernel(kernel)
        self.hidden_size, self.num_layers, self.p, self.mode = hidden_size, num_layers, p, mode
        self.kernel, self.period, self.fused = kernel, period, fused
        sizes = [input_size] + [hidden_size] * (num_layers - 1)
        # W_ih^T (in x 4H): the layout whose kept rows a compacted projection copies contiguously
        self.w_ih = nn.ParameterList(nn.Parameter(torch.empty(d, 4 * hidden_size)) for d in sizes)
        self.w_hh = nn.ParameterList(nn.Parameter(torch.empty(4 * hidden_size, hidden_size)) for _ in sizes)
        self.bias = nn.ParameterList(nn.Parameter(torch.zeros(4 * hidden_size)) for _ in sizes)
        bound = hidden_size**-0.5
        for w in [*self.w_ih, *self.w_hh]:
            nn.init.uniform_(w, -bound, bound)

    def drop(self, steps: int, batch: int, width: int, generator: torch.Generator | None,
             dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu", dense: bool = False) -> Drop:
        """This module's dropout draw for a (steps, batch, width) input; none in eval mode. ``dense``: the same draw
        as a mask, whatever the kernel (for a GEMM this module does not compute)."""
        if not self.training or self.p == 0 or self.mode == "none":
            return Drop(mask=torch.ones(1, 1, width, dtype=dtype, device=device))
        return Drop.draw(self.mode, self.p, steps, batch, width, generator, "dense" if dense else self.kernel, dtype,
                         self.period, device)

    def forward(self, x: torch.Tensor, state=None, generator: torch.Generator | None = None):
        steps, batch, _ = x.shape
        if state is None:
            zeros = x.new_zeros(batch, self.hidden_size)
            state = [(zeros, zeros)] * self.num_layers
        final, layer_input = [], x
        for l in range(self.num_layers):
            drop = self.drop(steps, batch, layer_input.shape[2], generator, x.dtype, x.device)
            h, c = state[l]
            if self.fused and drop.indices is None:
                layer_input, c = self._fused_layer(l, layer_input * drop.mask, h, c)
            else:
                projected = masked_projection(layer_input, self.w_ih[l], self.bias[l], drop)  # (T, B, 4H), all steps
                layer_input, c = Recurrence.apply(projected, self.w_hh[l].t(), h, c)  # the sequential half
            final.append((layer_input[-1], c))
        return layer_input, final

    def _fused_layer(self, l: int, dropped: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        """Layer ``l`` on its dropped input through ``torch.lstm`` (weights ``W_ih``, ``W_hh``, ``b`` and a zero second
        bias, in ``torch.nn.LSTM``'s order): the outputs (T, B, H) and the final cell state."""
        weights = [self.w_ih[l].t(), self.w_hh[l], self.bias[l], torch.zeros_like(self.bias[l])]
        out, _, c_last = torch.lstm(dropped, (h[None], c[None]), weights, True, 1, 0.0, self.training, False, False)
        return out, c_last[0]
