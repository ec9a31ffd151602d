"""Servers that batch what is queued: the latency a request sees at a given load, tabulated once per model.

Cocktail's query processor sends a model's queued requests to a VM together, up to the model's batch size, as soon
as a worker is free, with no batching delay (the artifact's ``modules/query_processor.py``, ``_manage_queue``,
lines 82-140: it takes ``handle_size x workers - 1`` more queued requests of the same model; ``batch_interval`` in
``modules/constants.py`` line 42 is the vote-scaling interval of ``modules/frontend.py`` line 147, not a delay).
So a server at light load serves one request at a time, fast; under load its batches grow and it serves more per
second, each request waiting longer.

With Poisson arrivals the mean latency of such a server depends on its load only through ``ρ = λ / capacity``
(the capacity being ``batch / s(batch)``) once time is measured in full-batch times: scaling every time by a GPU's
speed scales the latency alike. :func:`latency_table` simulates the server request by request at a grid of loads
(:data:`LOADS`), every model and load at once; the serving simulator reads it with :func:`batched_service`.
:func:`mlsysrepro.serving.reference.per_request_batched_latency` is the same server written as a plain loop, the
reference the table is tested against.
"""

from __future__ import annotations

import numpy as np

#: The loads (arrival rate over the capacity at the full batch) the table is simulated at.
LOADS = np.r_[0.0, np.linspace(0.05, 0.95, 19)]


def batch_time(size: np.ndarray, one: np.ndarray, full: np.ndarray, batch: int) -> np.ndarray:
    """The time of a batch of ``size`` requests: linear from ``one`` (one request) to ``full`` (``batch`` of them),
    the two batch sizes the zoo measures."""
    return one + (full - one) * (size - 1) / max(batch - 1, 1)


def latency_table(one_over_full: np.ndarray, batch: int, loads: np.ndarray = LOADS, requests: int = 20_000,
                  seed: int = 0) -> np.ndarray:
    """(models x loads): the mean latency, arrival to the end of its batch, in full-batch times, of Poisson arrivals
    at each load of ``loads`` on one server that takes every queued request up to ``batch`` when it is free (an
    idle server starts on the next arrival), per model whose batch of one takes ``one_over_full`` of a full batch's
    time. ``requests`` arrivals per cell; the loop runs over batches, every cell at once (load 0: one request
    alone)."""
    ratio = np.asarray(one_over_full, dtype=float)
    if np.any(ratio <= 0) or np.any(ratio > 1):
        raise ValueError(f"one_over_full must be in (0, 1], got {ratio}")
    if batch < 1 or requests < 1:
        raise ValueError(f"batch and requests must be >= 1, got {batch} and {requests}")
    loads = np.asarray(loads, dtype=float)
    if np.any(loads < 0) or np.any(loads >= 1):
        raise ValueError(f"loads must be in [0, 1), got {loads}")
    cells = ratio.size * loads.size
    one = np.repeat(ratio, loads.size)
    rate = np.tile(loads, ratio.size) * batch  # requests per full-batch time
    gaps = np.random.default_rng(seed).exponential(1.0, (cells, requests))
    arrivals = np.cumsum(gaps, axis=1) / np.maximum(rate, 1e-12)[:, None]
    arrivals = np.concatenate([arrivals, np.full((cells, batch), np.inf)], axis=1)  # the window may look past the end
    window = np.arange(batch)
    rows = np.arange(cells)
    free = np.zeros(cells)
    head = np.zeros(cells, dtype=np.int64)
    total = np.zeros(cells)
    while True:
        busy = head < requests
        if not busy.any():
            break
        cell = rows[busy]
        ahead = arrivals[cell[:, None], head[cell, None] + window]  # the next `batch` arrivals of each cell
        start = np.maximum(free[cell], ahead[:, 0])
        taken = (ahead <= start[:, None]) & (head[cell, None] + window < requests)
        size = taken.sum(1)
        free[cell] = start + batch_time(size, one[cell], 1.0, batch)
        total[cell] += (free[cell, None] - np.where(taken, ahead, 0.0)).sum(1, where=taken)
        head[cell] += size
    table = (total / requests).reshape(ratio.size, loads.size)
    table[:, loads == 0] = ratio[:, None]  # a lone request: the batch of one
    return table


def batched_service(load: np.ndarray, table: np.ndarray, full_s: np.ndarray, backlog: np.ndarray,
                    loads: np.ndarray = LOADS) -> np.ndarray:
    """Seconds from arrival to the end of a request's batch, per second and model (arrays broadcast together):
    ``table`` (models x ``loads``, :func:`latency_table`) read at ``load`` (arrival rate over the servers' capacity)
    and scaled by the full batch's time ``full_s`` on those servers, the load held at the table's last; while a
    backlog waits (the simulator's fluid queue, which counts that wait itself) every batch is full and a request
    waits half of the one in service: ``1.5 full_s``."""
    if table.shape[-1] != loads.size:
        raise ValueError(f"table must have one column per load ({loads.size}), got {table.shape}")
    columns = np.clip(load, loads[0], loads[-1])
    position = np.interp(columns, loads, np.arange(loads.size))
    low = np.floor(position).astype(int)
    high = np.minimum(low + 1, loads.size - 1)
    models = np.arange(table.shape[0])
    normalised = table[models, low] + (position - low) * (table[models, high] - table[models, low])
    return np.where(backlog > 1e-9, 1.5, normalised) * full_s
