"""Named interconnect and network profiles and the hierarchical all-reduce time they imply (alpha-beta model).

A link is ``alpha`` seconds per message plus ``bytes / beta``. All-reduce of ``B`` bytes over ``M`` machines of
``G`` workers each is modelled the way NCCL's hierarchical rings run it, one ring per level
(:func:`mlsysrepro.core.allreduce.ring_allreduce_seconds`): a ring inside each machine (``2(G-1)`` steps of
``B/G`` bytes), then a ring across machines whose NIC carries the whole buffer (``2(M-1)`` steps of ``B/M`` bytes):

    T(B) = 2(G-1) * alpha_intra + 2(G-1)/G * B / beta_intra  +  2(M-1) * alpha_net + 2(M-1)/M * B / beta_net

``dilation`` stretches every time by one factor: the emulated cluster runs ``dilation`` times slower than the real
one, so that a CPU worker's compute can stand for a GPU's (see :mod:`.instances`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.allreduce import ring_allreduce_seconds


@dataclass(frozen=True)
class Link:
    name: str
    alpha: float  # seconds per message
    beta: float  # bytes per second
    source: str

    def seconds(self, nbytes: float) -> float:
        return self.alpha + nbytes / self.beta


GB = 1e9
#: Intra-machine interconnects (GPU to GPU inside one instance) and networks (instance to instance).
LINKS = {
    "pcie3": Link("pcie3", 10e-6, 15.75 * GB / 1.25,
                  "PCIe 3.0 x16: 15.75 GB/s per direction (PCI-SIG); 80 % protocol efficiency; the K80s of p2 "
                  "instances talk over PCIe switches"),
    "nvlink2": Link("nvlink2", 5e-6, 150 * GB,
                    "NVLink 2.0: 6 links x 25 GB/s per direction per V100 (NVIDIA Tesla V100 white paper, 2017); "
                    "p3.8xlarge and p3.16xlarge"),
    "net10": Link("net10", 30e-6, 10e9 / 8, "10 Gb/s Ethernet, 30 us per message (p2.8xlarge, p3.8xlarge, AWS)"),
    "net25": Link("net25", 30e-6, 25e9 / 8, "25 Gb/s Ethernet, 30 us per message (p2.16xlarge, p3.16xlarge, AWS)"),
    "net100": Link("net100", 15e-6, 100e9 / 8, "100 Gb/s (p3dn.24xlarge with EFA, AWS), 15 us per message"),
}


def link(name: str | Link | None) -> Link | None:
    """The named profile (a :class:`Link` passes through; None: no link)."""
    if name is None or isinstance(name, Link):
        return name
    if name not in LINKS:
        raise ValueError(f"link must be one of {sorted(LINKS)} or None, got {name!r}")
    return LINKS[name]


def allreduce_seconds(nbytes: float, machines: int, workers_per_machine: int, intra: str | Link | None,
                      network: str | Link | None, dilation: float = 1.0) -> float:
    """Modelled time of one all-reduce of ``nbytes`` (the module docstring's T(B)), times ``dilation``."""
    if machines < 1 or workers_per_machine < 1:
        raise ValueError(f"machines and workers_per_machine must be >= 1, got {machines} and {workers_per_machine}")
    total = 0.0
    for ring, name, what in ((workers_per_machine, intra, "workers per machine need an intra-machine link"),
                             (machines, network, "machines need a network link")):
        if ring > 1:
            lk = link(name)
            if lk is None:
                raise ValueError(f"{ring} {what}; choose one of {sorted(LINKS)}")
            total += ring_allreduce_seconds(nbytes, ring, lk.beta, lk.alpha)
    return total * dilation
