"""Validation of the emulated network against a shaped real one (issue 8's optional check; root only).

    sudo .venv/bin/python benchmarks/ddl_link_validation.py [--rate-mbit 400] [--sizes-mb 1 4 16] [--repeats 5]

Two network namespaces joined by a veth pair whose egress is shaped by ``tc``'s token-bucket filter (``tbf``) to
``--rate-mbit``; one gloo process in each (``ip netns exec``) times all-reduces of each size across the pair. The
emulation's model for two machines of one worker is ``T(B) = 2 alpha + B / beta`` (:func:`mlsysrepro.ddl.links.
allreduce_seconds`); a least-squares line through the measured (bytes, seconds) gives the real link's alpha and
beta, and the script prints the fitted beta over the configured rate (1.0: the beta term of the model holds) and
each size's measured time over the model's with the configured rate and the fitted alpha.

``tc netem`` (a delay per packet, to check alpha against a known latency) is used when the kernel has it; many
containers lack the module, in which case only the bandwidth term is checked. Needs root (CAP_NET_ADMIN) and
iproute2; it removes its namespaces when it ends. Not a test, and not run by the notebook.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from mlsysrepro.ddl.links import Link, allreduce_seconds

NAMESPACES = ("ddlA", "ddlB")
ADDRESSES = ("10.77.0.1", "10.77.0.2")
DEVICES = ("vA", "vB")


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def set_up(rate_mbit: float, delay_ms: float) -> bool:
    """The two namespaces and the shaped veth pair; returns whether netem's delay could be added."""
    for ns in NAMESPACES:
        sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", DEVICES[0], "type", "veth", "peer", "name", DEVICES[1])
    delayed = True
    for ns, dev, addr in zip(NAMESPACES, DEVICES, ADDRESSES):
        sh("ip", "link", "set", dev, "netns", ns)
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        netem = sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay",
                   f"{delay_ms}ms", "rate", f"{rate_mbit}mbit", check=False)
        if netem.returncode != 0:
            delayed = False
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{rate_mbit}mbit",
               "burst", "64kb", "latency", "500ms")
    return delayed


def tear_down() -> None:
    for ns in NAMESPACES:
        sh("ip", "netns", "del", ns, check=False)


def worker(rank: int, sizes_mb: list[float], repeats: int) -> None:
    """One rank inside its namespace: time all-reduces of each size; rank 0 prints JSON."""
    import torch
    import torch.distributed as dist

    from mlsysrepro.core.dist import leave

    os.environ.update(MASTER_ADDR=ADDRESSES[0], MASTER_PORT="29533", GLOO_SOCKET_IFNAME=DEVICES[rank])
    dist.init_process_group("gloo", rank=rank, world_size=2)
    out = {}
    for mb in sizes_mb:
        buffer = torch.zeros(int(mb * 1e6 / 4))
        dist.all_reduce(buffer)  # warm the connection
        times = []
        for _ in range(repeats):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(buffer)
            times.append(time.perf_counter() - start)
        out[str(buffer.numel() * 4)] = float(np.median(times))
    if rank == 0:
        print(json.dumps(out))
    leave()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate-mbit", type=float, default=400.0)
    parser.add_argument("--delay-ms", type=float, default=2.0)
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        worker(args.rank, args.sizes_mb, args.repeats)
        return
    if os.geteuid() != 0:
        sys.exit("needs root (CAP_NET_ADMIN) to create network namespaces and shape them with tc")
    tear_down()
    try:
        delayed = set_up(args.rate_mbit, args.delay_ms)
        command = [sys.executable, os.path.abspath(__file__), "--sizes-mb", *map(str, args.sizes_mb),
                   "--repeats", str(args.repeats), "--rank"]
        procs = [subprocess.Popen(["ip", "netns", "exec", ns, *command, str(rank)], stdout=subprocess.PIPE, text=True)
                 for rank, ns in enumerate(NAMESPACES)]
        output, _ = procs[0].communicate(timeout=600)
        procs[1].wait(timeout=60)
    finally:
        tear_down()
    measured = {int(k): v for k, v in json.loads(output).items()}
    nbytes = np.array(sorted(measured), dtype=float)
    seconds = np.array([measured[int(b)] for b in nbytes])
    slope, intercept = np.polyfit(nbytes, seconds, 1)
    beta = args.rate_mbit * 1e6 / 8
    alpha = intercept / 2  # the model has 2 (M - 1) = 2 steps of alpha for two machines
    shaped = Link("shaped", max(alpha, 0.0), beta, "this script's tc-shaped veth pair")
    print(f"tc shaping: {'netem delay ' + str(args.delay_ms) + ' ms + ' if delayed else 'tbf (no netem), '}"
          f"rate {args.rate_mbit:g} Mbit/s; two gloo processes in two namespaces")
    print(f"fitted beta / configured rate: {1 / slope / beta:.3f}")
    print(f"fitted alpha per step: {alpha * 1e3:.3f} ms" if alpha > 0 else
          "fitted alpha: below the noise (the intercept is negative); the model uses alpha = 0")
    for b, s in zip(nbytes, seconds):
        model = allreduce_seconds(b, 2, 1, None, shaped)
        print(f"{b / 1e6:8.2f} MB: measured {s * 1e3:9.2f} ms, model {model * 1e3:9.2f} ms, ratio {s / model:.3f}")


if __name__ == "__main__":
    main()
