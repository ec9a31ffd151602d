"""Dropout masks over (time, batch, hidden): the four cases of Fig. 1 of Sarma et al. (NeurIPS 2021).

A mask is either the same or different across the batch, and the same or different across time steps:

==========  =================  ===================  ===============  ==============================
mode        case               across the batch     across time      shape drawn (broadcast to T,B,H)
==========  =================  ===================  ===============  ==============================
standard    I (Zaremba et al.)  different           different        (T, B, H)
locked      II (variational)   different            same             (1, B, H)
structured  III (the paper)    same                 different        (T, 1, H)
fixed       IV                 same                 same             (1, 1, H)
none        no dropout         -                    -                (1, 1, H) of ones
==========  =================  ===================  ===============  ==============================

Masks are inverted-dropout masks: kept entries hold the scale, so ``E[mask] = 1``. Cases I, II and IV
keep each neuron with probability ``1 - p`` and scale by ``1 / (1 - p)``. Case III keeps exactly
``k = round((1 - p) H)`` neurons per time step, a uniformly random subset, scaled by ``H / k``: every
step's compacted GEMM then has the same width, so a whole sequence runs as one batched GEMM (the
paper does not say how many neurons a step keeps; a fixed count is our choice). :func:`kept_indices`
returns those neurons.
"""

from __future__ import annotations

import torch

MODES = ("none", "standard", "locked", "structured", "fixed")


def kept_count(hidden: int, p: float) -> int:
    """Neurons a structured mask keeps per step: ``round((1 - p) H)``, at least one."""
    return max(1, round((1.0 - p) * hidden))


def kept_indices(steps: int, hidden: int, p: float, generator: torch.Generator) -> torch.Tensor:
    """(steps, k) sorted indices of the neurons a structured mask keeps at each step."""
    k = kept_count(hidden, p)
    scores = torch.rand(steps, hidden, generator=generator)
    return scores.topk(k, dim=1).indices.sort(dim=1).values


def mask_from_indices(indices: torch.Tensor, hidden: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The (T, 1, H) structured mask, scaled by ``H / k``, that :func:`kept_indices` describes."""
    steps, k = indices.shape
    mask = torch.zeros(steps, hidden, dtype=dtype).scatter_(1, indices, hidden / k)
    return mask[:, None, :]


def dropout_mask(mode: str, steps: int, batch: int, hidden: int, p: float, generator: torch.Generator,
                 dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An inverted-dropout mask of ``mode`` (see the module docstring), broadcastable to (steps, batch, hidden)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p}")
    if mode == "none" or p == 0.0:
        return torch.ones(1, 1, hidden, dtype=dtype)
    if mode == "structured":
        return mask_from_indices(kept_indices(steps, hidden, p, generator), hidden, dtype)
    shape = {"standard": (steps, batch, hidden), "locked": (1, batch, hidden), "fixed": (1, 1, hidden)}[mode]
    return (torch.rand(shape, generator=generator) >= p).to(dtype) / (1.0 - p)
