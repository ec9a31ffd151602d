"""A DDP communication hook that does the real all-reduce and adds the emulated cluster's link time per bucket.

``EmulatedCluster`` says what the run stands for: ``machines`` x ``workers_per_machine`` workers joined by the
named links of :mod:`.links`, every time stretched by ``dilation``. The real processes (on this machine, over
gloo on 127.0.0.1) may be fewer than the emulated workers; the hook models the emulated cluster's collective
while the real ones average the real gradients.

The hook emulates one link per worker, busy with one bucket at a time, as a communication stream is: bucket ``k``
starts when both its gradients are ready and bucket ``k-1`` is off the link, and its future completes
``T(bytes)`` (:func:`.links.allreduce_seconds`) later, or when the real all-reduce finishes if that is later.
Backward computation goes on meanwhile (DDP overlaps buckets with backward), so only the communication left after
the last gradient is computed stalls the iteration. The delay is served by a timer thread, never by sleeping in
the autograd thread.
"""


import threading
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from .links import allreduce_seconds


@dataclass(frozen=True)
class EmulatedCluster:
    machines: int = 1
    workers_per_machine: int = 1
    intra: str | None = None
    network: str | None = None
    dilation: float = 1.0

    @property
    def workers(self) -> int:
        return self.machines * self.workers_per_machine

    def allreduce_seconds(self, nbytes: float) -> float:
        return allreduce_seconds(nbytes, self.machines, self.workers_per_machine, self.intra, self.network,
                                 self.dilation)


@dataclass
class BucketRecord:
    nbytes: int
    called: float  # when DDP handed the bucket to the hook (perf_counter seconds)
    link_start: float  # when the emulated link took it
    modelled: float  # the link time added: EmulatedCluster.allreduce_seconds(nbytes)
    reduced: float = float("nan")  # when the real all-reduce finished
    done: float = float("nan")  # when the bucket's future completed


@dataclass
class LinkState:
    """The hook's state: the emulated cluster, when the link is next free, and (if ``log``) one record per bucket."""

    cluster: EmulatedCluster
    log: bool = True
    link_free: float = 0.0
    records: list[BucketRecord] = field(default_factory=list)


def emulated_allreduce_hook(state: LinkState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average the bucket over the real processes; complete ``modelled`` seconds after the link is free."""
    buffer = bucket.buffer()
    now = time.perf_counter()
    nbytes = buffer.numel() * buffer.element_size()
    modelled = state.cluster.allreduce_seconds(nbytes)
    start = max(now, state.link_free)
    ready_at = start + modelled
    state.link_free = ready_at
    record = BucketRecord(nbytes, now, start, modelled)
    if state.log:
        state.records.append(record)
    world = dist.get_world_size()
    result: torch.futures.Future[torch.Tensor] = torch.futures.Future()

    def complete(value: torch.Tensor) -> None:
        record.done = time.perf_counter()
        result.set_result(value)

    def reduced(fut: torch.futures.Future) -> None:
        value = fut.value()[0].div_(world)
        record.reduced = time.perf_counter()
        remaining = ready_at - record.reduced
        if remaining > 0:
            threading.Timer(remaining, complete, (value,)).start()
        else:
            complete(value)

    dist.all_reduce(buffer, async_op=True).get_future().then(reduced)
    return result
