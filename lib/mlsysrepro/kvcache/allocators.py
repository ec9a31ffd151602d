"""Budget allocators: how many entries each (layer, KV head) cache may hold, for one total.

Compression is defined once (:func:`total_budget`): ``1 - sum(kept) / sum(full)`` over all caches, sinks and
windows included, with ``full`` the sequence length; every allocator gets the same total, so methods compare at
matched compression (the accounting that kvpress#228 found inconsistent across methods).

- :func:`uniform`: every cache the same budget (what most eviction methods assume).
- :func:`pyramid`: PyramidKV (Cai et al. 2024): budgets fall linearly with depth, from ``2m - m/beta`` in the
  first layer to ``m/beta`` in the last (``m`` the mean), equal across a layer's heads, capped so that the
  profile stays linear and no layer keeps less than the observation window (as NVIDIA kvpress computes it).
- :func:`adakv`: AdaKV (Feng et al. 2024): uniform totals per layer, pooled across the layer's heads at run time
  with a floor of ``alpha`` times the mean (see :class:`.cache.BudgetedCache`).
- :func:`duo`: a DuoAttention-like split (Xiao et al. 2025): the caches with the highest retrieval score keep the
  full sequence, the others a small streaming budget.
- :func:`baklava`: BaKlaVa (Gulhan et al. 2025): budgets proportional to ``importance ** gamma`` between a floor
  and the full length; ``gamma`` (and the layer factor's exponent, :func:`.profiling.cache_importance`) are
  searched on a calibration split. The paper does not publish its budget family; this one is our choice.
- :func:`reversed_importance`: a control, BaKlaVa's budgets given to the caches in reverse order of importance.

Every allocator returns an :class:`Allocation` whose integer budgets sum exactly to the total.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .cache import BudgetedCache


@dataclass(frozen=True)
class Allocation:
    budgets: torch.Tensor  # (layers, kv_heads), long
    pooled: bool = False  # AdaKV: a layer's budgets are one pool
    floor: int = 0

    def cache(self, policy) -> BudgetedCache:
        return BudgetedCache(self.budgets, policy, pooled=self.pooled, floor=self.floor)


def total_budget(compression: float, caches: int, full: int) -> int:
    """Entries kept over all ``caches`` at ``compression`` when each would hold ``full`` entries."""
    if not 0.0 <= compression < 1.0:
        raise ValueError(f"compression must be in [0, 1), got {compression}")
    return round((1.0 - compression) * caches * full)


def distribute(weights: torch.Tensor, total: int, floor: int, cap: int) -> torch.Tensor:
    """Integers ``b`` with ``floor <= b <= cap``, ``sum(b) == total`` and ``b - floor`` as close to proportional
    to ``weights`` as the bounds allow (water-filling: caches that hit ``cap`` give their share to the rest;
    rounding by largest remainder, ties to the larger weight then the lower index)."""
    w = torch.as_tensor(weights, dtype=torch.float64).flatten()
    n = w.numel()
    if (w < 0).any() or not torch.isfinite(w).all():
        raise ValueError("weights must be finite and >= 0")
    if not 0 <= floor <= cap or not n * floor <= total <= n * cap:
        raise ValueError(f"total ({total}) must lie in [caches * floor, caches * cap] = [{n * floor}, {n * cap}]")
    share = torch.full((n,), float(floor), dtype=torch.float64)
    free = torch.ones(n, dtype=torch.bool)
    while True:
        left = total - share.sum()
        ws = torch.where(free, w, 0.0)
        if left <= 1e-9 or not free.any():
            break
        add = ws / ws.sum() * left if ws.sum() > 0 else free.double() / free.sum() * left
        capped = free & (share + add >= cap)
        if not capped.any():
            share = share + add
            break
        share = torch.where(capped, torch.tensor(float(cap), dtype=torch.float64), share)
        free &= ~capped
    budgets = share.floor().long().clamp(floor, cap)
    remainder = total - int(budgets.sum())
    order = sorted(range(n), key=lambda i: (-(share[i] - budgets[i]).item(), -w[i].item(), i))
    for i in [i for i in order if budgets[i] < cap][:remainder]:
        budgets[i] += 1
    return budgets


def uniform(shape: tuple[int, int], total: int, floor: int, cap: int) -> Allocation:
    return Allocation(distribute(torch.ones(shape), total, floor, cap).view(shape))


def pyramid(shape: tuple[int, int], total: int, floor: int, cap: int, beta: float, window: int) -> Allocation:
    """PyramidKV's layer budgets, as the authors' code and NVIDIA kvpress compute them: linear in depth around the
    mean ``m``, from ``2m - m/beta`` down to ``m/beta``. Where the top would exceed ``cap - window`` it stops there
    and the bottom rises to keep the mean, so the profile stays linear; where the bottom would fall below the
    observation ``window`` (which every layer keeps), every layer gets ``m``, as SnapKV would.

    ``window`` has no default: kvpress' ``PyramidKVPress`` keeps its own observation window (``window_size=64``,
    whatever the scorer), so a caller passes the window of the policy the budgets serve, 0 for one that keeps
    none (StreamingLLM's recent tokens are ranked, not a fixed window)."""
    if window < 0 or beta <= 0:
        raise ValueError(f"window must be >= 0 and beta > 0, got window={window}, beta={beta}")
    layers, heads = shape
    mean = total / (layers * heads)
    low, high = mean / beta, 2 * mean - mean / beta
    if high >= cap - window:
        high, low = cap - window, 2 * mean - (cap - window)
    linear = layers > 1 and cap >= high >= low >= max(window, floor)
    per_layer = torch.linspace(high, low, layers) if linear else torch.full((layers,), mean)
    weights = (per_layer[:, None] - floor).clamp(min=0).expand(shape)
    return Allocation(distribute(weights, total, floor, cap).view(shape))


def adakv(shape: tuple[int, int], total: int, floor: int, cap: int, alpha: float = 0.2) -> Allocation:
    base = distribute(torch.ones(shape), total, floor, cap).view(shape)
    return Allocation(base, pooled=True, floor=max(floor, int(alpha * total / base.numel())))


def duo(shape: tuple[int, int], total: int, floor: int, cap: int, retrieval_score: torch.Tensor) -> Allocation:
    """Full caches for the highest ``retrieval_score`` caches, as many as the total allows; ``floor`` for the
    rest (they stream); the one cache at the boundary takes what is left."""
    order = torch.as_tensor(retrieval_score).flatten().argsort(descending=True, stable=True)
    budgets = torch.full((order.numel(),), floor, dtype=torch.long)
    left = total - floor * order.numel()
    if left < 0 or total > cap * order.numel():
        raise ValueError(f"total ({total}) must lie in [{floor * order.numel()}, {cap * order.numel()}]")
    for i in order.tolist():
        grant = min(cap - floor, left)
        budgets[i] += grant
        left -= grant
    return Allocation(budgets.view(shape))


def baklava(shape: tuple[int, int], total: int, floor: int, cap: int, importance: torch.Tensor,
            gamma: float) -> Allocation:
    """Budgets ∝ ``importance ** gamma`` above the floor (``gamma = 0`` is uniform)."""
    weights = torch.as_tensor(importance, dtype=torch.float64).clamp(min=0) ** gamma
    return Allocation(distribute(weights, total, floor, cap).view(shape))


def reversed_importance(shape: tuple[int, int], total: int, floor: int, cap: int, importance: torch.Tensor,
                        gamma: float) -> Allocation:
    """The control: BaKlaVa's budgets at ``gamma`` handed out in reverse order of importance (the most important
    cache gets the smallest budget). It has BaKlaVa's spread of budgets and none of its information, so a test
    that cannot tell it from BaKlaVa cannot tell whether the profile helps."""
    order = torch.as_tensor(importance).flatten().argsort(stable=True)  # least important first
    sorted_budgets = baklava(shape, total, floor, cap, importance, gamma).budgets.flatten().sort(descending=True)
    budgets = torch.empty_like(sorted_budgets.values)
    budgets[order] = sorted_budgets.values
    return Allocation(budgets.view(shape))


ALLOCATORS = ("uniform", "pyramid", "adakv", "duo", "baklava")
#: Allocators that are controls, not methods: they must lose for a comparison to mean anything.
CONTROLS = ("reversed",)
