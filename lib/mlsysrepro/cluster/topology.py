"""A GPU cluster as a tree (racks -> machines -> GPUs) and the cost of an all-reduce across a job's GPUs.

Dally (Sharma, Bhasi et al., arXiv 2401.16492) schedules by how far a job's GPUs are spread: all in one
machine, in one rack, or across racks. Each level has its own link, and the cross-rack network can be
congested (``contention`` divides its bandwidth). GPU ``g`` sits in machine ``g // gpus_per_machine``
and rack ``g // (gpus_per_machine * machines_per_rack)``.

The all-reduce is a hierarchical ring (the issue's cost model, standing in for the authors' ASTRA-sim):
one ring per level the placement spans, among the participants at that level,

    t = sum over levels of  2 (p - 1) / p * bytes / bandwidth  +  2 (p - 1) * latency

with ``p`` the GPUs of the job in its fullest machine (level 0), the job's machines in its fullest rack
(level 1) and the job's racks (level 2). Every level moves the whole gradient; a level with one
participant costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.allreduce import ring_allreduce_seconds

#: The topology levels, from the tightest placement to the widest.
LEVELS = ("machine", "rack", "network")


@dataclass(frozen=True)
class Link:
    """One level's link: ``bandwidth`` in bytes per second, ``latency`` in seconds per ring step."""

    bandwidth: float
    latency: float


#: Default links (our assumption, not the paper's): NVLink-class inside a machine (100 GB/s), a 25 Gb/s
#: rack switch, a 10 Gb/s cross-rack network.
DEFAULT_LINKS = (Link(100e9, 5e-6), Link(25e9 / 8, 10e-6), Link(10e9 / 8, 50e-6))


@dataclass(frozen=True)
class Topology:
    racks: int
    machines_per_rack: int
    gpus_per_machine: int
    links: tuple[Link, Link, Link] = DEFAULT_LINKS
    contention: float = 1.0

    def __post_init__(self):
        for name in ("racks", "machines_per_rack", "gpus_per_machine"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.contention < 1.0:
            raise ValueError(f"contention must be >= 1 (1 means an idle network), got {self.contention}")

    @property
    def gpus(self) -> int:
        return self.racks * self.machines_per_rack * self.gpus_per_machine

    @property
    def gpus_per_rack(self) -> int:
        return self.machines_per_rack * self.gpus_per_machine

    def machine_of(self, gpus) -> np.ndarray:
        return np.asarray(gpus) // self.gpus_per_machine

    def rack_of(self, gpus) -> np.ndarray:
        return np.asarray(gpus) // self.gpus_per_rack

    def level(self, gpus) -> int:
        """0 if the GPUs share a machine, 1 if they share a rack, 2 otherwise (see :data:`LEVELS`)."""
        gpus = self._checked(gpus)
        if gpus.min() // self.gpus_per_machine == gpus.max() // self.gpus_per_machine:
            return 0
        return 1 if gpus.min() // self.gpus_per_rack == gpus.max() // self.gpus_per_rack else 2

    def participants(self, gpus) -> tuple[int, int, int]:
        """Ring sizes per level: GPUs in the fullest machine, machines in the fullest rack, racks."""
        gpus = self._checked(gpus)
        machines = self.machine_of(gpus)
        per_machine = np.unique(machines, return_counts=True)[1].max()
        used = np.unique(machines)
        per_rack = np.unique(used // self.machines_per_rack, return_counts=True)[1].max()
        return int(per_machine), int(per_rack), int(np.unique(self.rack_of(gpus)).size)

    def allreduce_seconds(self, nbytes: float, gpus) -> float:
        """Time of one all-reduce of ``nbytes`` over ``gpus`` (module docstring)."""
        total = 0.0
        for level, (p, link) in enumerate(zip(self.participants(gpus), self.links)):
            bandwidth = link.bandwidth / (self.contention if level == 2 else 1.0)
            total += ring_allreduce_seconds(nbytes, p, bandwidth, link.latency)
        return total

    def _checked(self, gpus) -> np.ndarray:
        gpus = np.asarray(gpus, dtype=np.int64)
        if gpus.size == 0:
            raise ValueError("a placement needs at least one GPU")
        if gpus.min() < 0 or gpus.max() >= self.gpus:
            raise ValueError(f"GPU ids must be in [0, {self.gpus}), got {gpus.min()}..{gpus.max()}")
        if np.unique(gpus).size != gpus.size:
            raise ValueError("a placement lists a GPU twice")
        return gpus
