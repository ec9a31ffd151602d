"""A trace of training jobs, held as columns (one numpy array per field) so that policies rank jobs with array ops.

A job ``j`` arrives at ``arrival[j]`` seconds, asks for ``gpus[j]`` GPUs (gang-scheduled: all or none) and
must run ``iterations[j]`` data-parallel iterations. One iteration computes for ``compute_seconds[j]`` and
then all-reduces ``gradient_bytes[j]`` over the job's GPUs, so its length depends on the placement:

    iteration time = compute_seconds + Topology.allreduce_seconds(gradient_bytes, placement)

This is the issue's replacement for the ASTRA-sim runs of the authors' simulator (``getPlacementSlowdown``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .model_sizes import gradient_bytes


@dataclass(frozen=True)
class Trace:
    """Jobs sorted by arrival. ``assumptions`` says what the loader had to invent (shown in the notebook)."""

    name: str
    arrival: np.ndarray
    gpus: np.ndarray
    iterations: np.ndarray
    compute_seconds: np.ndarray
    gradient_bytes: np.ndarray
    model: np.ndarray
    assumptions: str = ""
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        n = len(self.arrival)
        for name in ("gpus", "iterations", "compute_seconds", "gradient_bytes", "model"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"trace {self.name!r}: column {name} has {len(getattr(self, name))} rows, "
                                 f"arrival has {n}")
        if n == 0:
            raise ValueError(f"trace {self.name!r} has no jobs")
        if np.any(np.diff(self.arrival) < 0):
            raise ValueError(f"trace {self.name!r}: arrivals must be sorted")
        if self.gpus.min() < 1 or self.iterations.min() <= 0 or self.compute_seconds.min() <= 0:
            raise ValueError(f"trace {self.name!r}: every job needs >= 1 GPU, > 0 iterations and > 0 compute seconds")

    def __len__(self) -> int:
        return len(self.arrival)

    def take(self, index) -> "Trace":
        """The jobs at ``index`` (kept in arrival order)."""
        index = np.sort(np.asarray(index))
        return replace(self, arrival=self.arrival[index], gpus=self.gpus[index], iterations=self.iterations[index],
                       compute_seconds=self.compute_seconds[index], gradient_bytes=self.gradient_bytes[index],
                       model=self.model[index])

    def head(self, n: int) -> "Trace":
        return self.take(np.arange(min(n, len(self))))

    def with_arrivals_scaled(self, factor: float) -> "Trace":
        """Inter-arrival times multiplied by ``factor`` (< 1: a heavier load), first arrival kept."""
        if factor <= 0:
            raise ValueError(f"factor must be > 0, got {factor}")
        start = self.arrival[0]
        return replace(self, arrival=start + (self.arrival - start) * factor)

    def with_models(self, models: np.ndarray) -> "Trace":
        """The same jobs training other models: the gradient volume changes, the compute time does not."""
        models = np.asarray(models)
        volume = np.array([gradient_bytes(m) for m in models], dtype=float)
        return replace(self, model=models, gradient_bytes=volume)

    def with_sensitive_share(self, share: float, seed: int, sensitive: str = "vgg16",
                             robust: str = "resnet18") -> "Trace":
        """A share ``share`` of the multi-GPU jobs (drawn with ``seed``) trains a communication-heavy model
        (``sensitive``), the others a light one (``robust``): the paper's sweep over network-sensitive jobs."""
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"share must be in [0, 1], got {share}")
        draw = np.random.default_rng(seed).random(len(self)) < share
        return self.with_models(np.where(draw, sensitive, robust))

    def mean_demand(self) -> float:
        """GPUs the jobs would hold on average, over the arrival window, on an unbounded cluster at their compute
        time (a job that outlives the window counts only inside it, so heavy tails do not inflate the load)."""
        first, last = self.arrival[0], max(self.arrival[-1], self.arrival[0] + 1.0)
        end = self.arrival + self.iterations * self.compute_seconds
        inside = np.clip(np.minimum(end, last) - np.maximum(self.arrival, first), 0.0, None)
        return float(np.sum(self.gpus * inside) / (last - first))

    def offered_load(self, cluster_gpus: int) -> float:
        """The share of ``cluster_gpus`` the trace asks for: :meth:`mean_demand` / ``cluster_gpus``."""
        return self.mean_demand() / cluster_gpus


def from_columns(name: str, arrival, gpus, iterations, compute_seconds, model, assumptions: str = "",
                 volume=None) -> Trace:
    """A :class:`Trace` from raw columns, sorted by arrival (stable) and with the gradient volume of each model
    unless ``volume`` (bytes per iteration) is given."""
    arrival = np.asarray(arrival, dtype=float)
    order = np.argsort(arrival, kind="stable")
    model = np.asarray(model)[order]
    if volume is None:
        volume = np.array([gradient_bytes(m) for m in model], dtype=float)
    else:
        volume = np.asarray(volume, dtype=float)[order]
    return Trace(name=name, arrival=arrival[order], gpus=np.asarray(gpus, dtype=np.int64)[order],
                 iterations=np.asarray(iterations, dtype=float)[order],
                 compute_seconds=np.asarray(compute_seconds, dtype=float)[order], gradient_bytes=volume, model=model,
                 assumptions=assumptions)
