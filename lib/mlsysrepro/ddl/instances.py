"""The AWS GPU instances the paper characterises, their prices, and the time dilation that lets a CPU stand in.

Catalogue: GPUs per instance, the intra-machine interconnect and the network (named links of :mod:`.links`), and
the on-demand price the authors' analysis uses (DS-Analyzer fork, ``tool/analyze.py``; recorded in the registry's
``cloud_gpu_spot_prices_2020/SOURCE.md``). Spot prices are the median of the registry's AWS spot-price history
(us-east-1 and us-west-2, February-March 2020).

**Time dilation.** Our workers are CPU processes, far slower than the GPUs they stand for. If the links kept their
real speed, communication would look negligible. So each emulated cluster runs *dilated*: with
``dilation = t_cpu / t_gpu`` for the model being trained (``t_gpu`` = its training FLOPs over the GPU's peak
FLOP/s times ``gpu_efficiency``), every link time is multiplied by ``dilation``, which keeps the instance's
communication-to-compute ratio; measured per-iteration times are divided by it to give instance seconds.
(Time-dilated emulation: Gupta et al., "To Infinity and Beyond: Time-Warped Network Emulation", NSDI 2006.)
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from functools import lru_cache

from ..core.data import fetch
from .emulation import EmulatedCluster

#: Peak fp32 FLOP/s per GPU: V100 SXM2 15.7 TFLOP/s (NVIDIA V100 datasheet); K80 4.37 TFLOP/s per GK210 die,
#: which is what one p2 "GPU" is (8.73 TFLOP/s per two-die board at boost clocks, NVIDIA K80 datasheet).
GPU_PEAK_FLOPS = {"V100": 15.7e12, "K80": 4.37e12}


@dataclass(frozen=True)
class Instance:
    name: str
    gpu: str
    gpus: int
    intra: str | None  # GPU-to-GPU link inside the instance
    network: str  # instance-to-instance link
    on_demand: float  # $ per hour


INSTANCES = {i.name: i for i in (
    Instance("p2.xlarge", "K80", 1, None, "net10", 0.90),
    Instance("p2.8xlarge", "K80", 8, "pcie3", "net10", 7.20),
    Instance("p2.16xlarge", "K80", 16, "pcie3", "net25", 14.40),
    Instance("p3.2xlarge", "V100", 1, None, "net10", 3.06),
    Instance("p3.8xlarge", "V100", 4, "nvlink2", "net10", 12.24),
    Instance("p3.16xlarge", "V100", 8, "nvlink2", "net25", 24.48),
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


@lru_cache(maxsize=1)
def spot_prices() -> dict[str, float]:
    """Median AWS spot price ($/h) per instance over the registry's history (both regions, all dates)."""
    root = fetch("cloud_gpu_spot_prices_2020") / "logs" / "aws" / "cost"
    prices: dict[str, list[float]] = {}
    for path in sorted(root.glob("*/*.json")):
        for row in json.loads(path.read_text())["SpotPriceHistory"]:
            prices.setdefault(row["InstanceType"], []).append(float(row["SpotPrice"]))
    return {name: statistics.median(values) for name, values in sorted(prices.items())}
