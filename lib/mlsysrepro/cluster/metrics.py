"""Metrics of a simulated run, computed from its per-job columns and allocation log (:class:`.simulator.Run`).

- :func:`summary` — makespan, JCT (mean, median, p95, p99), queueing delay, communication time and its share of
  GPU time, mean utilisation, preemptions and migrations, and the placement spread;
- :func:`utilisation` — busy GPUs over time, a step function from the log;
- :func:`check_invariants` — what every correct run satisfies (the tests call it on random traces).
"""

from __future__ import annotations

import numpy as np

from .topology import LEVELS


def utilisation(run) -> tuple[np.ndarray, np.ndarray]:
    """``(times, busy share)``: the share of GPUs held from ``times[i]`` until ``times[i + 1]``."""
    sizes = np.array([len(g) for g in run.log_gpus], dtype=float)
    times = np.concatenate([run.log_start, run.log_end])
    change = np.concatenate([sizes, -sizes])
    order = np.argsort(times, kind="stable")
    times, busy = times[order], np.cumsum(change[order])
    last = np.r_[times[1:] != times[:-1], True]  # one value per instant, after all its changes
    return times[last], busy[last] / run.topology.gpus


def placement_spread(run) -> dict[str, float]:
    """Share of the multi-GPU jobs' GPU time spent at each topology level (machine, rack, network). Weighting by
    GPU time, not by allocation, keeps a policy that re-places jobs often from counting its short stretches."""
    sizes = np.array([len(g) for g in run.log_gpus], dtype=float)
    weight = np.where(sizes > 1, sizes * (run.log_end - run.log_start), 0.0)
    per_level = np.bincount(run.log_level, weights=weight, minlength=3)[:3]
    total = per_level.sum()
    return {level: float(w / total) if total > 0 else 0.0 for level, w in zip(LEVELS, per_level)}


def summary(run) -> dict[str, float]:
    trace = run.trace
    jct = run.finish - trace.arrival
    queued = jct - run.held_seconds
    gpu_seconds = np.sum(run.held_seconds * trace.gpus)
    times, busy = utilisation(run)
    span = run.finish.max() - trace.arrival.min()
    mean_busy = float(np.sum(busy[:-1] * np.diff(times)) / span) if span > 0 else 0.0
    return {
        "makespan_s": float(span),
        "jct_mean_s": float(jct.mean()),
        "jct_median_s": float(np.median(jct)),
        "jct_p95_s": float(np.percentile(jct, 95)),
        "jct_p99_s": float(np.percentile(jct, 99)),
        "queue_mean_s": float(queued.mean()),
        "comm_hours": float(np.sum(run.comm_seconds * trace.gpus) / 3600),
        "comm_share": float(np.sum(run.comm_seconds * trace.gpus) / gpu_seconds),
        "utilisation": mean_busy,
        "preemptions": int(run.preemptions.sum()),
        "migrations": int(run.migrations.sum()),
        **{f"spread_{level}": share for level, share in placement_spread(run).items()},
    }


def check_invariants(run, tolerance: float = 1e-6) -> None:
    """Raise ``AssertionError`` unless: no GPU is held by two jobs at once; every job finished exactly its
    iterations, after it arrived; allocations have non-negative lengths and were logged in time order;
    utilisation never exceeds 1; the log agrees with the per-job time on GPUs."""
    trace = run.trace
    assert np.all(np.isfinite(run.finish)), "a job never finished"
    assert np.all(run.start >= trace.arrival - tolerance), "a job started before it arrived"
    assert np.all(run.finish >= run.start), "a job finished before it started"
    assert np.allclose(run.done, trace.iterations), "a job did not run exactly its iterations"
    assert np.all(run.log_end >= run.log_start), "an allocation ends before it starts"
    assert np.all(np.diff(run.log_end) >= 0), "simulated time went backwards (allocations logged out of order)"
    gpu = np.concatenate(run.log_gpus)
    sizes = [len(g) for g in run.log_gpus]
    start, end = np.repeat(run.log_start, sizes), np.repeat(run.log_end, sizes)
    order = np.lexsort((start, gpu))
    gpu, start, end = gpu[order], start[order], end[order]
    same = gpu[1:] == gpu[:-1]
    assert np.all(start[1:][same] >= end[:-1][same] - tolerance), "a GPU was held by two jobs at once"
    _, busy = utilisation(run)
    assert busy.max() <= 1.0 + tolerance, "utilisation above 1"
    held = np.bincount(run.log_job, weights=run.log_end - run.log_start, minlength=len(trace))
    assert np.allclose(held, run.held_seconds), "the log and the per-job held time disagree"
