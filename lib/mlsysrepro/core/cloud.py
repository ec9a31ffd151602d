"""AWS GPU instances as a cloud bills them: GPUs per instance, on-demand prices, and the spot-price history.

The catalogue and its on-demand prices are the ones the Stash authors' analysis uses (DS-Analyzer fork,
``tool/analyze.py``; recorded in the registry's ``cloud_gpu_spot_prices_2020/SOURCE.md``). Spot prices come from the
registry's AWS spot-price history (us-east-1 and us-west-2, February-March 2020): :func:`spot_prices` gives each
instance's median, :func:`spot_price_series` the price as it moved, second by second. Shared by the DDL stall
profiler (:mod:`mlsysrepro.ddl.instances`) and ensemble serving (:mod:`mlsysrepro.serving.cloud`).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

import numpy as np

from .data import fetch

#: Peak fp32 FLOP/s per GPU: V100 SXM2 15.7 TFLOP/s (NVIDIA V100 datasheet); K80 4.37 TFLOP/s per GK210 die,
#: which is what one p2 "GPU" is (8.73 TFLOP/s per two-die board at boost clocks, NVIDIA K80 datasheet).
GPU_PEAK_FLOPS = {"V100": 15.7e12, "K80": 4.37e12}


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpu: str
    gpus: int
    on_demand: float  # $ per hour


INSTANCE_TYPES = {i.name: i for i in (
    InstanceType("p2.xlarge", "K80", 1, 0.90),
    InstanceType("p2.8xlarge", "K80", 8, 7.20),
    InstanceType("p2.16xlarge", "K80", 16, 14.40),
    InstanceType("p3.2xlarge", "V100", 1, 3.06),
    InstanceType("p3.8xlarge", "V100", 4, 12.24),
    InstanceType("p3.16xlarge", "V100", 8, 24.48),
)}


def instance_type(name: str) -> InstanceType:
    if name not in INSTANCE_TYPES:
        raise ValueError(f"instance must be one of {sorted(INSTANCE_TYPES)}, got {name!r}")
    return INSTANCE_TYPES[name]


def _history() -> list[dict]:
    root = fetch("cloud_gpu_spot_prices_2020") / "logs" / "aws" / "cost"
    rows = []
    for path in sorted(root.glob("*/*.json")):
        rows += json.loads(path.read_text())["SpotPriceHistory"]
    return rows


@lru_cache(maxsize=1)
def spot_prices() -> dict[str, float]:
    """Median AWS spot price ($/h) per instance over the registry's history (both regions, all dates)."""
    prices: dict[str, list[float]] = {}
    for row in _history():
        prices.setdefault(row["InstanceType"], []).append(float(row["SpotPrice"]))
    return {name: statistics.median(values) for name, values in sorted(prices.items())}


@lru_cache(maxsize=32)
def spot_price_series(instance: str, seconds: int) -> np.ndarray:
    """The spot price ($/h) of ``instance`` for each of ``seconds`` seconds: the availability zone with the most
    price changes in the registry's history, from its first record on, each price held until the next (and the
    last held to the end)."""
    instance_type(instance)
    if seconds < 1:
        raise ValueError(f"seconds must be >= 1, got {seconds}")
    zones: dict[str, dict[float, float]] = {}
    for row in _history():
        if row["InstanceType"] == instance:
            stamp = datetime.fromisoformat(row["Timestamp"].replace("Z", "+00:00")).timestamp()
            zones.setdefault(row["AvailabilityZone"], {})[stamp] = float(row["SpotPrice"])
    if not zones:
        raise ValueError(f"the spot-price history has no record of {instance}")
    zone = max(sorted(zones), key=lambda z: len(zones[z]))
    stamps = np.array(sorted(zones[zone]))
    prices = np.array([zones[zone][s] for s in stamps])
    offsets = stamps - stamps[0]
    return prices[np.searchsorted(offsets, np.arange(seconds), side="right") - 1]
