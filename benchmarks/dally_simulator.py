"""Benchmark of the cluster simulator (issue 6): wall time and events per second of every policy.

    .venv/bin/python benchmarks/dally_simulator.py [--jobs 10000] [--racks 8] [--machines 16] [--load-factor 1.5]
                                                   [--growth 1000 10000 100000]

1. The Gavel-generated Philly trace (``philly_gavelgen_10000``, cut or tiled to ``--jobs``, arrivals compressed
   by ``--load-factor`` so that jobs queue) on a cluster of ``racks x machines x 8`` GPUs (default 1,024),
   under every policy: seconds, events, events per second and the time relative to FIFO, run in this process
   one after another. The issue's target: under 60 s each for 10^4 jobs on about 1,000 GPUs.
2. Growth: FIFO and Dally at each ``--growth`` size (the trace tiled, the cluster sized for load 0.9), with the
   seconds per 1,000 jobs; near-constant means near-linear growth.

Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from mlsysrepro.cluster import experiments as E
from mlsysrepro.cluster import traces
from mlsysrepro.cluster.policies import POLICIES, make_policy
from mlsysrepro.cluster.simulator import simulate
from mlsysrepro.cluster.topology import Topology


def timed(trace, topology, policy: str) -> dict:
    lease = E.lease_for(trace, 0.05)
    begin = time.perf_counter()
    run = simulate(trace, topology, make_policy(policy, las_threshold=6 * lease), lease, 0.05 * lease)
    seconds = time.perf_counter() - begin
    return dict(policy=policy, jobs=len(trace), gpus=topology.gpus, seconds=seconds, events=run.events,
                events_per_s=run.events / seconds, preemptions=int(run.preemptions.sum()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--racks", type=int, default=8)
    parser.add_argument("--machines", type=int, default=16)
    parser.add_argument("--load-factor", type=float, default=1.5)
    parser.add_argument("--growth", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    topology = Topology(args.racks, args.machines, 8)
    source = traces.load("philly_gavelgen_10000", topology)
    trace = E.tiled(source, args.jobs).with_arrivals_scaled(1 / args.load_factor)
    print(f"{len(trace)} jobs on {topology.gpus} GPUs, offered load {trace.offered_load(topology.gpus):.2f}")
    table = pd.DataFrame([timed(trace, topology, policy) for policy in POLICIES]).set_index("policy")
    table["vs_fifo"] = table.seconds / table.loc["fifo", "seconds"]
    print(table.round(2).to_string())

    rows = []
    for jobs in args.growth:
        tiled = E.tiled(source, jobs)
        cluster = E.cluster_for(tiled, 0.9)
        rows += [timed(tiled, cluster, policy) for policy in ("fifo", "dally")]
    growth = pd.DataFrame(rows)
    growth["seconds_per_1000_jobs"] = growth.seconds / growth.jobs * 1000
    print(growth.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
