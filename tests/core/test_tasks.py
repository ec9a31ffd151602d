import os

import pytest
import torch

from mlsysrepro.core import resolve
from mlsysrepro.core.tasks import TaskRunner, in_fresh_processes


def seeded_sum(seed):
    """A task that draws its own randomness; returns its pid and torch's thread count too."""
    return os.getpid(), float(torch.randn(1000, generator=torch.Generator().manual_seed(seed)).sum()), \
        torch.get_num_threads()


def test_results_come_back_in_task_order_and_do_not_depend_on_the_workers():
    with TaskRunner(1) as here, TaskRunner(2) as pool:
        a, b = here.map(seeded_sum, range(6)), pool.map(seeded_sum, range(6))
    assert [r[1] for r in a] == [r[1] for r in b] == [seeded_sum(s)[1] for s in range(6)]
    assert all(r[2] == 1 for r in a + b)  # one thread per task, in this process too
    assert all(r[0] == os.getpid() for r in a)  # workers=1: computed here, no start-up cost
    assert all(r[0] != os.getpid() for r in b)  # computed elsewhere


def test_this_process_gets_its_threads_back_after_a_map():
    before = torch.get_num_threads()
    TaskRunner(1).map(seeded_sum, [0])
    assert torch.get_num_threads() == before


def test_an_empty_map_starts_nothing_and_bad_arguments_are_named():
    runner = TaskRunner(2)
    assert runner.map(seeded_sum, []) == [] and runner._pool is None
    with pytest.raises(ValueError, match="workers must be >= 1"):
        TaskRunner(0)
    with pytest.raises(ValueError, match=r"backend must be one of \['local', 'ray'\], got 'mpi'"):
        TaskRunner(2, backend="mpi")


def test_each_timing_task_runs_alone_in_a_process_of_its_own_with_this_process_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        results = in_fresh_processes(seeded_sum, range(2))
    finally:
        torch.set_num_threads(before)
    pids = [r[0] for r in results]
    assert len(set(pids)) == 2 and os.getpid() not in pids  # a new process per task, never this one
    assert [r[1] for r in results] == [seeded_sum(s)[1] for s in range(2)]  # in the tasks' order
    assert all(r[2] == 2 for r in results)  # the threads this process had, not a worker's one
    assert in_fresh_processes(seeded_sum, []) == []


PRESETS = {"smoke": dict(n=3, workers=1), "default": dict(n=3, workers=2), "paper": dict(n=3, workers=2)}


def test_cached_map_is_keyed_by_its_knobs_only(tmp_path):
    prepared = []
    one = resolve("tasks_test", PRESETS, {"scale": "smoke", "seed": 3})
    two = resolve("tasks_test", PRESETS, {"scale": "smoke", "seed": 3, "workers": 2})
    with TaskRunner(1) as runner:
        first = runner.cached_map("sums", one, seeded_sum, range(one.n), knobs=["n"],
                                  prepare=lambda: prepared.append(1))
        again = runner.cached_map("sums", two, seeded_sum, range(two.n), knobs=["n"],
                                  prepare=lambda: prepared.append(1))
    assert again == first and prepared == [1]  # the second call loaded: `workers` is not a knob of the results


#: The tasks that fail in this process (a stand-in for a run killed half-way), and the tasks computed.
FAILING: set[int] = set()
COMPUTED: list[int] = []


def fails_where_asked(seed):
    COMPUTED.append(seed)
    if seed in FAILING:
        raise RuntimeError(f"task {seed} was killed")
    return seeded_sum(seed)[1]


def test_cached_map_keeps_the_tasks_a_failed_run_finished():
    settings = resolve("tasks_test", PRESETS, {"scale": "smoke", "seed": 5})
    FAILING.add(2)
    try:
        with TaskRunner(1) as runner, pytest.raises(RuntimeError, match="task 2 was killed"):
            runner.cached_map("kept", settings, fails_where_asked, range(4), knobs=["n"])
    finally:
        FAILING.clear()
    assert COMPUTED == [0, 1, 2]
    with TaskRunner(1) as runner:
        results = runner.cached_map("kept", settings, fails_where_asked, range(4), knobs=["n"])
        assert runner.cached_map("kept", settings, fails_where_asked, range(4), knobs=["n"]) == results
    assert COMPUTED == [0, 1, 2, 2, 3], "the rerun computes the task that failed and the one never reached, only"
    assert results == [seeded_sum(s)[1] for s in range(4)]


def test_imap_gives_each_result_in_order_before_the_last_is_done():
    with TaskRunner(2) as runner:
        results = runner.imap(seeded_sum, range(4))
        assert next(results)[1] == seeded_sum(0)[1]
        assert [r[1] for r in results] == [seeded_sum(s)[1] for s in range(1, 4)]


def test_the_ray_backend_runs_the_same_tasks():
    ray = pytest.importorskip("ray")
    try:
        with TaskRunner(2, backend="ray") as runner:
            results = runner.map(seeded_sum, range(4))
    finally:
        ray.shutdown()
    assert [r[1] for r in results] == [seeded_sum(s)[1] for s in range(4)]
    assert all(r[2] == 1 for r in results) and all(r[0] != os.getpid() for r in results)
