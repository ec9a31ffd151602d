"""The profiler on real DDP processes: the hook's added delay, gradients equal to one process's, failure handling."""

import multiprocessing
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from mlsysrepro.core.dist import WorkerError, launch
from mlsysrepro.ddl import data, models
from mlsysrepro.ddl.emulation import EmulatedCluster, LinkState, emulated_allreduce_hook
from mlsysrepro.ddl.profiler import RunSpec, profile

CLUSTER = EmulatedCluster(2, 4, "nvlink2", "net10", dilation=2000.0)


def hooked_buckets(rank, world, cluster):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(6)])  # 6 x 66,048 bytes
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.1)
    state = LinkState(cluster)
    ddp.register_comm_hook(state, emulated_allreduce_hook)
    x = torch.randn(16, 128)
    for _ in range(3):  # DDP rebuilds its buckets after the first iteration
        state.records = []
        start = time.perf_counter()
        ddp(x).sum().backward()
        backward = time.perf_counter() - start
    return [(r.nbytes, r.called, r.link_start, r.modelled, r.reduced, r.done) for r in state.records], backward


def test_the_hook_adds_alpha_plus_bytes_over_beta_per_bucket_one_bucket_at_a_time():
    records, backward = launch(hooked_buckets, 2, args=(CLUSTER,), timeout=120)[0]
    assert len(records) >= 3
    for nbytes, called, link_start, modelled, reduced, done in records:
        assert modelled == pytest.approx(CLUSTER.allreduce_seconds(nbytes), rel=1e-12)
        assert modelled > 0.01  # long enough to measure
        if reduced <= link_start + modelled:  # the real all-reduce was quicker than the emulated link
            assert 0 <= done - (link_start + modelled) < 0.01
    for previous, bucket in zip(records, records[1:]):  # one link: a bucket waits for the one before it
        assert bucket[2] >= previous[2] + previous[3] - 1e-6
    assert backward >= sum(r[3] for r in records) - 1e-3


def ddp_gradients(rank, world, x, y):
    torch.manual_seed(0)
    model = models.build("nobn_resnet10", width=4).double()
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.01)
    ddp.register_comm_hook(LinkState(EmulatedCluster(1, 2, "nvlink2", None, dilation=10.0)), emulated_allreduce_hook)
    half = len(x) // world
    models.loss_fn("image", ddp(x[rank * half:(rank + 1) * half]), y[rank * half:(rank + 1) * half]).backward()
    return [p.grad for p in model.parameters()]


def test_two_worker_ddp_gradients_equal_one_process_on_the_concatenated_batch():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 1, 28, 28, generator=g, dtype=torch.float64)
    y = torch.randint(0, 10, (8,), generator=g)
    torch.manual_seed(0)
    model = models.build("nobn_resnet10", width=4).double()
    models.loss_fn("image", model(x), y).backward()
    for grads in launch(ddp_gradients, 2, args=(x, y), timeout=120):
        for p, grad in zip(model.parameters(), grads):
            torch.testing.assert_close(grad, p.grad, rtol=1e-10, atol=1e-12)


def test_runs_report_per_iteration_stages_and_the_emulated_communication():
    cluster = EmulatedCluster(2, 4, "nvlink2", "net10", dilation=3000.0)
    spec = dict(model="resnet10", batch_size=4, iterations=3, warmup=1, width=4, bucket_cap_mb=0.05)
    files = data.image_folder(28, count=64)
    run0, run1, run3 = profile([RunSpec("RUN0", **spec), RunSpec("RUN1", cluster=cluster, **spec),
                                RunSpec("RUN3", cluster=cluster, **spec)], data_root=files)
    for r in (run0, run1, run3):
        assert set(r.times) == {"data", "forward", "backward", "step", "iteration", "comm_exposed", "comm_busy"}
        assert all(len(v) == 3 for v in r.times.values())
        parts = r.times["data"] + r.times["forward"] + r.times["backward"] + r.times["step"]
        np.testing.assert_allclose(parts, r.times["iteration"], rtol=1e-3, atol=1e-4)
    assert run0.bucket_bytes == [] and run0.spec.samples_per_iteration == 4
    assert run1.spec.samples_per_iteration == 4 * 8
    modelled = sum(run1.bucket_modelled)
    assert modelled == pytest.approx(sum(cluster.allreduce_seconds(b) for b in run1.bucket_bytes))
    # the exposed communication is at most the link's busy time and the stall shows in the iteration time; exposed
    # also holds DDP's finishing of backward after the last bucket's future completes, which took 1.4 ms in a CI run
    # on 2 cores (0.735 s against 0.733 s busy), so 2 % of the busy time, not 1 ms
    assert (run1.times["comm_exposed"] <= 1.02 * run1.times["comm_busy"]).all()
    assert run1.seconds_per_iteration - run0.seconds_per_iteration > 0.5 * modelled
    # decoding real files takes longer than handing over tensors made beforehand
    assert np.median(run3.times["data"]) > 10 * np.median(run1.times["data"])


def raises_on_rank_one():
    if dist.get_rank() == 1:
        raise RuntimeError("GPU 1 fell off the bus")
    return models.build("resnet10", width=4)


def hangs_on_rank_one():
    if dist.get_rank() == 1:
        time.sleep(300)
    return models.build("resnet10", width=4)


def test_a_crashing_worker_ends_the_run_with_its_error_and_no_orphans():
    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"(?s)rank 1 failed.*GPU 1 fell off the bus"):
        profile([RunSpec("RUN1", raises_on_rank_one, 4, EmulatedCluster(1, 2, "nvlink2"), width=4)], timeout=120)
    assert time.monotonic() - start < 60
    assert multiprocessing.active_children() == []


def test_a_hanging_worker_ends_in_a_timeout_and_no_orphans():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="timeout of 10 s"):
        profile([RunSpec("RUN1", hangs_on_rank_one, 4, EmulatedCluster(1, 2, "nvlink2"), width=4)], timeout=10)
    assert time.monotonic() - start < 40
    assert multiprocessing.active_children() == []


def test_bad_specs_are_refused_with_the_allowed_values():
    with pytest.raises(ValueError, match=r"run must be one of \['RUN0', 'RUN1', 'RUN2', 'RUN3'\], got 'RUN4'"):
        RunSpec("RUN4", "resnet10", 4)
    with pytest.raises(ValueError, match="synthetic data only"):
        RunSpec("RUN2", "lstm", 4)
    with pytest.raises(ValueError, match="batch_size"):
        RunSpec("RUN1", "resnet10", 0)
    with pytest.raises(ValueError, match="processes"):
        profile([], processes=0)


def test_the_torchrun_entry_point_profiles_every_run(tmp_path):
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "stalls.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m",
                    "mlsysrepro.ddl.profiler", "--model", "resnet10", "--width", "4", "--batch-size", "4",
                    "--iterations", "2", "--warmup", "1", "--backend", "gloo", "--stored-size", "28",
                    "--loader-workers", "0", "--out", str(out)], check=True, timeout=180, env=env,
                   capture_output=True)
    summary = json.loads(out.read_text())
    assert sorted(summary) == ["RUN0", "RUN1", "RUN2", "RUN3"]
    assert summary["RUN2"]["data"] > summary["RUN1"]["data"]  # real files take longer than tensors in memory
    assert all(v["iteration"] > 0 for v in summary.values())
