"""The AWS GPU instances the paper characterises, their prices, and the time dilation that lets a CPU stand in.

Catalogue: the intra-machine interconnect and the network (named links of :mod:`.links`) of each instance of
:data:`mlsysrepro.core.cloud.INSTANCE_TYPES`, which holds its GPUs and the on-demand price the authors' analysis
uses; spot prices are the median of the registry's AWS spot-price history (:func:`mlsysrepro.core.cloud.spot_prices`).

**Time dilation.** Our workers are CPU processes, far slower than the GPUs they stand for. If the links kept their
real speed, communication would look negligible. So each emulated cluster runs *dilated*: with
``dilation = t_cpu / t_gpu`` for the model being trained (``t_gpu`` = its training FLOPs over the GPU's peak
FLOP/s times ``gpu_efficiency``), every link time is multiplied by ``dilation``, which keeps the instance's
communication-to-compute ratio; measured per-iteration times are divided by it to give instance seconds.
(Time-dilated emulation: Gupta et al., "To Infinity and Beyond: Time-Warped Network Emulation", NSDI 2006.)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.cloud import GPU_PEAK_FLOPS, instance_type, spot_prices
from .emulation import EmulatedCluster


@dataclass(frozen=True)
class Instance:
    """An instance of :data:`mlsysrepro.core.cloud.INSTANCE_TYPES` with the links the emulation charges."""

    name: str
    intra: str | None  # GPU-to-GPU link inside the instance
    network: str  # instance-to-instance link

    @property
    def gpu(self) -> str:
        return instance_type(self.name).gpu

    @property
    def gpus(self) -> int:
        return instance_type(self.name).gpus

    @property
    def on_demand(self) -> float:
        """$ per hour."""
        return instance_type(self.name).on_demand


INSTANCES = {i.name: i for i in (
    Instance("p2.xlarge", None, "net10"),
    Instance("p2.8xlarge", "pcie3", "net10"),
    Instance("p2.16xlarge", "pcie3", "net25"),
    Instance("p3.2xlarge", None, "net10"),
    Instance("p3.8xlarge", "nvlink2", "net10"),
    Instance("p3.16xlarge", "nvlink2", "net25"),
)}


@dataclass(frozen=True)
class Configuration:
    """``machines`` instances of one type joined by the instance's network (the paper's 2 x 8xlarge pairs)."""

    instance: str
    machines: int = 1

    def __post_init__(self):
        if self.instance not in INSTANCES:
            raise ValueError(f"instance must be one of {sorted(INSTANCES)}, got {self.instance!r}")
        if self.machines < 1:
            raise ValueError(f"machines must be >= 1, got {self.machines}")

    @property
    def name(self) -> str:
        return self.instance if self.machines == 1 else f"{self.machines}x{self.instance}"

    @property
    def spec(self) -> Instance:
        return INSTANCES[self.instance]

    @property
    def gpus(self) -> int:
        return self.machines * self.spec.gpus

    def price(self, spot: bool = False) -> float:
        """$ per hour for all machines."""
        return self.machines * (spot_prices()[self.instance] if spot else self.spec.on_demand)

    def cluster(self, dilation: float) -> EmulatedCluster:
        s = self.spec
        return EmulatedCluster(self.machines, s.gpus, s.intra, s.network if self.machines > 1 else None, dilation)


def parse_configuration(name: str) -> Configuration:
    """``"p3.16xlarge"`` or ``"2xp3.8xlarge"``."""
    count, _, instance = name.partition("x") if name[:1].isdigit() else ("1", "", name)
    return Configuration(instance, int(count))


def dilation(cpu_seconds: float, flops: float, gpu: str, gpu_efficiency: float) -> float:
    """How many times slower this CPU worker computes an iteration than ``gpu`` would (module docstring)."""
    if gpu not in GPU_PEAK_FLOPS:
        raise ValueError(f"gpu must be one of {sorted(GPU_PEAK_FLOPS)}, got {gpu!r}")
    if not 0 < gpu_efficiency <= 1:
        raise ValueError(f"gpu_efficiency must be in (0, 1], got {gpu_efficiency}")
    return cpu_seconds / (flops / (GPU_PEAK_FLOPS[gpu] * gpu_efficiency))
