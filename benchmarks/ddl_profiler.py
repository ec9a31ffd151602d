"""Benchmark of the DDL stall profiler (issue 8): what its timing hooks cost against an uninstrumented run.

    .venv/bin/python benchmarks/ddl_profiler.py [--model resnet18] [--width 16] [--batch 32] [--iterations 20]
                                                [--repeats 5]

The same configuration runs instrumented (per-iteration clocks around data, forward, backward and step, and
the hook's per-bucket log) and uninstrumented (one clock around the whole loop, the hook without its log),
alternately, ``--repeats`` times each, in one launch of 2 gloo processes (one thread each). Two
configurations: RUN0 (each process alone: clocks only) and RUN1 on an emulated p3.16xlarge (DDP, the hook on
its emulated NVLink). Each instrumented run is paired with the uninstrumented run beside it (which goes
first alternates), so the machine's slow drift cancels in the pair; the script prints the median wall times
and the median of the paired ratios instrumented / uninstrumented - 1 with its 95 % interval
(:mod:`mlsysrepro.core.timing`). The issue's target: overhead under 5 %.

Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse

import pandas as pd
import torch

from mlsysrepro.core.timing import Timing, ratios
from mlsysrepro.ddl.emulation import EmulatedCluster
from mlsysrepro.ddl.profiler import RunSpec, profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    configurations = {"RUN0 (alone)": ("RUN0", EmulatedCluster()),
                      "RUN1 (p3.16xlarge, dilation 150)": ("RUN1", EmulatedCluster(1, 8, "nvlink2", None, 150.0))}
    specs, keys = [], []
    for repeat in range(args.repeats):
        for name, (run, cluster) in configurations.items():
            for instrument in ((True, False) if repeat % 2 == 0 else (False, True)):  # neither always goes first
                specs.append(RunSpec(run, args.model, args.batch, cluster, args.iterations, warmup=2,
                                     width=args.width, bucket_cap_mb=1.5, instrument=instrument))
                keys.append((name, instrument))
    results = profile(specs, processes=2)
    walls = pd.DataFrame([dict(configuration=k[0], instrumented=k[1], wall=r.wall) for k, r in zip(keys, results)])
    rows = []
    for name, group in walls.groupby("configuration", sort=False):
        timings = {"on": Timing(tuple(group[group.instrumented].wall)),
                   "off": Timing(tuple(group[~group.instrumented].wall))}
        slowdown = ratios(timings, "on")["off"]  # per repeat: instrumented / uninstrumented seconds
        low, high = slowdown.interval
        rows.append({"configuration": name, "uninstrumented s": timings["off"].median,
                     "instrumented s": timings["on"].median, "overhead (median pair)": slowdown.median - 1,
                     "95 % low": low - 1, "95 % high": high - 1})
    table = pd.DataFrame(rows).set_index("configuration")
    print(f"torch {torch.__version__}, 2 gloo processes x 1 intra-op thread; {args.model} width {args.width}, "
          f"batch {args.batch}, {args.iterations} iterations x {args.repeats} repeats")
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    print(f"largest median overhead: {100 * table['overhead (median pair)'].max():.2f} % (target: under 5 %)")


if __name__ == "__main__":
    main()
