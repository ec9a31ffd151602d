"""Benchmark of the DLRM embedding stage on this CPU and of the L2 model (issue 25), with ratios against baselines
timed in the same process.

    .venv/bin/python benchmarks/dlrm_embedding.py [--tables 2] [--batch 2048] [--pooling 150] [--repeats 7]

1. **The embedding stage.** Per trace, seconds per batch of torch's ``F.embedding_bag`` (the baseline, the kernel
   the paper patches) and of the CPU analogues of the paper's optimisations (:mod:`mlsysrepro.recsys.stage`),
   with the speed-up over the baseline as the median of interleaved rounds' ratios. FBGEMM's table-batched
   embedding is the peer a production user would pick: it is timed where it loads, and the script prints why not
   otherwise.
2. **The L2 model.** One batch's rows of each trace through the A100 L2 model (:func:`mlsysrepro.recsys.l2.simulate`,
   vectorised over sets) against a per-access LRU in plain Python (an ``OrderedDict`` per set), the hit rates
   compared.

Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse
from collections import OrderedDict

import numpy as np
import torch

from mlsysrepro.core.timing import interleaved, machine, ratios
from mlsysrepro.recsys import traces
from mlsysrepro.recsys.gpu_model import A100_40GB
from mlsysrepro.recsys.l2 import row_hits
from mlsysrepro.recsys.stage import VARIANTS, fbgemm_status, make_weights, time_stage


def per_access_lru(rows: np.ndarray, sets: int, ways: int) -> np.ndarray:
    """The same cold LRU cache, one access at a time (the reference the vectorised simulator is timed against)."""
    cache = [OrderedDict() for _ in range(sets)]
    hits = np.zeros(rows.size, dtype=bool)
    for i, row in enumerate(rows.tolist()):
        lines = cache[row % sets]
        if row in lines:
            hits[i] = True
            lines.move_to_end(row)
        else:
            if len(lines) == ways:
                lines.popitem(last=False)
            lines[row] = None
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", type=int, default=2)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--pooling", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine())
    print(f"FBGEMM table-batched embedding: {fbgemm_status()}")
    weights = make_weights(args.tables, traces.TABLE_ROWS, 128, seed=0)
    print(f"\n1. Embedding stage, {args.tables} tables x 500K x 128, batch {args.batch}, pooling {args.pooling}, "
          "one thread (ms per batch; speed-up over torch's embedding_bag)")
    for name in traces.TRACES:
        ids = traces.load_trace(name)
        hot = traces.load_hot_rows("random") if name == "random" else traces.top_rows(ids, 60_000)
        timings = time_stage(weights, traces.batches(ids, args.batch, args.pooling, 1), torch.as_tensor(hot),
                             args.repeats)
        speedups = ratios(timings, "baseline")
        cells = ", ".join(f"{v} {timings[v].median * 1e3:.1f} ms ({speedups[v].median:.2f}x)" for v in VARIANTS)
        print(f"  {name:7s} {cells}")
    print("\n2. L2 model, one batch of each trace through the A100 L2 (40 MB, 16 ways), cold")
    cache = A100_40GB.l2
    sets = cache.sets // 4
    for name in traces.TRACES:
        rows = traces.batches(traces.load_trace(name), args.batch, args.pooling, 1)[0][0].numpy()
        timings = interleaved({"per-access loop": lambda: per_access_lru(rows, sets, cache.ways),
                               "vectorised over sets": lambda: row_hits(rows, 128, cache)}, 3)
        speedup = ratios(timings, "per-access loop")["vectorised over sets"]
        same = (per_access_lru(rows, sets, cache.ways) == row_hits(rows, 128, cache)).all()
        print(f"  {name:7s} {rows.size:,} row accesses: per-access loop {timings['per-access loop'].median:.3f} s, "
              f"vectorised {timings['vectorised over sets'].median:.3f} s ({speedup.median:.1f}x "
              f"[{speedup.interval[0]:.1f}, {speedup.interval[1]:.1f}]); same hits: {bool(same)}")

if __name__ == "__main__":
    main()
