"""Benchmark of the cluster simulator (issue 6): wall time and events per second of every policy.

    .venv/bin/python benchmarks/dally_simulator.py [--jobs 10000] [--racks 8] [--machines 16] [--load-factor 1.5]
                                                   [--overloaded 100000] [--growth 1000 10000 100000 1000000]
                                                   [--repeats 1]

1. The Gavel-generated Philly trace (``philly_gavelgen_10000``, cut or tiled to ``--jobs``, arrivals compressed
   by ``--load-factor`` so that jobs queue) on a cluster of ``racks x machines x 8`` GPUs (default 1,024),
   under every policy: seconds, events, events per second and the time relative to FIFO (the median of the
   per-round ratios), run in this process in interleaved rounds (:func:`mlsysrepro.core.timing.interleaved`).
   The issue's target: under 60 s each for 10^4 jobs on about 1,000 GPUs.
2. Under load: ``--overloaded`` jobs at the same ``--load-factor`` (offered load about 1.1: the queue grows for
   the whole run) under FIFO, Tiresias and Dally, in CPU seconds. Issue 38's target: under 30 s each for 10^5.
3. Growth: FIFO and Dally at each ``--growth`` size (the trace tiled, the cluster sized for load 0.9): the cost
   curve, jobs against seconds, with the seconds per 1,000 jobs; near-constant means near-linear growth. The 10^6
   runs take about 14 minutes on 2 cores (drop 1000000 from ``--growth`` for a quick look).

Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from mlsysrepro.cluster import traces
from mlsysrepro.cluster.policies import POLICIES, make_policy
from mlsysrepro.cluster.simulator import simulate
from mlsysrepro.cluster.topology import Topology
from mlsysrepro.core.timing import interleaved, ratios
from mlsysrepro.papers.dally import cluster_for, lease_for, tiled


def timed(trace, topology, policies, repeats: int) -> pd.DataFrame:
    """Each policy's simulation of ``trace`` timed in interleaved rounds; seconds, events and the ratio to FIFO."""
    lease = lease_for(trace, 0.05)
    runs = {}

    def simulation(policy):
        def run():
            runs[policy] = simulate(trace, topology, make_policy(policy, las_threshold=6 * lease), lease, 0.05 * lease)
        return run

    timings = interleaved({policy: simulation(policy) for policy in policies}, repeats, warmup=0)
    versus = ratios(timings, policies[0])
    return pd.DataFrame([dict(policy=p, jobs=len(trace), gpus=topology.gpus, seconds=timings[p].median,
                              events=runs[p].events, events_per_s=runs[p].events / timings[p].median,
                              preemptions=int(runs[p].preemptions.sum()), vs_first=1 / versus[p].median)
                         for p in policies])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--racks", type=int, default=8)
    parser.add_argument("--machines", type=int, default=16)
    parser.add_argument("--load-factor", type=float, default=1.5)
    parser.add_argument("--overloaded", type=int, default=100_000)
    parser.add_argument("--growth", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds per measurement")
    args = parser.parse_args()
    topology = Topology(args.racks, args.machines, 8)
    source = traces.load("philly_gavelgen_10000", topology)
    trace = tiled(source, args.jobs).with_arrivals_scaled(1 / args.load_factor)
    print(f"{len(trace)} jobs on {topology.gpus} GPUs, offered load {trace.offered_load(topology.gpus):.2f}")
    table = timed(trace, topology, list(POLICIES), args.repeats).rename(columns={"vs_first": "vs_fifo"})
    print(table.set_index("policy").round(2).to_string())

    loaded = tiled(source, args.overloaded).with_arrivals_scaled(1 / args.load_factor)
    lease = lease_for(loaded, 0.05)
    print(f"\nunder load: {len(loaded)} jobs on {topology.gpus} GPUs, offered load "
          f"{loaded.offered_load(topology.gpus):.2f} (CPU seconds, one run each)")
    for policy in ("fifo", "tiresias", "dally"):
        start = time.process_time()
        run = simulate(loaded, topology, make_policy(policy, las_threshold=6 * lease), lease, 0.05 * lease)
        print(f"  {policy:9s} {time.process_time() - start:7.1f} CPU-s, {run.events:,} events")

    frames = []
    for jobs in args.growth:
        jobs_trace = tiled(source, jobs)
        frames.append(timed(jobs_trace, cluster_for(jobs_trace, 0.9), ["fifo", "dally"], args.repeats))
    growth = pd.concat(frames, ignore_index=True).drop(columns="vs_first")
    growth["seconds_per_1000_jobs"] = growth.seconds / growth.jobs * 1000
    print(growth.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
