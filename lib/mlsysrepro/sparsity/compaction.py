"""Compacted projections: a projection whose input has batch-shared dropped columns runs at the kept width
(Sarma et al., NeurIPS 2021, Sec. 3), through a kernel that picks one exact form (:mod:`.forms`) per GEMM.

A training step of such a projection runs three GEMMs, forward, backward-data and backward-weight, and each has
three exact forms (:data:`.forms.STAGE_FORMS`): ``per-draw`` (one GEMM at the kept width per mask draw, the
paper's design), ``batched`` (those GEMMs in one ``torch.bmm``) and ``dense`` (the masked full-width GEMM). A
:class:`Kernel` names the form of each stage, and :data:`KERNELS` names the ones the benchmark and the notebook time;
``auto`` (:class:`Tuned`) measures the forms on each shape it meets and runs the fastest of each stage
(:func:`.gemm_timing.fastest_forms`).

Which is fastest depends on the machine. With ``s = 1`` (a fresh mask every step) a compacted GEMM has only B rows
and a weight of its own, so it runs at a fraction of the rate of the dense GEMM over T B rows, and gathering the
weight costs ``k N`` copies a step; the paper's GPU kernels made compaction pay (Sec. 5), on a 2-core CPU neither
cost is hidden (see :mod:`.gemm_timing` and the structured-dropout notebook for the measured numbers).
:func:`masked_projection` is the one entry point.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .forms import BACKWARD_DATA, BACKWARD_WEIGHT, FORWARD, STAGE_FORMS, STAGES
from .gemm_timing import fastest_forms
from .masks import draw_period, dropout_mask, kept_indices


@dataclass(frozen=True)
class Kernel:
    """The form (one of :data:`.forms.STAGE_FORMS`) of each of the three GEMMs of a compacted projection."""

    forward: str
    backward_data: str
    backward_weight: str

    def __post_init__(self):
        for stage, form in zip(STAGES, (self.forward, self.backward_data, self.backward_weight)):
            if form not in STAGE_FORMS:
                raise ValueError(f"the {stage} form must be one of {STAGE_FORMS}, got {form!r}")

    def resolve(self, x: torch.Tensor, weight_t: torch.Tensor, indices: torch.Tensor, period: int) -> "Kernel":
        """The kernel that runs a projection of this shape: this one, whatever the shape."""
        return self


class Tuned:
    """The kernel that is fastest on this machine for each shape: per stage, the form
    :func:`.gemm_timing.fastest_forms` measured fastest (the first projection of a shape pays for the measurement;
    like ``torch.backends.cudnn.benchmark``). Exact like every form; which form runs may differ between machines."""

    def resolve(self, x: torch.Tensor, weight_t: torch.Tensor, indices: torch.Tensor, period: int) -> Kernel:
        """The :class:`Kernel` of the fastest forms for ``x`` (T, B, H) into ``weight_t`` (H, N) with ``indices``
        (draws, k)."""
        steps, batch, width = x.shape
        return Kernel(*fastest_forms(steps, batch, width, weight_t.shape[1], indices.shape[1], period, x.dtype,
                                     x.device))


#: The kernels for batch-shared masks, by name. ``dense`` never compacts: the masked dense product through
#: autograd (what cases I and II always run), the reference every other kernel is tested against.
KERNELS = {
    "per-draw": Kernel("per-draw", "per-draw", "per-draw"),
    "per-draw, dense weight gradient": Kernel("per-draw", "per-draw", "dense"),
    "per-draw forward": Kernel("per-draw", "dense", "dense"),
    "batched": Kernel("batched", "batched", "batched"),
    "batched, dense weight gradient": Kernel("batched", "batched", "dense"),
    "auto": Tuned(),
    "dense": None,
}


def check_kernel(kernel: str) -> None:
    """Raise a ValueError naming the parameter and the allowed values."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {list(KERNELS)}, got {kernel!r}")


@dataclass
class Drop:
    """One dropout draw for a (T, B, width) tensor: a broadcastable ``mask``, or for the compacted
    batch-shared cases the kept ``indices`` (one row of k per draw), their ``scale`` (H / k), the
    ``period`` (steps per draw) and the ``kernel`` that computes the projection (a name of :data:`KERNELS`)."""

    mask: torch.Tensor | None = None
    indices: torch.Tensor | None = None
    scale: float = 1.0
    period: int = 1
    kernel: str = "per-draw"

    @classmethod
    def draw(cls, mode: str, p: float, steps: int, batch: int, width: int, generator: torch.Generator,
             kernel: str = "per-draw", dtype: torch.dtype = torch.float32, period: int = 1,
             device: torch.device | str = "cpu") -> "Drop":
        """Drawn from ``generator`` (a CPU generator: a draw is the same on every device, and the same for every
        kernel), moved to ``device``."""
        check_kernel(kernel)
        if KERNELS[kernel] is not None and mode in ("structured", "fixed") and p > 0:
            period = draw_period(mode, steps, period)
            indices = kept_indices(steps, width, p, generator, period).to(device)
            return cls(indices=indices, scale=width / indices.shape[1], period=period, kernel=kernel)
        return cls(mask=dropout_mask(mode, steps, batch, width, p, generator, dtype, period).to(device))



class CompactProjection(torch.autograd.Function):
    """``scale * x_t[:, idx] @ W^T[idx]`` for every group of ``period`` steps sharing the kept neurons ``idx``,
    forward and backward in the forms of a :class:`Kernel` (:data:`.forms.FORWARD`, :data:`.forms.BACKWARD_DATA`,
    :data:`.forms.BACKWARD_WEIGHT`).

    The backward re-gathers the kept rows of the weight rather than keep them from the forward pass: kept, the
    PTB model's (T, k, N) gathered weights (690 MB at H 650) made a training step slower on a 2-core CPU, not
    faster. The weight gradient goes into the kept rows with ``index_add_`` (autograd's backward of an indexed
    weight, ``index_put_`` with accumulation, is several times slower on the CPU).
    """

    @staticmethod
    def forward(ctx, x, weight_t, indices, scale, period, kernel):
        ctx.save_for_backward(x, weight_t, indices)
        ctx.scale, ctx.period, ctx.kernel = scale, period, kernel
        return FORWARD[kernel.forward](x, weight_t, indices, scale, period)

    @staticmethod
    def backward(ctx, grad):
        x, weight_t, indices = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_x = BACKWARD_DATA[ctx.kernel.backward_data](grad, weight_t, indices, ctx.scale, ctx.period,
                                                              x.shape[2])
        if ctx.needs_input_grad[1]:
            grad_w = BACKWARD_WEIGHT[ctx.kernel.backward_weight](x, grad, indices, ctx.scale, ctx.period)
        return grad_x, grad_w, None, None, None, None


def masked_projection(x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None, drop: Drop) -> torch.Tensor:
    """``(x * mask) W^T + b`` for a sequence ``x`` (T, B, in) and ``weight_t = W^T`` (in, out); compacted to the
    kept columns by ``drop.kernel`` (:class:`CompactProjection`) when ``drop`` has indices."""
    if drop.indices is None:
        out = (x * drop.mask) @ weight_t
    else:
        x = x.contiguous()
        kernel = KERNELS[drop.kernel].resolve(x, weight_t, drop.indices, drop.period)
        out = CompactProjection.apply(x, weight_t, drop.indices, drop.scale, drop.period, kernel)
    return out if bias is None else out + bias
