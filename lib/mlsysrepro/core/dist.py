"""Start a ``torch.distributed`` job on this machine, or join one started by ``torchrun``.

:func:`launch` runs ``worker(rank, world_size, *args)`` in ``world_size`` fresh processes
(``torch.multiprocessing`` spawn), each already inside a gloo (or NCCL) process group on 127.0.0.1 at a
free port, and returns their return values in rank order. Every socket is on the loopback interface: rank 0's
rendezvous store listens on a socket bound to 127.0.0.1 and gloo's connections use ``lo``. A worker that raises
ends the run at once: the other processes are killed and the worker's exception is re-raised here with its
traceback. A rank that dies without a word (a signal, an abort) is the one blamed, with its signal, not the
survivors that then fail to reach it. A run that outlives ``timeout`` seconds (a hung collective, a deadlock) is
killed the same way and raises :class:`TimeoutError`. No process outlives the call, and none outlives the caller:
each rank dies with its parent (:func:`mlsysrepro.core.orphans.die_with_parent`).

:func:`init_from_env` is the same worker's entry point under ``torchrun``, which sets
``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` (several hosts included);
:func:`leave` is its exit, on every rank once the work is done. Its ranks too die with the process that
started them, ``torchrun`` killed with SIGKILL included.
"""

from __future__ import annotations

import datetime
import os
import pickle
import queue
import signal
import socket
import time
import traceback
from typing import Any, Callable

import torch.distributed as dist
import torch.multiprocessing as mp

from .orphans import die_with_parent

#: Seconds the launcher waits, after a rank reports a failure, for a rank that died silently to show up as dead.
SETTLE_SECONDS = 2.0


class WorkerError(RuntimeError):
    """A worker process raised; the message carries its rank and traceback."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_from_env(timeout: float = 300.0, backend: str = "gloo") -> tuple[int, int]:
    """Join the process group that ``torchrun`` (or :func:`launch`) describes in the environment
    (``backend``: ``"gloo"`` on CPUs, ``"nccl"`` with one GPU per process). The rank dies with the process that
    started it (:func:`mlsysrepro.core.orphans.die_with_parent`): a ``torchrun`` killed with SIGKILL, which runs no
    cleanup of its own, leaves no rank training under PID 1."""
    die_with_parent(os.getppid())
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    return dist.get_rank(), dist.get_world_size()


def leave() -> None:
    """Leave the process group once every rank is done with it.

    A barrier comes first: a collective can return on one rank (a ``reduce`` or ``gather`` that
    only sends) while another still reads from it, and gloo aborts a process whose peer closed its
    connection mid-read ("terminate called without an active exception").
    """
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def loopback_store(rank: int, world_size: int, port: int, timeout: float) -> dist.TCPStore:
    """The rendezvous store on 127.0.0.1 only: rank 0 serves it on a socket it binds to the loopback address itself
    (torch's own server would listen on every interface)."""
    wait = datetime.timedelta(seconds=timeout)
    if rank != 0:
        return dist.TCPStore("127.0.0.1", port, world_size, False, timeout=wait)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    # detached: the store's server thread owns the descriptor until the process ends
    return dist.TCPStore("127.0.0.1", port, world_size, True, timeout=wait, master_listen_fd=listener.detach())


def _entry(rank, world_size, port, timeout, threads, backend, worker, payload, results, parent) -> None:
    die_with_parent(parent)
    import torch

    torch.set_num_threads(threads)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size), GLOO_SOCKET_IFNAME="lo")
    try:
        dist.init_process_group(backend, store=loopback_store(rank, world_size, port, timeout), rank=rank,
                                world_size=world_size, timeout=datetime.timedelta(seconds=timeout))
        value = worker(rank, world_size, *pickle.loads(payload))
        leave()
        results.put((rank, True, pickle.dumps(value)))
    except BaseException as error:  # reported to the parent, which ends the run
        results.put((rank, False, f"{type(error).__name__}: {error}\n{traceback.format_exc()}"))
        if dist.is_initialized():
            dist.destroy_process_group()


def launch(worker: Callable[..., Any], world_size: int, args: tuple = (), timeout: float = 300.0,
           threads: int = 1, backend: str = "gloo") -> list[Any]:
    """Run ``worker(rank, world_size, *args)`` on ``world_size`` local processes; see the module docstring.

    ``worker`` must be importable (defined at module level); ``threads`` sets each process's
    intra-op threads (the ranks share this machine's cores); ``backend`` is the process group's
    (``"nccl"`` gives each process the GPU ``LOCAL_RANK``).
    """
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    # arguments and results travel as plain pickles: torch's queue would share tensors through file
    # descriptors that vanish when the process that made them exits
    payload = pickle.dumps(tuple(args))
    parent = os.getpid()
    procs = [ctx.Process(target=_entry, daemon=True,
                         args=(rank, world_size, port, timeout, threads, backend, worker, payload, results, parent))
             for rank in range(world_size)]
    for p in procs:
        p.start()
    values: dict[int, Any] = {}
    deaths = _Deaths(procs)
    deadline = time.monotonic() + timeout
    try:
        while len(values) < world_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"distributed run exceeded its timeout of {timeout:g} s; "
                                   f"ranks still running: {sorted(set(range(world_size)) - set(values))}")
            try:
                rank, ok, value = results.get(timeout=min(remaining, 0.1))
            except queue.Empty:
                silent = deaths.silent()
                if silent:
                    raise WorkerError(deaths.describe(silent[0]) + " before reporting a result")
                continue
            deaths.reported.add(rank)
            if not ok:
                silent = deaths.silent(settle=SETTLE_SECONDS)  # a peer that vanished explains "connection closed"
                if silent:
                    raise WorkerError(f"{deaths.describe(silent[0])} without reporting; then rank {rank} failed:\n"
                                      f"{value}")
                raise WorkerError(f"rank {rank} failed:\n{value}")
            values[rank] = pickle.loads(value)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join()
        results.close()
    return [values[r] for r in range(world_size)]


class _Deaths:
    """The launcher's record of which ranks reported and which died, in the order it saw them die."""

    def __init__(self, procs):
        self.procs, self.reported, self.order = procs, set(), []

    def _look(self) -> None:
        for rank, process in enumerate(self.procs):
            if process.exitcode is not None and rank not in self.order:
                self.order.append(rank)

    def silent(self, settle: float = 0.0) -> list[int]:
        """Ranks that exited with an error without reporting, first to die first; waits up to ``settle`` seconds
        for one to appear."""
        end = time.monotonic() + settle
        while True:
            self._look()
            found = [r for r in self.order if self.procs[r].exitcode != 0 and r not in self.reported]
            if found or time.monotonic() >= end:
                return found
            time.sleep(0.05)

    def describe(self, rank: int) -> str:
        code = self.procs[rank].exitcode
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        return f"rank {rank} died with {how}"
