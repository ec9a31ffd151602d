"""Independent tasks (training runs, evaluations, simulations) run on N workers, their results cached.

:class:`TaskRunner` maps a module-level function over a list of tasks and returns the results in the tasks'
order:

- ``workers=1``: in this process, one after another (no start-up cost);
- ``workers=N`` with the ``local`` backend (the default): N spawned processes on this machine, started lazily and
  kept for later calls until :meth:`TaskRunner.close`;
- the ``ray`` backend (``pip install -e .[ray]``): the same tasks as Ray tasks on a cluster,
  ``TaskRunner(backend="ray", address="ray://head:10001")`` (``address=None`` starts a local Ray instance), for
  sweeps that outgrow one machine.

Results must not depend on where they were computed: each task seeds its own randomness, and every task runs
with one torch thread wherever it runs (in this process too), so a run gives the same numbers whatever
``workers`` and the backend are. Local workers ignore SIGINT (an interrupt reaches the notebook, which stops
them), die with the process that started them (:func:`mlsysrepro.core.orphans.die_with_parent`) and show no
progress bars.

:meth:`TaskRunner.cached_map` is the map cached under a name with the explicit list of knobs the results depend
on (:func:`mlsysrepro.core.cache.cached_parts`)::

    runner = TaskRunner(workers=2)
    results = runner.cached_map("accuracy_runs", settings, train_one, tasks, knobs=ACCURACY_KNOBS)

Each task's result is its own cache entry, written as soon as it is done, so a sweep that stops half-way (a
crash, a timeout) keeps the runs it finished.

:func:`in_fresh_processes` is the other map, for timings: each task alone in a process started for it, one after
another, with this process's torch threads, so that what ran before (a notebook's training, its heap) cannot move
the times.
"""

from __future__ import annotations

import os
import signal
import weakref
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from typing import Any, Callable, Iterable, Iterator

from .cache import cached_parts
from .orphans import die_with_parent
from .progress import progress
from .settings import Settings

BACKENDS = ("local", "ray")


def default_workers() -> int:
    """``MLSYSREPRO_CORES`` (set by ``run_all.sh --jobs``) or the machine's cores, at most 4 (more processes
    only time-share them)."""
    cores = int(os.environ.get("MLSYSREPRO_CORES") or os.cpu_count() or 1)
    return max(1, min(4, cores))


@contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread for the block, as in a worker (results then match the workers' bit for bit)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _start_local_worker(parent: int, threads: int = 1) -> None:
    die_with_parent(parent)
    import torch

    torch.set_num_threads(threads)
    os.environ["MLSYSREPRO_NO_PROGRESS"] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _in_one_thread(fn: Callable[[Any], Any], task: Any) -> Any:
    """A Ray task: ``fn(task)`` with one torch thread and no progress bars."""
    os.environ["MLSYSREPRO_NO_PROGRESS"] = "1"
    with one_thread():
        return fn(task)


def in_fresh_processes(fn: Callable[[Any], Any], tasks: Iterable[Any], desc: str = "tasks") -> list[Any]:
    """``[fn(task) for task in tasks]``, each task in a spawned process of its own, one after another, on as many
    torch threads as this process uses: none inherits this process's memory or history, and none shares the cores
    with another task. For timings that must not depend on what the notebook ran before them; ``fn`` and the tasks
    must pickle (module-level functions, no lambdas)."""
    import torch

    tasks = list(tasks)
    if not tasks:
        return []
    pool = ProcessPoolExecutor(1, get_context("spawn"), initializer=_start_local_worker,
                               initargs=(os.getpid(), torch.get_num_threads()), max_tasks_per_child=1)
    with pool:
        return [pool.submit(fn, task).result() for task in progress(tasks, desc)]


class TaskRunner:
    """``[fn(task) for task in tasks]`` on ``workers`` workers of a backend (module docstring)."""

    def __init__(self, workers: int | None = None, backend: str = "local", address: str | None = None):
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
        self.workers, self.backend, self.address = workers or default_workers(), backend, address
        self._pool = None

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any], desc: str = "tasks") -> list[Any]:
        """``[fn(task) for task in tasks]``, in the tasks' order; ``fn`` must be a module-level function."""
        return list(self.imap(fn, tasks, desc))

    def imap(self, fn: Callable[[Any], Any], tasks: Iterable[Any], desc: str = "tasks") -> Iterator[Any]:
        """:meth:`map` as an iterator: each result as soon as it and those before it are done (every task is
        submitted at once, so the workers never wait for the reader)."""
        tasks = list(tasks)
        if not tasks:
            return iter(())
        if self.backend == "ray":
            return self._imap_ray(fn, tasks, desc)
        if self.workers == 1:
            return self._imap_here(fn, tasks, desc)
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, get_context("spawn"), initializer=_start_local_worker,
                                             initargs=(os.getpid(),))
            weakref.finalize(self, self._pool.shutdown)
        return iter(progress(self._pool.map(fn, tasks), desc, total=len(tasks)))

    @staticmethod
    def _imap_here(fn, tasks, desc):
        for task in progress(tasks, desc):
            with one_thread():  # given back between tasks: the reader runs with the process's own threads
                result = fn(task)
            yield result

    def _imap_ray(self, fn, tasks, desc):
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address, num_cpus=None if self.address else self.workers,
                     include_dashboard=False, log_to_driver=False)
        remote = ray.remote(num_cpus=1)(_in_one_thread)
        refs = [remote.remote(fn, task) for task in tasks]
        return (ray.get(ref) for ref in progress(refs, desc))

    def cached_map(self, name: str, settings: Settings, fn: Callable[[Any], Any], tasks: Iterable[Any], *,
                   knobs: Iterable[str], desc: str = "tasks", prepare: Callable[[], Any] | None = None) -> list[Any]:
        """:meth:`map`, cached as ``name`` by the seed, ``knobs`` (every knob the results depend on) and the code
        of ``fn``'s module, one entry per task written as soon as it is done
        (:func:`mlsysrepro.core.cache.cached_parts`): a run that stops half-way keeps the tasks it finished, and
        the next one runs only the others. ``prepare`` runs first, in this process, when any task is computed
        (fetch the data here, so that the workers never write it at once)."""
        tasks = list(tasks)

        def compute(missing: list[int]) -> Iterator[Any]:
            if prepare is not None:
                prepare()
            return self.imap(fn, [tasks[i] for i in missing], desc)

        return cached_parts(name, settings, compute, len(tasks), knobs=knobs, source=fn.__module__)

    def close(self) -> None:
        """Stop the local workers (a later :meth:`map` starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> "TaskRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
