"""A per-request FIFO queue, the reference the simulator's per-second fluid queues are checked against.

One pool of constant capacity ``c`` requests per second is a single server that takes ``1 / c`` seconds per request.
Requests arrive at uniform random instants within their second; request ``k`` starts when the server is free,
Lindley's recursion ``start_k = max(arrival_k, start_{k-1} + 1 / c)``, one request at a time. This is the
event-by-event simulation the simulator avoids (it is a Python loop over requests, by design: it is the slow,
obviously correct baseline of ``benchmarks/serving_simulator.py`` and of the tests).
"""

from __future__ import annotations

import numpy as np


def per_request_waits(counts: np.ndarray, capacity: float, rng: np.random.Generator) -> np.ndarray:
    """Mean wait (seconds, arrival to start of service) of each second's requests; NaN for an empty second."""
    if capacity <= 0:
        raise ValueError(f"capacity must be > 0 requests per second, got {capacity}")
    counts = np.asarray(counts, dtype=np.int64)
    arrivals = np.concatenate([second + np.sort(rng.random(n)) for second, n in enumerate(counts)])
    service = 1.0 / capacity
    waits = np.empty(len(arrivals))
    free = 0.0
    for k, arrival in enumerate(arrivals):
        start = max(arrival, free)
        waits[k] = start - arrival
        free = start + service
    sums = np.bincount(np.repeat(np.arange(len(counts)), counts), weights=waits, minlength=len(counts))
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts


def per_request_batched_latency(rate: float, one_s: float, full_s: float, batch: int, seconds: float,
                                rng: np.random.Generator) -> float:
    """Mean latency (seconds, arrival to the end of its batch) of Poisson arrivals at ``rate`` per second on one
    server that batches what is queued: an idle server starts on the first arrival; a server done with a batch takes
    every queued request up to ``batch`` at once (none queued: it idles); a batch of ``b`` takes
    ``one_s + (full_s - one_s) (b - 1) / (batch - 1)`` seconds. The reference of
    :func:`mlsysrepro.serving.batching.latency_table`."""
    if rate <= 0 or batch < 1 or seconds <= 0:
        raise ValueError("rate and seconds must be > 0 and batch >= 1")
    arrivals = np.cumsum(rng.exponential(1 / rate, int(rate * seconds * 1.2) + 10))
    arrivals = arrivals[arrivals < seconds]
    slope = (full_s - one_s) / max(batch - 1, 1)
    latency = np.empty(len(arrivals))
    free, k = 0.0, 0
    while k < len(arrivals):
        start = max(free, arrivals[k])
        taken = min(int(np.searchsorted(arrivals, start, side="right")) - k, batch)  # queued by the start
        free = start + one_s + slope * (taken - 1)
        latency[k:k + taken] = free - arrivals[k:k + taken]
        k += taken
    return float(latency.mean())
