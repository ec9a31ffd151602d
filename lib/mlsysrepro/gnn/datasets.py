"""Node-classification graphs through the data registry, plus a seeded synthetic generator.

``load_graph(name)`` returns a :class:`GraphData` for ``cora`` and ``citeseer`` (Planetoid,
``split="full"`` as in the MVS-GNN and LLCG code: every node outside validation and test
trains), ``tolokers`` and ``minesweeper`` (HeterophilousGraphDataset, one of its ten fixed
50/25/25 % splits, scored by ROC-AUC), and ``csbm`` (a contextual stochastic block model,
:func:`contextual_sbm`, for graphs up to 10^6 nodes). The papers' large graphs (Reddit, PPI,
PPI-large, Yelp) load with :func:`load_graphsaint` once they are added to the data registry.

The raw files are verified by the registry; the files PyG derives from them (``processed/``) are verified too
(:func:`verified_pyg`): their SHA-256s are recorded when PyG builds them and checked on every load, and a
mismatch rebuilds them from the raw files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from ..core import DatasetError, fetch
from ..core.data import load_registry
from .graph import CSRGraph

GRAPHS = ("cora", "citeseer", "tolokers", "minesweeper")

#: The MVS-GNN and LLCG papers' large graphs: not obtainable here, so not in the registry.
PAPER_GRAPHS = {
    "reddit": "Reddit (232,965 nodes, 11.6 M edges; GraphSAGE / GraphSAINT release, ~1.3 GB)",
    "ppi": "PPI (14,755 nodes, 225,270 edges, 121 labels; GraphSAGE release)",
    "ppi_large": "PPI-large (56,944 nodes, 2.8 M edges; GraphSAINT release)",
    "yelp": "Yelp (716,847 nodes, 7.0 M edges, 100 labels; GraphSAINT release)",
    "flickr": "Flickr (89,250 nodes, 899,756 edges, 7 classes; GraphSAINT release)",
}

#: Synthetic stand-ins shaped like a paper's graph (:func:`contextual_sbm` with its size, mean degree, feature width
#: and output width), for what depends on shape alone, such as a sampler's time per iteration. ``ppi_like``: PPI's
#: 14,755 nodes, 225,270 undirected edges (a mean degree of 2 x 225,270 / 14,755 = 30.5), 50 features and 121
#: outputs (PPI's labels are multi-label; here one class of 121 per node, the same last-layer width). The degrees
#: are near-Poisson, not PPI's heavy tail.
SYNTHETIC_GRAPHS = {
    "ppi_like": dict(num_nodes=14_755, avg_degree=2 * 225_270 / 14_755, num_features=50, num_classes=121),
}


@dataclass(frozen=True)
class GraphData:
    name: str
    x: torch.Tensor  # (N, F) float32
    y: torch.Tensor  # (N,) int64 class ids, or (N, C) 0/1 float for multi-label graphs
    graph: CSRGraph  # row-normalised D^-1 (A + I)
    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor
    num_classes: int
    metric: str  # "f1_micro" or "roc_auc"

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]


def _from_pyg(name: str, data, train, val, test, metric: str) -> GraphData:
    n = data.num_nodes
    graph = CSRGraph.from_edge_index(data.edge_index, n)
    idx = [m.nonzero().view(-1) for m in (train, val, test)]
    return GraphData(name, data.x.float(), data.y.long(), graph, *idx, int(data.y.max()) + 1, metric)


#: The record of a PyG ``processed/`` folder's files and their SHA-256s, written inside it.
PROCESSED_RECORD = "SHA256SUMS.json"


def _processed_hashes(folder: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.iterdir()) if path.is_file() and path.name != PROCESSED_RECORD}


def _recorded(folder: Path) -> bool:
    """Whether a ``processed/`` folder's files match the SHA-256s recorded when they were built."""
    record = folder / PROCESSED_RECORD
    return record.exists() and json.loads(record.read_text()) == _processed_hashes(folder)


def verified_pyg(dataset_class, root: Path, *args, **kwargs):
    """``dataset_class(str(root), *args, **kwargs)`` (a PyG dataset) whose ``processed/`` files match the SHA-256s
    recorded when they were built. The check comes before PyG loads anything: every ``processed/`` folder under
    ``root`` whose files do not match, or that has no record (a run killed while PyG processed), is deleted, so PyG
    builds it again from the verified raw files rather than ``torch.load``-ing a truncated or altered file; the new
    record is written after the build."""
    for folder in sorted(Path(root).rglob("processed")):
        if folder.is_dir() and not _recorded(folder):
            shutil.rmtree(folder)
    dataset = dataset_class(str(root), *args, **kwargs)
    folder = Path(dataset.processed_dir)
    record = folder / PROCESSED_RECORD
    if not record.exists():
        tmp = record.with_suffix(".tmp")
        tmp.write_text(json.dumps(_processed_hashes(folder), indent=1, sort_keys=True) + "\n")
        os.replace(tmp, record)
    return dataset


