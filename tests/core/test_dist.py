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


def rank_0_is_killed(rank, world_size):
    import os
    import signal

    dist.barrier()
    if rank == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    t = torch.ones(1)
    dist.all_reduce(t)  # rank 0 is gone: the survivors fail to reach it
    return rank


def test_the_rank_that_died_first_is_blamed_with_its_signal():
    with pytest.raises(WorkerError, match=r"^rank 0 died with signal SIGKILL"):
        launch(rank_0_is_killed, 3, timeout=60)


def sleeps_and_writes_its_pid(rank, world_size, folder):
    import os
    from pathlib import Path

    Path(folder, f"rank{rank}").write_text(str(os.getpid()))
    time.sleep(120)


def a_task_that_sleeps(folder):
    import os
    from pathlib import Path

    Path(folder, f"task{os.getpid()}").write_text(str(os.getpid()))
    time.sleep(120)


def _alive(pid: int) -> bool:
    from pathlib import Path

    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(")")[-1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


LAUNCHERS = {
    "dist.launch": "from tests.core.test_dist import sleeps_and_writes_its_pid as work\n"
                   "from mlsysrepro.core.dist import launch\n"
                   "launch(work, 2, args=({folder!r},), timeout=300)\n",
    "torchrun": "from torch.distributed.run import main\n"
                "main(['--standalone', '--nproc-per-node', '2', '-m', 'tests.core.torchrun_rank', {folder!r}])\n",
    "TaskRunner": "from tests.core.test_dist import a_task_that_sleeps as work\n"
                  "from mlsysrepro.core.tasks import TaskRunner\n"
                  "TaskRunner(workers=2).map(work, [{folder!r}] * 2)\n",
}


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="parent-death signals are Linux's")
@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_ranks_and_workers_die_when_their_launcher_is_killed(launcher, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from mlsysrepro.core import paths

    script = "if __name__ == '__main__':\n" + "".join(
        "    " + line + "\n" for line in LAUNCHERS[launcher].format(folder=str(tmp_path)).splitlines())
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=paths.REPO_ROOT)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    children = [int(p.read_text()) for p in tmp_path.iterdir()]
    assert len(children) == 2 and all(_alive(pid) for pid in children)
    os.kill(parent.pid, signal.SIGKILL)  # no cleanup code runs in the launcher
    parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in children), "a child outlived its launcher"


def listening_addresses(rank, world_size):
    """The local addresses this process listens on (from /proc), after a collective has set up every connection."""
    import os
    from pathlib import Path

    t = torch.ones(1)
    dist.all_reduce(t)
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the descriptor listdir itself used
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN, and ours
                found.append(fields[1].split(":")[0])
    return found


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc/net")
def test_every_socket_a_run_listens_on_is_loopback():
    addresses = [a for per_rank in launch(listening_addresses, 2, timeout=60) for a in per_rank]
    assert addresses and set(addresses) <= {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1
