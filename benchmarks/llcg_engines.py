"""Benchmark of LLCG's two engines (LLCG issue): rounds per second, serial against distributed, same process.

    .venv/bin/python benchmarks/llcg_engines.py [--graph tolokers] [--parts 8] [--rounds 10]

1. One LLCG round on the graph with P machines (K = 8 local steps, S = 2 correction steps): the serial
   engine (every machine in this process, one after the other) against the distributed engine (P + 1
   gloo processes on this host). The distributed run includes process start-up once; the per-round
   figure is the server's wall time per round, start-up excluded. The ratio distributed / serial is
   what to compare: on a host with fewer cores than processes the machines time-slice, so the
   distributed engine cannot be faster here; on a cluster it would run the P machines at once.
2. The exact-first-layer GCN (``P X`` stored once) against sampling the first layer too, serial.

Needs the graph in the data registry (set MLSYSREPRO_DATA_MIRROR offline). Not a test.
"""

from __future__ import annotations

import argparse

import torch

from mlsysrepro.core.timing import clock
from mlsysrepro.gnn.datasets import load_graph
from mlsysrepro.gnn.llcg import LLCGConfig, run_serial
from mlsysrepro.gnn.llcg_dist import run_distributed
from mlsysrepro.gnn.partition import partition_graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graph", default="tolokers")
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    data = load_graph(args.graph)
    parting = partition_graph(data, args.parts, "metis")
    cfg = LLCGConfig(method="llcg", rounds=args.rounds, local_steps=8, server_steps=2)

    serial_log, _ = run_serial(data, parting, cfg)
    serial = 1 / serial_log.seconds[1:].mean()
    start = clock()
    dist_log, _ = run_distributed(data, parting, cfg)
    total = clock() - start
    distributed = 1 / dist_log.seconds[1:].mean()
    print(f"{args.graph}, P = {args.parts}, {torch.get_num_threads()} threads in this process")
    print(f"  serial      {serial:6.2f} rounds/s")
    print(f"  distributed {distributed:6.2f} rounds/s  ({total:.1f} s with start-up for {args.rounds} rounds)")
    print(f"  ratio distributed / serial: {distributed / serial:.2f}")

    sampled_log, _ = run_serial(data, parting, LLCGConfig(**{**cfg.to_dict(), "exact_first_layer": False}))
    sampled = 1 / sampled_log.seconds[1:].mean()
    print(f"  exact first layer {serial:6.2f} rounds/s vs sampled first layer {sampled:6.2f}: "
          f"ratio {serial / sampled:.2f}")


if __name__ == "__main__":
    main()
