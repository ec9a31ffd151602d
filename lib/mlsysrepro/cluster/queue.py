"""The waiting queue, kept in rank order between events.

A policy ranks jobs by a key (lower first, ties to the lower id). For every policy here but Themis a waiting job's
key does not change while it waits: FIFO's arrival, SRSF's remaining service, Tiresias' attained service and
Dally's progress per held second only move while a job holds GPUs. So the queue sorts a job once, when it starts
waiting (an arrival or a preemption), instead of sorting every waiting job at every event: an insertion is a
binary search and one ``np.insert``, and a job that leaves is dropped lazily (each entry carries the job's *stamp*,
the count of its waits, so an entry left from an earlier wait is never mistaken for the current one).
"""

from __future__ import annotations

import numpy as np


class RankedQueue:
    """Waiting jobs sorted by (key, id), for ``jobs`` jobs in all."""

    def __init__(self, jobs: int):
        self.ids = np.empty(0, dtype=np.int64)
        self.keys = np.empty(0)
        self.stamps = np.empty(0, dtype=np.int64)
        self.current = np.zeros(jobs, dtype=np.int64)  # each job's latest stamp

    def add(self, ids: np.ndarray, keys: np.ndarray) -> None:
        """Enqueue ``ids`` (distinct jobs that just started waiting) with their ``keys``."""
        order = np.lexsort((ids, keys))
        ids, keys = ids[order], keys[order].astype(float)
        self.current[ids] += 1
        where = insertion_points(self.keys, self.ids, keys, ids)
        self.ids = np.insert(self.ids, where, ids)
        self.keys = np.insert(self.keys, where, keys)
        self.stamps = np.insert(self.stamps, where, self.current[ids])

    def ordered(self, waiting: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ids and keys of the jobs still waiting (``waiting``: a boolean per job), in rank order. Entries of
        jobs that left are dropped from storage once they are half of it."""
        alive = waiting[self.ids] & (self.stamps == self.current[self.ids])
        if 2 * np.count_nonzero(alive) < alive.size:
            self.ids, self.keys, self.stamps = self.ids[alive], self.keys[alive], self.stamps[alive]
            return self.ids, self.keys
        return self.ids[alive], self.keys[alive]


def insertion_points(keys: np.ndarray, ids: np.ndarray, new_keys: np.ndarray, new_ids: np.ndarray) -> np.ndarray:
    """Where each (new key, new id) goes in ``keys, ids`` sorted by (key, id), for ``np.insert``: a binary search
    on the key, then, among equal keys, on the id (one search per tie for a few, else one over (tie group, id))."""
    low = np.searchsorted(keys, new_keys, side="left")
    high = np.searchsorted(keys, new_keys, side="right")
    tied = np.flatnonzero(high > low)
    where = low.copy()
    if tied.size <= 8:
        for i in tied:
            where[i] = low[i] + np.searchsorted(ids[low[i]:high[i]], new_ids[i])
        return where
    group = np.r_[0, np.cumsum(keys[1:] != keys[:-1])]  # equal keys share a group; groups ascend
    span = int(max(ids.max(), new_ids.max())) + 1
    where[tied] = np.searchsorted(group * span + ids, group[low[tied]] * span + new_ids[tied])
    return where


def merged(ids: np.ndarray, keys: np.ndarray, more_ids: np.ndarray, more_keys: np.ndarray) -> np.ndarray:
    """The ids of two (key, id) sorted lists, ``ids`` and ``more_ids`` (a few), merged in (key, id) order."""
    order = np.lexsort((more_ids, more_keys))
    more_ids, more_keys = more_ids[order], more_keys[order]
    where = insertion_points(keys, ids, more_keys, more_ids)
    return np.insert(ids, where, more_ids)
