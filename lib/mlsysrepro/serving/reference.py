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
