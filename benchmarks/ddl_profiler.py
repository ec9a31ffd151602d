"""Benchmark of the DDL stall profiler (issue 8): what its timing hooks cost against an uninstrumented run.

    .venv/bin/python benchmarks/ddl_profiler.py [--model resnet18] [--width 16] [--batch 32] [--iterations 20]
                                                [--repeats 5]

The same configuration runs instrumented (per-iteration clocks around data, forward, backward and step, and
the hook's per-bucket log) and uninstrumented (one clock around the whole loop, the hook without its log),
alternately, ``--repeats`` times each, in one launch of 2 gloo processes (one thread each). Two
configurations: RUN0 (each process alone: clocks only) and RUN1 on an emulated p3.16xlarge (DDP, the hook on
its emulated NVLink). It prints the median wall time of each and the overhead ratio instrumented /
uninstrumented. The issue's target: overhead under 5 %.

Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import torch

from mlsysrepro.ddl.emulation import EmulatedCluster
from mlsysrepro.ddl.profiler import RunSpec, profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    configurations = {"RUN0 (alone)": ("RUN0", EmulatedCluster()),
                      "RUN1 (p3.16xlarge, dilation 150)": ("RUN1", EmulatedCluster(1, 8, "nvlink2", None, 150.0))}
    specs, keys = [], []
    for _ in range(args.repeats):
        for name, (run, cluster) in configurations.items():
            for instrument in (True, False):
                specs.append(RunSpec(run, args.model, args.batch, cluster, args.iterations, warmup=2,
                                     width=args.width, bucket_cap_mb=1.5, instrument=instrument))
                keys.append((name, instrument))
    results = profile(specs, processes=2)
    walls = pd.DataFrame([dict(configuration=k[0], instrumented=k[1], wall=r.wall) for k, r in zip(keys, results)])
    table = walls.pivot_table(index="configuration", columns="instrumented", values="wall", aggfunc="median")
    table.columns = ["uninstrumented s", "instrumented s"]
    table["overhead"] = table["instrumented s"] / table["uninstrumented s"] - 1
    print(f"torch {torch.__version__}, 2 gloo processes x 1 intra-op thread; {args.model} width {args.width}, "
          f"batch {args.batch}, {args.iterations} iterations x {args.repeats} repeats (medians)")
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    print(f"largest overhead: {100 * np.max(table.overhead):.2f} % (target: under 5 %)")


if __name__ == "__main__":
    main()
