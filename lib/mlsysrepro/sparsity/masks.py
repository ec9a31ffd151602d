"""Dropout masks over (time, batch, hidden): the four cases of Fig. 1 of Sarma et al. (NeurIPS 2021).

A mask is either the same or different across the batch, and the same or different across time steps:

==========  ==================  ===================  ===============  ==============================
mode        case                across the batch     across time      shape drawn (broadcast to T,B,H)
==========  ==================  ===================  ===============  ==============================
standard    I (Zaremba et al.)  different            different        (T, B, H)
locked      II (variational)    different            same             (1, B, H)
structured  III (the paper)     same                 different        (T, 1, H)
fixed       IV                  same                 same             (1, 1, H)
none        no dropout          -                    -                (1, 1, H) of ones
==========  ==================  ===================  ===============  ==============================

Masks are inverted-dropout masks: kept entries hold the scale, so ``E[mask] = 1``. Cases I and II keep
each neuron with probability ``1 - p`` and scale by ``1 / (1 - p)``. The batch-shared cases III and IV
keep exactly ``k = round((1 - p) H)`` neurons, a uniformly random subset, scaled by ``H / k``, so that
every compacted GEMM has the same width (the paper does not say how many neurons a step keeps; a fixed
count is our choice). :func:`kept_indices` returns those neurons.

``period`` (ours, not the paper's) re-draws a structured mask every ``period`` steps instead of every
step: ``period = 1`` is case III, a period as long as the sequence is case IV. Steps that share a mask
share one compacted GEMM, which is what a CPU needs to profit from compaction (see :mod:`.compaction`).
"""

from __future__ import annotations

import torch

MODES = ("none", "standard", "locked", "structured", "fixed")


def kept_count(hidden: int, p: float) -> int:
    """Neurons a batch-shared mask keeps: ``round((1 - p) H)``, at least one."""
    return max(1, round((1.0 - p) * hidden))


def kept_indices(steps: int, hidden: int, p: float, generator: torch.Generator, period: int = 1) -> torch.Tensor:
    """(ceil(steps / period), k) sorted indices of the neurons a structured mask keeps, one row per draw."""
    k = kept_count(hidden, p)
    scores = torch.rand(-(-steps // period), hidden, generator=generator)
    return scores.topk(k, dim=1).indices.sort(dim=1).values


def mask_from_indices(indices: torch.Tensor, hidden: int, dtype: torch.dtype = torch.float32, period: int = 1,
                      steps: int | None = None) -> torch.Tensor:
    """The (T, 1, H) batch-shared mask, scaled by ``H / k``, that :func:`kept_indices` describes."""
    draws, k = indices.shape
    mask = torch.zeros(draws, hidden, dtype=dtype, device=indices.device).scatter_(1, indices, hidden / k)
    mask = mask.repeat_interleave(period, dim=0)[: draws * period if steps is None else steps]
    return mask[:, None, :]


def check(mode: str, p: float, period: int = 1) -> None:
    """Raise a ValueError naming the parameter and its allowed values."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p}")
    if not isinstance(period, int) or period < 1:
        raise ValueError(f"period must be a positive integer (1 is the paper's case III), got {period!r}")


def draw_period(mode: str, steps: int, period: int) -> int:
    """Steps that share one draw of a batch-shared mask: ``period`` for structured, all of them for fixed."""
    return steps if mode == "fixed" else min(period, steps)


def dropout_mask(mode: str, steps: int, batch: int, hidden: int, p: float, generator: torch.Generator,
                 dtype: torch.dtype = torch.float32, period: int = 1) -> torch.Tensor:
    """An inverted-dropout mask of ``mode`` (see the module docstring), broadcastable to (steps, batch, hidden)."""
    check(mode, p, period)
    if mode == "none" or p == 0.0:
        return torch.ones(1, 1, hidden, dtype=dtype)
    if mode in ("structured", "fixed"):
        period = draw_period(mode, steps, period)
        return mask_from_indices(kept_indices(steps, hidden, p, generator, period), hidden, dtype, period, steps)
    shape = {"standard": (steps, batch, hidden), "locked": (1, batch, hidden)}[mode]
    return (torch.rand(shape, generator=generator) >= p).to(dtype) / (1.0 - p)
