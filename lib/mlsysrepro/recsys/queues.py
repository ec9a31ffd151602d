"""FIFO servers in closed form: the departure time of every job of many queues at once, vectorised.

A FIFO server with deterministic service times obeys ``D_i = max(A_i, D_{i-1}) + S_i`` (jobs in arrival order).
With ``C_i`` the running sum of service times, ``D_i = C_i + max_{j <= i} (A_j - C_{j-1})``: a running maximum, so a
whole queue is one sort, two cumulative sums and one cumulative maximum, with no loop over jobs. :func:`fifo` does
this for every server of a stage at once (jobs grouped by server, each group's running maximum kept apart by an
offset per group). A system of such stages in tandem (a link, then a DRAM bank, then another link) is one call
per stage, each stage's departures (plus a fixed wire latency) being the next stage's arrivals, and FIFO order
re-established at every stage.

:func:`fifo_reference` is the same recursion one job at a time, the test's and the benchmark's reference.
"""

from __future__ import annotations

import numpy as np


def fifo(arrivals: np.ndarray, service: np.ndarray | float, servers: np.ndarray | None = None) -> np.ndarray:
    """Departure times of jobs arriving at ``arrivals`` with ``service`` times, each served FIFO by its server
    (``servers``: an id per job; None: one server). Ties in arrival keep the jobs' order."""
    arrivals = np.asarray(arrivals, dtype=float)
    service = np.broadcast_to(np.asarray(service, dtype=float), arrivals.shape)
    if (service < 0).any():
        raise ValueError("service times must be >= 0")
    if arrivals.size == 0:
        return arrivals.copy()
    groups = np.zeros(arrivals.size, dtype=np.int64) if servers is None else np.asarray(servers, dtype=np.int64)
    # by server, then arrival, both stable (np.lexsort's order); server ids that fit 16 bits sort by radix, 2x faster
    small = groups.min() >= 0 and groups.max() < 2**15
    by_arrival = np.argsort(arrivals, kind="stable")
    order = by_arrival[np.argsort((groups.astype(np.int16) if small else groups)[by_arrival], kind="stable")]
    a, s, g = arrivals[order], service[order], groups[order]
    starts = np.r_[0, np.flatnonzero(np.diff(g)) + 1]
    group_of = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, g.size]))
    total = np.cumsum(s)
    before = np.r_[0.0, total[:-1]]
    base = before[starts][group_of]  # service done in earlier groups, removed so each group starts at zero
    done = total - base
    slack = a - (before - base)
    span = float(slack.max() - slack.min()) + 1.0
    lifted = np.maximum.accumulate(slack + group_of * span) - group_of * span  # a running max per group
    departures = np.empty_like(arrivals)
    departures[order] = done + lifted
    return departures


def fifo_reference(arrivals: np.ndarray, service: np.ndarray | float, servers: np.ndarray | None = None
                   ) -> np.ndarray:
    """:func:`fifo`, one job at a time (a plain loop over jobs in arrival order)."""
    arrivals = np.asarray(arrivals, dtype=float)
    service = np.broadcast_to(np.asarray(service, dtype=float), arrivals.shape)
    groups = np.zeros(arrivals.size, dtype=np.int64) if servers is None else np.asarray(servers)
    free: dict[int, float] = {}
    departures = np.empty_like(arrivals)
    for i in np.lexsort((arrivals, groups)):
        start = max(arrivals[i], free.get(int(groups[i]), -np.inf))
        departures[i] = free[int(groups[i])] = start + service[i]
    return departures


def completion(done: np.ndarray, groups: np.ndarray, count: int) -> np.ndarray:
    """The latest of ``done`` per group id in ``range(count)`` (when the last part of each bag arrives); -inf where
    a group has no part."""
    latest = np.full(count, -np.inf)
    np.maximum.at(latest, np.asarray(groups, dtype=np.int64), done)
    return latest
