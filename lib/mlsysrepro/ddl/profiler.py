"""DS-Analyzer's differential profiler on real ``torch.distributed`` DDP processes (gloo, 127.0.0.1).

The same training loop runs four ways (DS-Analyzer's ``harness.py``; RUN0 and the multi-machine runs are the
Stash authors' additions):

========  ========================================  ===================================
run       what runs                                 adds to the one before it
========  ========================================  ===================================
RUN0      each process alone, synthetic data        pure compute
RUN1      all workers under DDP, synthetic data     gradient all-reduce (interconnect / network)
RUN2      DDP, real files, cold page cache          fetch + prep
RUN3      DDP, real files, all in the page cache    prep
========  ========================================  ===================================

:func:`profile` runs a list of :class:`RunSpec` on ``processes`` real workers (one thread each) started by
:func:`mlsysrepro.core.dist.launch` — fail-fast, timed out, no orphans — and returns per-iteration times
(:class:`RunResult`). In RUN0 every process trains its own copy at the same time, so the cores are as busy as in
RUN1 and the RUN1 - RUN0 difference is communication, not contention. Each DDP run registers
:func:`.emulation.emulated_allreduce_hook`, which adds the emulated cluster's link time per gradient bucket.

On real machines (the paper scale) the same loop runs under ``torchrun`` with plain DDP, one process per GPU::

    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 4 --master-addr HOST0 --master-port 29500 \\
        -m mlsysrepro.ddl.profiler --model resnet50 --batch-size 64 --backend nccl --out stalls.json

(``main``; rank 0 writes the median seconds per iteration of each run and stage, for :mod:`.stalls`).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..core.dist import init_from_env, launch, leave
from ..core.timing import clock
from . import data, models
from .emulation import EmulatedCluster, LinkState, emulated_allreduce_hook

RUNS = {
    "RUN0": "one worker, synthetic data in memory (compute)",
    "RUN1": "all workers, synthetic data (compute + all-reduce)",
    "RUN2": "all workers, real files, cold page cache (+ fetch + prep)",
    "RUN3": "all workers, real files, cached (+ prep)",
}
STAGES = ("data", "forward", "backward", "step", "iteration", "comm_exposed", "comm_busy")


@dataclass(frozen=True)
class RunSpec:
    """One profiled run. ``model`` is a name for :func:`.models.build` or a module-level factory of an image
    model (1 x 28 x 28 inputs, 10 classes: what the synthetic batches and :class:`.data.ImageFiles` give)."""

    run: str
    model: str | Callable[[], torch.nn.Module]
    batch_size: int  # per worker
    cluster: EmulatedCluster = EmulatedCluster()
    iterations: int = 10
    warmup: int = 2
    label: str = ""  # the configuration this run stands for (an instance name)
    width: int = 16
    bucket_cap_mb: float = 25.0
    loader_workers: int = 0
    instrument: bool = True  # False: no per-iteration clocks or bucket log (the overhead baseline)
    emulate: bool = True  # False: plain DDP on the real interconnect (real multi-GPU machines, paper scale)

    def __post_init__(self):
        if self.run not in RUNS:
            raise ValueError(f"run must be one of {sorted(RUNS)}, got {self.run!r}")
        if self.batch_size < 1 or self.iterations < 1 or self.warmup < 0:
            raise ValueError("batch_size and iterations must be >= 1 and warmup >= 0, got "
                             f"{self.batch_size}, {self.iterations}, {self.warmup}")
        if self.run in ("RUN2", "RUN3") and isinstance(self.model, str) and models.is_language_model(self.model):
            raise ValueError(f"run {self.run} reads image files; model {self.model!r} has synthetic data only")

    @property
    def model_name(self) -> str:
        return self.model if isinstance(self.model, str) else getattr(self.model, "__name__", "custom")

    @property
    def distributed(self) -> bool:
        return self.run != "RUN0" and self.cluster.workers > 1

    @property
    def samples_per_iteration(self) -> int:
        """Samples the emulated cluster processes per iteration (one worker in RUN0)."""
        return self.batch_size * (self.cluster.workers if self.run != "RUN0" else 1)


@dataclass
class RunResult:
    spec: RunSpec
    times: dict[str, np.ndarray]  # per measured iteration, rank 0 (STAGES); only "iteration" if not instrumented
    bucket_bytes: list[int] = field(default_factory=list)  # one iteration's buckets, in the order DDP sent them
    bucket_modelled: list[float] = field(default_factory=list)  # the link seconds the hook added per bucket
    bucket_measured: list[float] = field(default_factory=list)  # link start -> future complete, per bucket
    wall: float = float("nan")  # seconds from the first measured iteration to the end of the last, rank 0

    @property
    def seconds_per_iteration(self) -> float:
        """The median over measured iterations (robust to one slow iteration: a page fault, a timer tick)."""
        return float(np.median(self.times["iteration"]))


def _model(spec: RunSpec, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return models.build(spec.model, spec.width) if isinstance(spec.model, str) else spec.model()


def _device() -> torch.device:
    """``cuda:LOCAL_RANK`` in an NCCL group (one GPU per process), else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def _batches(spec: RunSpec, rank: int, world: int, data_root: Path | None, seed: int):
    """An iterator of (inputs, targets): synthetic tensors made beforehand, or a DataLoader over this rank's files."""
    count = spec.warmup + spec.iterations
    if spec.run in ("RUN0", "RUN1"):
        g = torch.Generator().manual_seed(seed * 1000 + rank)
        name = spec.model if isinstance(spec.model, str) else "image"
        made = [models.synthetic_batch(name, spec.batch_size, g) for _ in range(min(count, 4))]
        return (made[i % len(made)] for i in range(count))
    dataset = data.ImageFiles(data_root, seed=seed)
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))
    shard = order[rank::world][: count * spec.batch_size].tolist()
    if len(shard) < count * spec.batch_size:
        raise ValueError(f"{count} iterations of batch {spec.batch_size} on {world} processes need "
                         f"{count * spec.batch_size * world} images; the folder has {len(dataset)} (raise images)")
    files = [dataset.path(i) for i in shard]
    if spec.run == "RUN2":
        data.drop_from_page_cache(files)
    else:
        data.warm_page_cache(files)
    return iter(torch.utils.data.DataLoader(dataset, batch_size=spec.batch_size, sampler=shard,
                                            num_workers=spec.loader_workers))


