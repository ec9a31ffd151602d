import os

import pytest
import torch

from mlsysrepro.core.parallel import RunPool


def seeded_sum(seed):
    """A task that draws its own randomness; returns its pid too."""
    return os.getpid(), float(torch.randn(1000, generator=torch.Generator().manual_seed(seed)).sum()), \
        torch.get_num_threads()


def test_results_come_back_in_task_order_and_do_not_depend_on_the_workers():
    one, two = RunPool(1), RunPool(2)
    try:
        a, b = one.map(seeded_sum, range(6)), two.map(seeded_sum, range(6))
    finally:
        one.close(), two.close()
    assert [r[1] for r in a] == [r[1] for r in b]
    assert [r[1] for r in a] == [seeded_sum(s)[1] for s in range(6)]
    assert all(r[2] == 1 for r in a + b)  # one thread per worker
    assert all(r[0] != os.getpid() for r in a)  # computed elsewhere


def test_an_empty_map_starts_nothing_and_bad_worker_counts_are_rejected():
    pool = RunPool(2)
    assert pool.map(seeded_sum, []) == [] and pool._pool is None
    with pytest.raises(ValueError, match="workers must be >= 1"):
        RunPool(0)
