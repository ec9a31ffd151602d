"""Pruning schedules at matched FLOPs: how many vision tokens each method keeps, and where, to save a target share
of the prefill's FLOPs (:mod:`mlsysrepro.transformer.flops`).

A method that prunes later saves less per token dropped, so at the same saving FastV (after layer 1 of 4) keeps
fewer tokens than a pruner acting before prefill. Every count is solved on the same sequence shape, ``n_vision``
image tokens and ``n_text`` text tokens (a notebook passes its questions' mean length), and the scorer's own cost
is part of the pruned side. A target a method cannot reach where it prunes raises :class:`Unreachable`.

- :func:`single_stage`: one stage at a layer (FastV, SparseVLM at layer >= 1; pooling, VisionZip, AsymVLM at 0);
- :func:`pyramid`: PyramidDrop's stages, each keeping the same ratio of the one before;
- :func:`fit_counts`: FitPrune-like, the per-layer counts that lose the least attention mass on calibration data;
- :func:`adaptive_top_p`: AsymVLM's adaptive budget, its mass ``top_p`` set so the mean saving is the target.
"""

from __future__ import annotations

import itertools

import torch

from ..transformer.flops import saving
from ..transformer.llama import LlamaConfig
from .pruning import AdaptiveBudget


class Unreachable(ValueError):
    """A method cannot save the target share of FLOPs where it prunes (a late pruning point saves less)."""


def stage_lengths(cfg: LlamaConfig, stages: dict[int, int], n_vision: int, n_text: int) -> torch.Tensor:
    """(layers,) the tokens each layer runs on under ``stages`` (layer -> vision tokens kept from it on)."""
    lengths, current = [], n_vision
    for layer in range(cfg.layers):
        current = min(current, stages.get(layer, current))
        lengths.append(current + n_text)
    return torch.tensor(lengths)


def stage_saving(cfg: LlamaConfig, stages: dict[int, int], n_vision: int, n_text: int, extra: float = 0.0) -> float:
    return float(saving(cfg, stage_lengths(cfg, stages, n_vision, n_text), n_vision + n_text, extra))


def single_stage(cfg: LlamaConfig, layer: int, target: float, n_vision: int, n_text: int, extra: float = 0.0
                 ) -> int:
    """The most vision tokens kept from ``layer`` on whose saving still reaches ``target`` (at least 1 token); a
    ValueError when even 1 token does not save that much at this layer (:class:`Unreachable`)."""
    if not 0 <= layer < cfg.layers:
        raise ValueError(f"layer must be in [0, {cfg.layers - 1}], got {layer}")
    counts = torch.arange(1, n_vision + 1)
    ok = [c for c in counts.tolist() if stage_saving(cfg, {layer: c}, n_vision, n_text, extra) >= target]
    if not ok:
        raise Unreachable(f"pruning at layer {layer} saves at most "
                          f"{stage_saving(cfg, {layer: 1}, n_vision, n_text, extra):.0%}, not {target:.0%}")
    return max(ok)


def pyramid(cfg: LlamaConfig, layers: tuple[int, ...], target: float, n_vision: int, n_text: int
            ) -> dict[int, int]:
    """PyramidDrop: at each of ``layers`` keep ``ratio`` of the tokens kept before (rounded), the ``ratio`` found
    by bisection so the saving reaches ``target``."""
    def counts(ratio: float) -> dict[int, int]:
        return {layer: max(1, round(n_vision * ratio ** (j + 1))) for j, layer in enumerate(layers)}

    if stage_saving(cfg, counts(0.0), n_vision, n_text) < target:
        raise Unreachable(f"stages at layers {layers} save at most "
                          f"{stage_saving(cfg, counts(0.0), n_vision, n_text):.0%}, not {target:.0%}")
    low, high = 0.0, 1.0
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if stage_saving(cfg, counts(mid), n_vision, n_text) >= target else (low, mid)
    return counts(low)


def fit_counts(cfg: LlamaConfig, layers: tuple[int, ...], target: float, n_vision: int, n_text: int,
               retained: torch.Tensor) -> dict[int, int]:
    """FitPrune-like: non-increasing counts at ``layers`` whose saving reaches ``target`` and that lose the least
    attention: ``retained[j, c]`` is the mean share of the text-to-vision attention at the input of ``layers[j]``
    that its ``c`` best tokens hold on calibration data (c = 0..n_vision). Exhaustive over counts on a grid of
    ``n_vision // 16`` tokens (and 1)."""
    if retained.shape != (len(layers), n_vision + 1):
        raise ValueError(f"retained must be (len(layers), n_vision + 1) = ({len(layers)}, {n_vision + 1}), "
                         f"got {tuple(retained.shape)}")
    step = max(1, n_vision // 16)
    grid = sorted({1, *range(step, n_vision + 1, step)})
    best, best_loss = None, float("inf")
    for combo in itertools.combinations_with_replacement(sorted(grid, reverse=True), len(layers)):
        stages = dict(zip(layers, combo))  # combinations of a decreasing grid are non-increasing
        if stage_saving(cfg, stages, n_vision, n_text) < target:
            continue
        loss = sum(float(1 - retained[j, c]) for j, c in enumerate(combo))
        if loss < best_loss:
            best, best_loss = stages, loss
    if best is None:
        raise Unreachable(f"no counts at layers {layers} save {target:.0%}")
    return best


def retained_mass(attention: torch.Tensor) -> torch.Tensor:
    """(n_vision + 1,) the mean share of attention (B, N) that the c most-attended tokens hold, c = 0..N."""
    share = attention / attention.sum(-1, keepdim=True)
    held = share.sort(-1, descending=True).values.cumsum(-1).mean(0)
    return torch.cat((held.new_zeros(1), held))


def adaptive_top_p(scores: torch.Tensor, mean_count: float, k_min: int, k_max: int) -> AdaptiveBudget:
    """The :class:`.pruning.AdaptiveBudget` whose mean count over calibration ``scores`` (B, N) is closest to
    ``mean_count`` (bisection on ``top_p``; the count grows with it)."""
    low, high = 1e-6, 1.0
    for _ in range(40):
        mid = (low + high) / 2
        mean = AdaptiveBudget(mid, k_min, k_max).counts(scores).float().mean()
        low, high = (mid, high) if mean <= mean_count else (low, mid)
    candidates = [AdaptiveBudget(p, k_min, k_max) for p in (low, high)]
    return min(candidates, key=lambda b: abs(float(b.counts(scores).float().mean()) - mean_count))
