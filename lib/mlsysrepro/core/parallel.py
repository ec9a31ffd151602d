"""Independent experiment runs on a pool of worker processes, one thread each.

On a 2-core machine, small tensor operations gain little from a second intra-op thread, while a
second process running another independent run doubles the throughput. :class:`RunPool` maps a
module-level function over tasks in ``workers`` spawned processes (started lazily, kept for later
calls, stopped by :meth:`RunPool.close` or when the pool is garbage-collected).

Results must not depend on the process that computed them: each task seeds its own randomness, and
every worker runs one thread, so a run gives the same numbers whatever ``workers`` is. Workers ignore
SIGINT (an interrupt reaches the notebook, which stops the pool) and show no progress bars.
"""

from __future__ import annotations

import os
import signal
import weakref
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, Callable, Iterable

from .progress import progress


def _start_worker() -> None:
    import torch

    torch.set_num_threads(1)
    os.environ["MLSYSREPRO_NO_PROGRESS"] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def default_workers() -> int:
    """The machine's cores, at most 4 (more processes only time-share them)."""
    return max(1, min(4, os.cpu_count() or 1))


class RunPool:
    def __init__(self, workers: int | None = None):
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers or default_workers()
        self._pool = None

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any], desc: str = "runs") -> list[Any]:
        """``[fn(task) for task in tasks]``, computed in the workers, in the tasks' order."""
        tasks = list(tasks)
        if not tasks:
            return []
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, get_context("spawn"), initializer=_start_worker)
            weakref.finalize(self, self._pool.shutdown)
        return list(progress(self._pool.map(fn, tasks), desc, total=len(tasks)))

    def close(self) -> None:
        """Stop the workers (a later :meth:`map` starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