def _run(spec: RunSpec, rank: int, world: int, data_root: Path | None, seed: int) -> dict:
    device = _device()
    model = _model(spec, seed).to(device)
    name = spec.model if isinstance(spec.model, str) else "image"
    state = None
    if spec.distributed and world > 1:
        model = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None,
                                        bucket_cap_mb=spec.bucket_cap_mb, forward_sync_buffers=False)
        if spec.emulate:
            state = LinkState(spec.cluster, log=spec.instrument)
            model.register_comm_hook(state, emulated_allreduce_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = _batches(spec, rank, world, data_root, seed)
    if world > 1:
        dist.barrier()  # start together
    rows, buckets = [], None
    wall = clock(device)
    for i in range(spec.warmup + spec.iterations):
        if i == spec.warmup:
            wall = clock(device)
        if not spec.instrument:
            x, y = (t.to(device) for t in next(batches))
            models.loss_fn(name, model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            continue
        if state is not None:
            state.records = []
        t0 = clock(device)
        x, y = (t.to(device) for t in next(batches))
        t1 = clock(device)
        loss = models.loss_fn(name, model(x), y)
        t2 = clock(device)
        loss.backward()
        t3 = clock(device)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t4 = clock(device)
        exposed = busy = 0.0
        if state is not None and state.records:
            exposed = t3 - max(r.called for r in state.records)
            busy = sum(r.done - r.link_start for r in state.records)
            buckets = state.records
        if i >= spec.warmup:
            rows.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, exposed, busy))
    wall = clock(device) - wall
    if world > 1:
        dist.barrier()  # the next run starts with every rank done
    if not spec.instrument:
        return {"times": {"iteration": np.full(spec.iterations, wall / spec.iterations)}, "wall": wall}
    times = dict(zip(STAGES, np.array(rows).T))
    out = {"times": times, "wall": wall}
    if buckets:
        out.update(bucket_bytes=[r.nbytes for r in buckets], bucket_modelled=[r.modelled for r in buckets],
                   bucket_measured=[r.done - r.link_start for r in buckets])
    return out


