"""The VMs a serving system rents: types, capacity per model, the cheapest type per request, per-second billing.

A VM of type ``v`` has ``slots`` GPUs; each slot serves one model at the rate measured for it on one CPU thread
here (a K80 slot) times the GPU's speed relative to a K80 (peak FLOP/s: a V100 slot serves 3.6x as fast). That
mapping is ours: the zoo's latencies are measured on this machine's CPU, and a GPU of the registry's price history
stands for each thread, so prices and spot dynamics are real while capacities are scaled from measurements.

- :func:`vm_types` — the registry's p2/p3 instances with their on-demand price and spot-price series;
- :func:`packed` — the same types shared by up to ``models_per_vm`` models, as Cocktail packs its VMs;
- :func:`cheapest` — MArk's choice (Zhang et al., ATC'19), used by Cocktail: the type with the lowest cost per
  request *served*, ``price / min(capacity, demand still uncovered)``, so a small residual demand gets a small VM;
- :func:`billed` — what a VM costs: per second from launch to release (or revocation), at least ``minimum``
  seconds, spot VMs at the price of each second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.cloud import GPU_PEAK_FLOPS, INSTANCE_TYPES, spot_price_series

#: Each GPU's speed relative to the K80 slot our single-thread measurements stand for.
SLOT_SPEED = {gpu: flops / GPU_PEAK_FLOPS["K80"] for gpu, flops in GPU_PEAK_FLOPS.items()}


@dataclass(frozen=True)
class VMType:
    name: str
    slots: int
    speed: float  # per slot, relative to a K80
    on_demand: float  # $ per hour
    spot: np.ndarray  # $ per hour, per second of the simulation
    share: float = 1.0  # the part of the VM one model holds (1/k when k models share it, :func:`packed`)

    def price(self, spot: bool, second: int) -> float:
        """$ per hour at ``second``."""
        return float(self.spot[min(second, len(self.spot) - 1)]) if spot else self.on_demand


def vm_types(seconds: int, names: tuple[str, ...] | None = None) -> tuple[VMType, ...]:
    """The instance types ``names`` (default: every one of :data:`mlsysrepro.core.cloud.INSTANCE_TYPES`) for a
    simulation of ``seconds`` seconds."""
    names = tuple(INSTANCE_TYPES) if names is None else tuple(names)
    unknown = sorted(set(names) - set(INSTANCE_TYPES))
    if unknown or not names:
        raise ValueError(f"vm types must be a non-empty subset of {sorted(INSTANCE_TYPES)}, got unknown {unknown}")
    return tuple(VMType(n, INSTANCE_TYPES[n].gpus, SLOT_SPEED[INSTANCE_TYPES[n].gpu], INSTANCE_TYPES[n].on_demand,
                        spot_price_series(n, seconds)) for n in names)


def packed(types: tuple[VMType, ...], models_per_vm: int) -> tuple[VMType, ...]:
    """``types`` followed by their shares: for k = 2 .. ``models_per_vm``, a k-th of each type, with a k-th of its
    capacity and of its price (``share`` 1/k). A model served from a share holds one of the k places of a VM whose
    time its k models divide (Cocktail packs models on a VM while the VM's latency stays under the SLO: the
    artifact's ``modules/naiveSchedule.py``, ``instance.add_model_to_instance``, lines 226-243). Renting shares is
    the fluid limit of that bin-packing: every packed VM is full, so it bounds what packing can save from above
    (:data:`mlsysrepro.papers.cocktail.PACKING` declares it as our assumption)."""
    if models_per_vm < 1:
        raise ValueError(f"models_per_vm must be >= 1, got {models_per_vm}")
    shares = [VMType(f"{vm.name} (1/{k})", vm.slots, vm.speed, vm.on_demand / k, vm.spot / k, vm.share / k)
              for k in range(2, models_per_vm + 1) for vm in types]
    return tuple(types) + tuple(shares)


def capacity(vm: VMType, rate_per_slot: float) -> float:
    """Requests per second a VM of type ``vm`` (or its share) serves for a model served at ``rate_per_slot`` on a
    K80 slot."""
    return vm.slots * vm.speed * vm.share * rate_per_slot


def service_time(vm: VMType, service_ms: float) -> float:
    """A batch's service time (ms) on a VM of type ``vm`` for a model whose batch takes ``service_ms`` on a K80 slot:
    faster GPUs serve it sooner, and a share of a VM serves it at its share of the VM's time (processor sharing
    among the packed models)."""
    return service_ms / (vm.speed * vm.share)


def cheapest(types: tuple[VMType, ...], rate_per_slot: float, uncovered: float, spot: bool, second: int,
             allowed: np.ndarray | None = None) -> int:
    """MArk's rule: the index of the type with the lowest price per request served, ``price / min(capacity,
    uncovered)`` (``uncovered``: requests per second still to provision for), among the ``allowed`` types (a mask;
    default: all); ties to the earlier type."""
    if uncovered <= 0:
        raise ValueError(f"uncovered must be > 0 requests per second, got {uncovered}")
    scores = np.array([vm.price(spot, second) / min(capacity(vm, rate_per_slot), uncovered) for vm in types])
    if allowed is not None:
        if not np.any(allowed):
            raise ValueError("allowed must leave at least one VM type")
        scores = np.where(allowed, scores, np.inf)
    return int(np.argmin(scores))


def billed(types: tuple[VMType, ...], kind: np.ndarray, spot: np.ndarray, start: np.ndarray, end: np.ndarray,
           minimum: float = 60.0) -> np.ndarray:
    """$ per VM: per-second billing from ``start`` to ``end`` (seconds; at least ``minimum`` of them), on-demand at the
    type's price, spot at the price of each second (the integral of its series)."""
    kind, spot = np.asarray(kind, dtype=int), np.asarray(spot, dtype=bool)
    start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    if np.any(end < start):
        raise ValueError("every VM must end at or after its start")
    seconds = np.maximum(end - start, minimum)
    cost = np.empty(len(kind))
    for index, vm in enumerate(types):
        mine = kind == index
        cost[mine & ~spot] = seconds[mine & ~spot] * vm.on_demand / 3600
        spotted = mine & spot
        if spotted.any():
            integral = np.concatenate([[0.0], np.cumsum(vm.spot / 3600)])
            last = len(vm.spot)
            def at(t):  # $ from second 0 to t, the last price held beyond the series
                t = np.asarray(t, dtype=float)
                whole = np.minimum(np.floor(t), last).astype(int)
                inside = integral[whole] + (np.minimum(t, last) - whole) * vm.spot[np.minimum(whole, last - 1)] / 3600
                return inside + np.maximum(t - last, 0) * vm.spot[-1] / 3600
            begin = start[spotted]
            cost[spotted] = at(begin + seconds[spotted]) - at(begin)
    return cost
