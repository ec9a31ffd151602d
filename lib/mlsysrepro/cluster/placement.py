"""Placement policies: which free GPUs a job gets, or whether it waits (Dally's delay scheduling, Sec. 4.1).

The searches work on one array, the free GPUs per machine, so a placement costs O(machines) numpy work:

- :func:`in_one_machine` — best fit: the machine with the fewest free GPUs that still holds the job;
- :func:`in_one_rack` — the rack with the fewest free GPUs that holds it, filled from its emptiest machines
  first (so the job spans as few machines as possible);
- :func:`anywhere` — racks and machines with the most free GPUs first.

A placement policy is anything with the three calls of :class:`Placement`, the contract the simulator relies on.
Two implement it: :class:`Consolidating` takes the tightest placement free now (the consolidation-based
baselines), :class:`DelayScheduling` waits for a tighter one up to its timers (Dally).
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from typing import Protocol, runtime_checkable

import numpy as np

from .topology import Topology


class FreeGPUs:
    """Owner of every GPU (-1: free) and the free count per machine."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.owner = np.full(topology.gpus, -1, dtype=np.int64)
        self.per_machine = np.full(topology.racks * topology.machines_per_rack, topology.gpus_per_machine)
        self.total = topology.gpus

    def _per_machine(self, gpus: np.ndarray) -> np.ndarray:
        return np.bincount(gpus // self.topology.gpus_per_machine, minlength=len(self.per_machine))

    def take(self, job: int, gpus: np.ndarray) -> None:
        if (self.owner[gpus] != -1).any():
            raise RuntimeError(f"job {job} was placed on GPUs another job holds")
        self.owner[gpus] = job
        self.per_machine -= self._per_machine(gpus)
        self.total -= len(gpus)

    def release(self, job: int, gpus: np.ndarray) -> None:
        if (self.owner[gpus] != job).any():
            raise RuntimeError(f"job {job} released GPUs it does not hold")
        self.owner[gpus] = -1
        self.per_machine += self._per_machine(gpus)
        self.total += len(gpus)

    def all_free(self, gpus: np.ndarray) -> bool:
        return bool(np.all(self.owner[gpus] == -1))

    def _from_machines(self, machines: np.ndarray, demand: int) -> np.ndarray:
        """The first ``demand`` free GPUs of ``machines``, taken machine by machine in the given order."""
        gpm = self.topology.gpus_per_machine
        slots = (machines[:, None] * gpm + np.arange(gpm)).ravel()
        return slots[self.owner[slots] == -1][:demand]


def in_one_machine(free: FreeGPUs, demand: int) -> np.ndarray | None:
    fits = np.flatnonzero(free.per_machine >= demand)
    if fits.size == 0:
        return None
    best = fits[np.argmin(free.per_machine[fits])]
    return free._from_machines(np.array([best]), demand)


def in_one_rack(free: FreeGPUs, demand: int) -> np.ndarray | None:
    per_rack = free.per_machine.reshape(free.topology.racks, -1)
    rack_free = per_rack.sum(axis=1)
    fits = np.flatnonzero(rack_free >= demand)
    if fits.size == 0:
        return None
    rack = fits[np.argmin(rack_free[fits])]
    order = np.argsort(-per_rack[rack], kind="stable") + rack * free.topology.machines_per_rack
    return free._from_machines(order, demand)


def anywhere(free: FreeGPUs, demand: int) -> np.ndarray | None:
    if free.total < demand:
        return None
    mpr = free.topology.machines_per_rack
    rack_free = free.per_machine.reshape(free.topology.racks, -1).sum(axis=1)
    order = np.lexsort((-free.per_machine, -np.repeat(rack_free, mpr)))
    return free._from_machines(order, demand)


def tightest(free: FreeGPUs, demand: int) -> tuple[np.ndarray | None, int]:
    """The tightest placement free now and its level (0 machine, 1 rack, 2 network); ``(None, -1)`` if none."""
    topo = free.topology
    if demand <= topo.gpus_per_machine and (gpus := in_one_machine(free, demand)) is not None:
        return gpus, 0
    if demand <= topo.gpus_per_rack and (gpus := in_one_rack(free, demand)) is not None:
        return gpus, 1
    gpus = anywhere(free, demand)
    return (gpus, 2) if gpus is not None else (None, -1)


@runtime_checkable
class Placement(Protocol):
    """What the simulator calls on a placement policy (:mod:`.simulator`)."""

    name: str

    def start(self, topology: Topology, lease: float) -> None:
        """Reset per-run state for a run on ``topology`` with leases of ``lease`` seconds."""

    def place(self, job: int, demand: int, waited: float, free: FreeGPUs,
              now: float) -> tuple[np.ndarray | None, float | None]:
        """``(gpus, None)`` to start ``job`` on ``gpus`` (``demand`` of them, taken from ``free``), ``(None, t)``
        to wait and be asked again at ``t``, or ``(None, None)`` to wait for the next event. ``waited`` is how long
        the job has waited, in seconds."""

    def tuned_timers(self, demands: list[int], now: float) -> dict[int, tuple[int, int]]:
        """The timers (rack, network; in leases) an auto-tuner would set now for each GPU demand, reported at the
        end of a run; empty for a placement without tuned timers."""


class Consolidating:
    """Take the tightest placement free now; never wait while enough GPUs are free (the consolidation baselines)."""

    name = "tightest free"

    def start(self, topology: Topology, lease: float) -> None:
        pass

    def place(self, job: int, demand: int, waited: float, free: FreeGPUs, now: float):
        gpus, _ = tightest(free, demand)
        return gpus, None

    def tuned_timers(self, demands: list[int], now: float) -> dict[int, tuple[int, int]]:
        return {}


def tuned_wait(waits, floor: int, cap: int) -> int:
    """One auto-tuned timer (in leases): ``min(cap, max(floor, ceil(mu + 2 sigma)))`` over the recorded waits of at
    least one lease (population sigma); with none recorded the statistic is 1, as in the authors' code."""
    kept = np.asarray([w for w in waits if w >= 1.0], dtype=float)
    statistic = math.ceil(kept.mean() + 2 * kept.std()) if kept.size else 1
    return min(cap, max(floor, statistic))


class DelayTimerTuner:
    """Dally's auto-tuner (Sec. 4.3): per GPU demand, the waits (in leases) of the jobs that got a machine-level and a
    rack-level placement within the last ``history`` leases set the two timers:

        rackDelayWait = min(ceil(0.8 H), max(6,  ceil(mu + 2 sigma) of machine-level waits))
        nwDelayWait   = min(H,           max(12, ceil(mu + 2 sigma) of rack-level waits))
    """

    RACK_FLOOR, NETWORK_FLOOR = 6, 12  # leases: the least each timer is set to

    def __init__(self, history: int):
        if history < 1:
            raise ValueError(f"history must be >= 1 lease, got {history}")
        self.history = history
        self.waits = {0: defaultdict(deque), 1: defaultdict(deque)}  # level -> demand -> (time, wait)
        self._known: dict[tuple[int, float], tuple[int, int]] = {}  # (demand, now) -> timers, until a record

    def record(self, level: int, demand: int, now: float, wait: float) -> None:
        if level in self.waits:
            self.waits[level][demand].append((now, wait))
            self._known.clear()

    def _recent(self, level: int, demand: int, now: float, lease: float) -> list[float]:
        entries = self.waits[level][demand]
        while entries and entries[0][0] < now - self.history * lease:
            entries.popleft()
        return [wait for _, wait in entries]

    def bounds(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The (lowest, highest) rack timer and network timer the tuner can set, in leases: its floors and caps
        (a cap below its floor wins, as in ``min(cap, max(floor, .))``, and is then the only value)."""
        rack_cap, network_cap = math.ceil(0.8 * self.history), self.history
        return (min(self.RACK_FLOOR, rack_cap), rack_cap), (min(self.NETWORK_FLOOR, network_cap), network_cap)

    def timers(self, demand: int, now: float, lease: float) -> tuple[int, int]:
        """The two timers for ``demand`` at ``now``; computed once per (demand, instant) until a wait is recorded."""
        if (demand, now) not in self._known:
            if self._known and next(iter(self._known))[1] != now:
                self._known.clear()
            (rack_floor, rack_cap), (network_floor, network_cap) = self.bounds()
            rack = tuned_wait(self._recent(0, demand, now, lease), rack_floor, rack_cap)
            network = tuned_wait(self._recent(1, demand, now, lease), network_floor, network_cap)
            self._known[demand, now] = rack, network
        return self._known[demand, now]


class DelayScheduling:
    """Dally's delay scheduling (Sec. 4.1): a job takes a machine-level placement when one is free; a rack-level one
    only after waiting ``rack_wait`` leases, a cross-rack one only after ``network_wait`` leases. A job larger than a
    machine (a rack) skips the first (both) waits. ``None`` timers are auto-tuned (:class:`DelayTimerTuner`)."""

    def __init__(self, rack_wait: float | None = None, network_wait: float | None = None, history: int = 20):
        if (rack_wait is None) != (network_wait is None):
            raise ValueError("rack_wait and network_wait must both be given (fixed timers) "
                             "or both be None (auto-tuned)")
        self.fixed = None if rack_wait is None else (rack_wait, network_wait)
        self.history = history
        self.name = "delay (auto-tuned)" if self.fixed is None else f"delay ({rack_wait:g}, {network_wait:g})"

    def start(self, topology: Topology, lease: float) -> None:
        self.topology, self.lease = topology, lease
        self.tuner = DelayTimerTuner(self.history)

    def tuned_timers(self, demands: list[int], now: float) -> dict[int, tuple[int, int]]:
        """The auto-tuner's timers per demand now; empty with fixed timers."""
        if self.fixed is not None:
            return {}
        return {d: self.tuner.timers(d, now, self.lease) for d in demands}

    def place(self, job: int, demand: int, waited: float, free: FreeGPUs, now: float):
        """GPUs, or ``(None, t)``: wait, and try again at ``t`` when the next timer expires."""
        topo, lease = self.topology, self.lease
        leases = waited / lease + 1e-9  # a wake-up lands exactly on the timer, up to rounding
        rack_wait, network_wait = self.fixed or self.tuner.timers(demand, now, lease)
        if demand <= topo.gpus_per_machine and (gpus := in_one_machine(free, demand)) is not None:
            self.tuner.record(0, demand, now, leases)
            return gpus, None
        rack_allowed = demand > topo.gpus_per_machine or leases >= rack_wait
        network_allowed = demand > topo.gpus_per_rack or leases >= network_wait
        if rack_allowed and demand <= topo.gpus_per_rack and (gpus := in_one_rack(free, demand)) is not None:
            self.tuner.record(1, demand, now, leases)
            return gpus, None
        if network_allowed:
            return anywhere(free, demand), None
        pending = [w for w, allowed in ((rack_wait, rack_allowed), (network_wait, network_allowed)) if not allowed]
        return None, now - waited + min(pending) * lease
