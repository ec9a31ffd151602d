"""Benchmark of the GNN samplers (MVS-GNN issue): ratios against baselines run in this same process.

    .venv/bin/python benchmarks/gnn_samplers.py [--graph tolokers] [--batch 512] [--repeats 20]

1. Vectorised GraphSAGE sampling (``NodeWise.build``) against a naive reference that loops over
   the nodes in Python (the way a first implementation would), same graph and seeds, in both modes: without
   replacement (the default, PyG's ``NeighborLoader`` semantics) and with replacement. PyG's own sampler needs
   pyg-lib, which does not install here; the script says whether it loaded.
2. MVS-GNN's cost per iteration, its checkpoint amortised over K steps, against GraphSAGE's at
   batch 512 on a 2-layer GCN: the whole iteration (sampling + forward + backward + Adam), and
   the sampler's share alone (MVS: sampling + checkpoint; GraphSAGE: sampling). Target: within 2x.

Needs the graph in the data registry (set MLSYSREPRO_DATA_MIRROR offline). Not a test: timings
depend on the machine; the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import random

import torch

from mlsysrepro.core import resolve
from mlsysrepro.core.timing import interleaved, ratios
from mlsysrepro.gnn.batch import Batch, sparse_block
from mlsysrepro.gnn.datasets import load_graph
from mlsysrepro.gnn.models import GNN
from mlsysrepro.gnn.samplers import NodeWise
from mlsysrepro.gnn.training import train
from mlsysrepro.papers import mvs_gnn


def naive_node_wise(graph, seeds: torch.Tensor, num_layers: int, fanout: int, rng: random.Random,
                    replace: bool) -> Batch:
    """The reference: per-node Python loops over CSR rows (what NodeWise replaces)."""
    indptr, indices, values = graph.indptr.tolist(), graph.indices.tolist(), graph.values.tolist()
    src_ids, num_dst, blocks, dst = [], [], [], seeds.tolist()
    for _ in range(num_layers):
        position = {node: i for i, node in enumerate(dst)}
        src, rows, cols, vals = list(dst), [], [], []
        for i, node in enumerate(dst):
            start, end = indptr[node], indptr[node + 1]
            taken = fanout if replace else min(fanout, end - start)
            drawn = ([rng.randrange(start, end) for _ in range(fanout)] if replace
                     else sorted(rng.sample(range(start, end), taken)))
            for pos in drawn:
                neighbour = indices[pos]
                if neighbour not in position:
                    position[neighbour] = len(src)
                    src.append(neighbour)
                rows.append(i), cols.append(position[neighbour]), vals.append(values[pos] * (end - start) / taken)
        block = sparse_block(torch.tensor(rows), torch.tensor(cols), torch.tensor(vals), (len(dst), len(src)))
        src_ids.append(torch.tensor(src)), num_dst.append(len(dst)), blocks.append(block)
        dst = src
    return Batch(src_ids[::-1], num_dst[::-1], blocks[::-1], torch.full((seeds.numel(),), 1.0 / seeds.numel()))


def per_iteration(data, name: str, settings, iterations: int) -> tuple[float, float]:
    """Seconds per iteration: (whole iteration, sampler's share = sampling + checkpoint)."""
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = GNN(data.x.shape[1], settings.hidden, data.num_classes, 2, "gcn", settings.dropout)
    sampler = mvs_gnn.make_sampler(name, data, 512, 2, settings, generator)
    log = train(model, data, sampler, iterations, generator, settings.lr, log_every=iterations + 1, desc=name)
    sampler_share = log.time_sample + log.time_refresh
    return (sampler_share + log.time_train) / iterations, sampler_share / iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="tolokers")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    data = load_graph(args.graph)
    settings = resolve("mvs_gnn", mvs_gnn.PRESETS, {"scale": "default"})
    generator = torch.Generator().manual_seed(0)
    seeds = data.train_idx[torch.randperm(data.train_idx.numel(), generator=generator)[: args.batch]]
    weights = torch.full((args.batch,), 1.0 / args.batch)
    rng = random.Random(0)
    try:
        import pyg_lib  # noqa: F401
        print("pyg-lib loaded (time torch_geometric.loader.NeighborLoader beside these)")
    except ImportError:
        print("PyG's sampler: pyg-lib is not installed here, so only the naive loop is timed")
    print(f"{args.graph}: {data.num_nodes} nodes, {data.graph.num_edges} entries, batch {args.batch}, "
          f"fan-out {settings.fanout}, 2 layers")
    for replace in (False, True):
        fast = NodeWise(data.graph, 2, settings.fanout, replace=replace)
        timed = interleaved({"naive": lambda: naive_node_wise(data.graph, seeds, 2, settings.fanout, rng, replace),
                             "vectorised": lambda: fast.build(seeds, weights, generator)}, max(1, args.repeats // 4))
        speedup = ratios(timed, "naive")["vectorised"]
        low, high = speedup.interval
        mode = "with replacement   " if replace else "without replacement"
        print(f"GraphSAGE sampling, {mode}: vectorised {1e3 * timed['vectorised'].median:8.2f} ms/batch, naive "
              f"loop {1e3 * timed['naive'].median:8.2f} ms/batch, speed-up x{speedup.median:.1f} (95 % interval "
              f"{low:.1f}-{high:.1f}, {len(speedup.samples)} paired rounds)")
    iterations = 5 * settings.inner_steps  # five full checkpoint periods
    sage, sage_sampler = per_iteration(data, "GraphSAGE", settings, iterations)
    mvs, mvs_sampler = per_iteration(data, "MVS-GNN", settings, iterations)
    print(f"per iteration, batch {512}, K={settings.inner_steps} (checkpoint amortised):")
    for what, a, b in (("whole iteration", sage, mvs), ("sampler's share", sage_sampler, mvs_sampler)):
        verdict = "within" if b <= 2 * a else "NOT within"
        print(f"  {what:16s} GraphSAGE {1e3 * a:7.2f} ms   MVS-GNN {1e3 * b:7.2f} ms   ratio {b / a:.2f}"
              f" ({verdict} the 2x target)")


if __name__ == "__main__":
    main()
