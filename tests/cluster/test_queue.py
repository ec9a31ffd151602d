"""The ranked waiting queue against a sort from scratch."""

import numpy as np

from mlsysrepro.cluster.queue import RankedQueue, merged


def test_the_queue_matches_a_fresh_sort_through_arrivals_departures_and_returns():
    rng = np.random.default_rng(0)
    jobs = 400
    key = rng.integers(0, 5, jobs).astype(float)  # many ties, as Tiresias' queue numbers
    queue, waiting = RankedQueue(jobs), np.zeros(jobs, dtype=bool)
    for _ in range(300):
        idle = np.flatnonzero(~waiting)
        entering = rng.choice(idle, size=min(len(idle), rng.integers(1, 12)), replace=False)
        key[entering] = rng.integers(0, 5, len(entering))  # a returning job comes back with a new key
        waiting[entering] = True
        queue.add(entering, key[entering])
        leaving = rng.choice(np.flatnonzero(waiting), size=rng.integers(0, 8))
        waiting[leaving] = False
        ids, keys = queue.ordered(waiting)
        expected = np.flatnonzero(waiting)
        expected = expected[np.lexsort((expected, key[expected]))]
        assert np.array_equal(ids, expected) and np.array_equal(keys, key[expected])


def test_merging_a_few_ranked_jobs_into_the_queue_is_a_sort_by_key_then_id():
    rng = np.random.default_rng(1)
    ids = np.arange(0, 200, 2)
    keys = np.sort(rng.integers(0, 3, ids.size)).astype(float)
    ids = ids[np.lexsort((ids, keys))]
    more = np.arange(1, 60, 2)
    more_keys = rng.integers(0, 3, more.size).astype(float)
    everything, everything_keys = np.r_[ids, more], np.r_[keys, more_keys]
    assert np.array_equal(merged(ids, keys, more, more_keys),
                          everything[np.lexsort((everything, everything_keys))])
