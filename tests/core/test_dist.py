import multiprocessing
import time

import pytest
import torch
import torch.distributed as dist

from mlsysrepro.core.dist import WorkerError, launch


def sum_of_ranks(rank, world_size, offset):
    t = torch.tensor([float(rank + offset)])
    dist.all_reduce(t)
    return rank, float(t)


def one_rank_raises(rank, world_size):
    if rank == 1:
        raise KeyError("machine 1 lost its partition")
    dist.barrier()  # the others wait for rank 1, which never comes
    return rank


def one_rank_hangs(rank, world_size):
    if rank == 1:
        time.sleep(120)
    dist.barrier()
    return rank


def test_launch_runs_a_collective_and_returns_in_rank_order():
    results = launch(sum_of_ranks, 3, args=(10,), timeout=60)
    assert results == [(0, 33.0), (1, 33.0), (2, 33.0)]  # 10 + 11 + 12


def test_a_raising_worker_fails_the_run_fast_with_its_error():
    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"(?s)rank 1 failed.*KeyError.*lost its partition"):
        launch(one_rank_raises, 3, timeout=120)
    assert time.monotonic() - start < 60  # not the 120 s timeout
    assert multiprocessing.active_children() == []


def test_a_hanging_worker_ends_in_a_timeout_without_orphans():
    with pytest.raises(TimeoutError, match="timeout of 8 s"):
        launch(one_rank_hangs, 2, timeout=8)
    assert multiprocessing.active_children() == []


def test_launch_rejects_bad_arguments():
    with pytest.raises(ValueError, match="world_size"):
        launch(sum_of_ranks, 0)
    with pytest.raises(ValueError, match="timeout"):
        launch(sum_of_ranks, 2, timeout=0)