def _worker(rank: int, world: int, specs: list[RunSpec], data_root: Path | None, seed: int) -> list[dict]:
    return [_run(spec, rank, world, data_root, seed) for spec in specs]


def profile(specs: list[RunSpec], processes: int = 2, seed: int = 0, timeout: float = 600.0,
            stored_size: int = 56, images: int = 10_000, backend: str = "gloo",
            data_root: Path | None = None) -> list[RunResult]:
    """Run ``specs`` in order on ``processes`` DDP workers; rank 0's timings, one :class:`RunResult` per spec.

    A worker that raises fails the whole call with its traceback (:class:`mlsysrepro.core.dist.WorkerError`),
    one that hangs with :class:`TimeoutError` after ``timeout`` seconds; no process is left behind. RUN2 and RUN3
    read ``data_root``, a folder laid out as :class:`.data.ImageFiles` reads it (``00000.png`` ... and
    ``labels.npy``), by default the first ``images`` MNIST images stored as ``stored_size``-pixel PNG files
    (:func:`.data.image_folder`). ``backend="nccl"`` runs one GPU per process (on a GPU machine; the paper's setting).
    """
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    needs_files = any(s.run in ("RUN2", "RUN3") for s in specs)
    if needs_files and data_root is None:
        data_root = data.image_folder(stored_size, images)
    raw = launch(_worker, processes, args=(list(specs), data_root, seed), timeout=timeout, backend=backend)[0]
    return [RunResult(spec, **r) for spec, r in zip(specs, raw)]


def main(argv: list[str] | None = None) -> None:
    """Profile real machines under ``torchrun`` (the paper scale): RUN0-RUN3 of one model with plain DDP on the
    real interconnect and network, one process per GPU (``--backend nccl``) or per CPU worker (``gloo``)."""
    parser = argparse.ArgumentParser(description=main.__doc__.split("(")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--runs", default="RUN0,RUN1,RUN2,RUN3", help="comma-separated, from " + ", ".join(RUNS))
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--loader-workers", type=int, default=4)
    parser.add_argument("--stored-size", type=int, default=112)
    parser.add_argument("--backend", default="nccl", choices=("gloo", "nccl"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="rank 0 writes the seconds per iteration here (JSON)")
    args = parser.parse_args(argv)
    rank, world = init_from_env(backend=args.backend)
    per_machine = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    cluster = EmulatedCluster(max(1, world // per_machine), per_machine)
    specs = [RunSpec(run, args.model, args.batch_size, cluster, args.iterations, args.warmup, label=run,
                     width=args.width, bucket_cap_mb=args.bucket_cap_mb, loader_workers=args.loader_workers,
                     emulate=False) for run in args.runs.split(",")]
    data_root = None
    if any(s.run in ("RUN2", "RUN3") for s in specs):
        if rank == 0:  # one process writes the image folder; the others wait for it
            data.image_folder(args.stored_size)
        dist.barrier()
        data_root = data.image_folder(args.stored_size)
    results = _worker(rank, world, specs, data_root, args.seed)
    if rank == 0:
        summary = {s.run: {k: float(np.median(v)) for k, v in r["times"].items()} for s, r in zip(specs, results)}
        text = json.dumps(summary, indent=1, sort_keys=True)
        if args.out:
            Path(args.out).write_text(text)
        else:
            print(text)
    leave()


if __name__ == "__main__":
    main()
