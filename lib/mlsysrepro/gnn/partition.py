"""Split a graph over P machines, as LLCG's machines hold it (Ramezani et al., ICLR 2022, Sec. 3).

:func:`partition_graph` assigns every node to one part, by METIS (pymetis, seeded: few cut
edges) or at random (equal sizes: most edges cut), and returns a :class:`Partitioning`: the
part of each node, each machine's local graph and the edge-cut fraction. A machine's local
graph is a :class:`GraphData` of its own nodes with only the edges inside its part, re-normalised
by the local degree (the machine does not know its cut edges); its ids are local, so every
sampler and model runs on it unchanged, and ``nodes`` maps them back to global ids.
:func:`label_skew` measures how far each part's training labels are from the graph's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .datasets import GraphData
from .graph import CSRGraph
from .subgraph import induced_entries, metis_parts

METHODS = ("metis", "random")


@dataclass(frozen=True)
class Partitioning:
    parts: torch.Tensor  # (N,) part id of every node
    nodes: list[torch.Tensor]  # global ids of each part's nodes, ascending
    local: list[GraphData]  # each part's intra-partition graph, in local ids
    edge_cut: float  # share of the graph's edges (self loops excluded) whose ends lie in different parts

    @property
    def num_parts(self) -> int:
        return len(self.nodes)

    def train_sizes(self) -> torch.Tensor:
        """Training nodes per part: the weights of the server's model average."""
        return torch.tensor([float(d.train_idx.numel()) for d in self.local])


def assign_parts(graph: CSRGraph, num_parts: int, method: str, seed: int) -> torch.Tensor:
    """Part id per node: METIS, or a seeded random permutation cut into equal chunks."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not 1 <= num_parts <= graph.num_nodes:
        raise ValueError(f"num_parts must be in 1..{graph.num_nodes}, got {num_parts}")
    if method == "metis":
        return metis_parts(graph, num_parts, seed)
    order = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(seed))
    parts = torch.empty(graph.num_nodes, dtype=torch.long)
    parts[order] = torch.arange(graph.num_nodes) * num_parts // graph.num_nodes
    return parts


def edge_cut(graph: CSRGraph, parts: torch.Tensor) -> float:
    """Share of edges (self loops excluded) between different parts."""
    rows, cols = graph.rows, graph.indices
    edges = rows != cols
    return float((parts[rows] != parts[cols])[edges].float().mean())


def local_graph(data: GraphData, nodes: torch.Tensor) -> GraphData:
    """The graph a machine holding ``nodes`` sees: their features, labels and splits, and only
    the edges between them, row-normalised by the local degree (self loops kept)."""
    rows, cols, _ = induced_entries(data.graph, nodes)
    degree = torch.bincount(rows, minlength=nodes.numel())
    indptr = torch.zeros(nodes.numel() + 1, dtype=torch.long)
    indptr[1:] = torch.cumsum(degree, 0)
    graph = CSRGraph(indptr, cols, 1.0 / degree[rows].float())
    local = torch.full((data.num_nodes,), -1, dtype=torch.long)
    local[nodes] = torch.arange(nodes.numel())

    def split(idx):
        ids = local[idx]
        return ids[ids >= 0]

    return GraphData(data.name, data.x[nodes], data.y[nodes], graph, split(data.train_idx), split(data.val_idx),
                     split(data.test_idx), data.num_classes, data.metric)


def label_skew(data: GraphData, parting: Partitioning) -> torch.Tensor:
    """Per part, how far its training labels are from the whole graph's: the total variation distance
    ``1/2 sum_c |p_part(c) - p(c)|`` between the class shares of its training nodes and of all training nodes (a
    multi-label graph: the mean over labels of that distance for each label's 0/1 split). 0: the part sees the
    graph's label mix; near 1: it sees classes the rest of the graph barely has. LLCG's local models drift apart,
    and the server's correction has something to correct, where this is large (Sec. 3: the local gradients'
    dissimilarity)."""
    def shares(labels: torch.Tensor) -> torch.Tensor:
        if labels.dim() == 2:  # multi-label: one two-way split per label
            positive = labels.float().mean(0)
            return torch.stack([positive, 1 - positive], 1)
        return torch.bincount(labels, minlength=data.num_classes).float() / max(labels.numel(), 1)

    overall = shares(data.y[data.train_idx])
    distances = []
    for local in parting.local:
        labels = local.y[local.train_idx]
        distances.append(float("nan") if labels.shape[0] == 0 else
                         0.5 * float((shares(labels) - overall).abs().sum(-1).mean() if overall.dim() == 2
                                     else (shares(labels) - overall).abs().sum()))
    return torch.tensor(distances)


def partition_graph(data: GraphData, num_parts: int, method: str = "metis", seed: int = 0) -> Partitioning:
    """Cut ``data`` into ``num_parts`` machines' local graphs (see the module docstring)."""
    parts = assign_parts(data.graph, num_parts, method, seed)
    nodes = [(parts == p).nonzero().view(-1) for p in range(num_parts)]
    return Partitioning(parts, nodes, [local_graph(data, n) for n in nodes], edge_cut(data.graph, parts))