def load_graph(name: str, split: int = 0) -> GraphData:
    """Load a registered graph (``GRAPHS``) or a synthetic stand-in (``SYNTHETIC_GRAPHS``); ``split`` picks one of the heterophilous graphs' ten splits."""
    if name in ("cora", "citeseer"):
        from torch_geometric.datasets import Planetoid

        data = verified_pyg(Planetoid, fetch(name), "Cora" if name == "cora" else "CiteSeer", split="full")[0]
        return _from_pyg(name, data, data.train_mask, data.val_mask, data.test_mask, "f1_micro")
    if name in ("tolokers", "minesweeper"):
        from torch_geometric.datasets import HeterophilousGraphDataset

        data = verified_pyg(HeterophilousGraphDataset, fetch(name), name.capitalize())[0]
        if not 0 <= split < data.train_mask.shape[1]:
            raise ValueError(f"split must be in 0..{data.train_mask.shape[1] - 1}, got {split}")
        masks = (data.train_mask[:, split], data.val_mask[:, split], data.test_mask[:, split])
        return _from_pyg(name, data, *masks, "roc_auc")
    if name in SYNTHETIC_GRAPHS:
        graph = contextual_sbm(generator=torch.Generator().manual_seed(0), **SYNTHETIC_GRAPHS[name])
        return replace(graph, name=name)
    if name in PAPER_GRAPHS and name in load_registry():
        return load_graphsaint(fetch(name), name)
    if name in PAPER_GRAPHS:
        raise DatasetError(
            f"{PAPER_GRAPHS[name]} is the paper's dataset and is not in the data registry (it cannot be had "
            "offline here). To run scale='paper', add it to lib/mlsysrepro/core/datasets.json with its files' "
            "sha256 and URLs, in GraphSAINT's format (adj_full.npz, feats.npy, class_map.json, role.json; see "
            "load_graphsaint and data/README.md)."
        )
    raise ValueError(f"unknown graph {name!r}; choose one of {list(GRAPHS) + list(SYNTHETIC_GRAPHS)} or use "
                     "contextual_sbm()")


def load_graphsaint(root: Path, name: str) -> GraphData:
    """A graph in GraphSAINT's release format (Zeng et al., ICLR 2020), in which Reddit, PPI,
    PPI-large and Yelp are distributed: ``adj_full.npz`` (a scipy CSR adjacency), ``feats.npy``,
    ``class_map.json`` (node id -> class id, or -> 0/1 list for multi-label graphs) and
    ``role.json`` (``{"tr": [...], "va": [...], "te": [...]}``). Features are standardised with
    the training nodes' mean and standard deviation, as GraphSAINT's code does."""
    root = Path(root)
    adjacency = np.load(root / "adj_full.npz")
    indptr = torch.as_tensor(adjacency["indptr"], dtype=torch.long)
    indices = torch.as_tensor(adjacency["indices"], dtype=torch.long)
    n = indptr.numel() - 1
    rows = torch.repeat_interleave(torch.arange(n), indptr.diff())
    graph = CSRGraph.from_edge_index(torch.stack([rows, indices]), n)
    class_map = json.loads((root / "class_map.json").read_text())
    labels = [class_map[str(i)] for i in range(n)]
    multilabel = isinstance(labels[0], list)
    y = torch.tensor(labels, dtype=torch.float32 if multilabel else torch.long)
    role = json.loads((root / "role.json").read_text())
    train, val, test = (torch.as_tensor(role[k], dtype=torch.long) for k in ("tr", "va", "te"))
    x = torch.as_tensor(np.load(root / "feats.npy"), dtype=torch.float32)
    x = (x - x[train].mean(0)) / x[train].std(0).clamp(min=1e-6)
    num_classes = y.shape[1] if multilabel else int(y.max()) + 1
    return GraphData(name, x, y, graph, train, val, test, num_classes, "f1_micro")


def contextual_sbm(
    num_nodes: int,
    generator: torch.Generator,
    num_classes: int = 4,
    avg_degree: float = 10.0,
    homophily: float = 0.8,
    num_features: int = 16,
    feature_signal: float = 1.0,
) -> GraphData:
    """A contextual stochastic block model (Deshpande et al., NeurIPS 2018), generated in O(E).

    Each node draws a class; each of its ``avg_degree / 2`` edge stubs lands in its own class
    with probability ``homophily`` and in a uniformly random class otherwise; features are a
    class mean times ``feature_signal`` plus unit Gaussian noise. Split 50/25/25 %.
    """
    n, m = num_nodes, int(num_nodes * avg_degree / 2)
    y = torch.randint(num_classes, (n,), generator=generator)
    order = torch.argsort(y)  # nodes grouped by class, to draw a same-class endpoint in O(1)
    counts = torch.bincount(y, minlength=num_classes)
    starts = torch.cumsum(counts, 0) - counts
    src = torch.randint(n, (m,), generator=generator)
    same = torch.rand(m, generator=generator) < homophily
    cls = torch.where(same, y[src], torch.randint(num_classes, (m,), generator=generator))
    offset = (torch.rand(m, generator=generator) * counts[cls]).long()
    dst = order[starts[cls] + offset]
    means = torch.randn(num_classes, num_features, generator=generator)
    x = feature_signal * means[y] + torch.randn(n, num_features, generator=generator)
    graph = CSRGraph.from_edge_index(torch.stack([src, dst]), n)
    perm = torch.randperm(n, generator=generator)
    a, b = n // 2, (3 * n) // 4
    return GraphData("csbm", x, y, graph, perm[:a], perm[a:b], perm[b:], num_classes, "f1_micro")
