"""Subgraph samplers: Cluster-GCN (Chiang et al., KDD 2019) and GraphSAINT's node sampler (Zeng et al., ICLR 2020).

Both train on an induced subgraph, using its adjacency at every layer.

- :class:`ClusterGCN`: METIS (pymetis) cuts the graph into clusters; an epoch shuffles them and
  takes ``clusters_per_batch`` at a time, so every node (and every training node) is in exactly
  one batch per epoch. The subgraph is re-normalised by row; the loss averages its training nodes.
- :class:`SaintNode`: draws ``budget`` nodes with ``q_v ~ ||P[:, v]||^2`` and keeps the induced
  subgraph. From subgraphs drawn up front, as many as GraphSAINT's ``sample_coverage`` asks (their nodes add up
  to ``coverage`` times the graph's), it counts ``C_v`` (times node v was in a subgraph) and ``C_uv`` (times
  entry (u, v) was), then uses GraphSAINT's normalisations: aggregation ``P_uv / alpha_uv`` with
  ``alpha_uv = C_uv / C_u`` and loss weight ``1 / (lambda_v |train|)`` with ``lambda_v = C_v / n`` over the
  ``n`` pre-drawn subgraphs (:func:`saint_norms`). With too few of them (an earlier version drew 50, a coverage
  of about 2.5 on a 20,000-node graph) the counts are mostly 0 or 1 and training diverges.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
import torch

from .batch import Batch, sparse_block
from .graph import CSRGraph


def metis_parts(graph: CSRGraph, num_parts: int, seed: int = 0) -> torch.Tensor:
    """A METIS partition (pymetis, seeded) of the graph without its self loops: part id per node."""
    import pymetis

    if num_parts < 2:
        return torch.zeros(graph.num_nodes, dtype=torch.long)
    keep = graph.indices != graph.rows
    indptr = torch.zeros(graph.num_nodes + 1, dtype=torch.long)
    indptr[1:] = torch.cumsum(torch.bincount(graph.rows[keep], minlength=graph.num_nodes), 0)
    adjacency = pymetis.CSRAdjacency(indptr.numpy(), graph.indices[keep].numpy())
    _, parts = pymetis.part_graph(num_parts, adjacency=adjacency, options=pymetis.Options(seed=seed))
    return torch.as_tensor(np.asarray(parts), dtype=torch.long)


def induced_entries(graph: CSRGraph, nodes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Entries of ``graph`` between ``nodes``: (local row, local column, position in ``graph.indices``)."""
    local = torch.full((graph.num_nodes,), -1, dtype=torch.long)
    local[nodes] = torch.arange(nodes.numel())
    rows, pos = graph.row_entries(nodes)
    cols = local[graph.indices[pos]]
    keep = cols >= 0
    return rows[keep], cols[keep], pos[keep]


def _subgraph_batch(nodes, rows, cols, values, loss_weight, num_layers) -> Batch:
    """Every layer aggregates over the same induced subgraph."""
    n = nodes.numel()
    block = sparse_block(rows, cols, values, (n, n))
    return Batch([nodes] * num_layers, [n] * num_layers, [block] * num_layers, loss_weight)


class ClusterGCN:
    uses_history = False

    def __init__(self, graph: CSRGraph, train_idx: torch.Tensor, num_layers: int, num_clusters: int,
                 clusters_per_batch: int):
        if not 1 <= clusters_per_batch <= num_clusters:
            raise ValueError(f"clusters_per_batch must be in 1..{num_clusters}, got {clusters_per_batch}")
        self.graph, self.num_layers, self.q = graph, num_layers, clusters_per_batch
        self.parts = metis_parts(graph, num_clusters)
        self.num_clusters = int(self.parts.max()) + 1
        self.is_train = torch.zeros(graph.num_nodes, dtype=torch.bool)
        self.is_train[train_idx] = True
        self._queue: list[torch.Tensor] = []

    def __copy__(self) -> "ClusterGCN":
        """A copy with its own epoch queue: batches drawn from it (to measure a gradient) leave this one's alone."""
        clone = object.__new__(ClusterGCN)
        clone.__dict__.update(self.__dict__)
        clone._queue = list(self._queue)
        return clone

    def epoch(self, generator: torch.Generator) -> list[torch.Tensor]:
        """One epoch: the node sets of its batches (each a union of ``q`` shuffled clusters)."""
        order = torch.randperm(self.num_clusters, generator=generator)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(self.num_clusters)
        batch_of_node = rank[self.parts] // self.q
        sorted_batch, nodes = torch.sort(batch_of_node, stable=True)
        counts = torch.bincount(sorted_batch, minlength=int(batch_of_node.max()) + 1)
        return [chunk for chunk in torch.split(nodes, counts.tolist()) if chunk.numel()]

    def sample(self, generator: torch.Generator) -> Batch:
        while True:
            if not self._queue:
                self._queue = self.epoch(generator)
            nodes = self._queue.pop(0)
            train = self.is_train[nodes]
            if train.any():
                break
        rows, cols, _ = induced_entries(self.graph, nodes)
        values = 1.0 / torch.bincount(rows, minlength=nodes.numel()).float()[rows]  # row-normalised in the subgraph
        return _subgraph_batch(nodes, rows, cols, values, train.float() / train.sum(), self.num_layers)

    def refresh(self, model, data, history, step: int) -> None:
        """Cluster-GCN keeps no state between steps."""


def saint_norms(graph: CSRGraph, samples: Iterable[torch.Tensor], num_train: int) -> tuple[torch.Tensor, torch.Tensor]:
    """GraphSAINT's normalisations from pre-drawn node sets (Zeng et al., ICLR 2020, Sec. 3.2).

    Returns ``loss_norm`` per node, ``1 / (lambda_v * num_train)`` with ``lambda_v = C_v / len(samples)``,
    and ``alpha`` per stored entry (u, v) of ``graph``, ``C_uv / C_u``; a count that is zero gives 1.
    """
    node_count = torch.zeros(graph.num_nodes)
    entry_count = torch.zeros(graph.num_edges)
    member = torch.zeros(graph.num_nodes, dtype=torch.bool)
    draws = 0
    for nodes in samples:  # consumed one at a time: thousands of small node sets never sit in memory together
        draws += 1
        member[:] = False
        member[nodes] = True
        node_count[nodes] += 1
        _, pos = graph.row_entries(nodes)
        entry_count[pos[member[graph.indices[pos]]]] += 1
    row_count = node_count[graph.rows]
    alpha = torch.where((entry_count > 0) & (row_count > 0), entry_count / row_count.clamp(min=1), torch.ones(1))
    lam = node_count / max(draws, 1)
    loss_norm = torch.where(lam > 0, 1.0 / (lam.clamp(min=1e-12) * num_train), torch.zeros(1))
    return loss_norm, alpha


class SaintNode:
    uses_history = False

    def __init__(self, graph: CSRGraph, train_idx: torch.Tensor, num_layers: int, budget: int,
                 generator: torch.Generator, coverage: float = 50.0):
        self.graph, self.num_layers, self.budget = graph, num_layers, budget
        q = graph.column_norms_sq()
        self.q = q / q.sum()
        self.is_train = torch.zeros(graph.num_nodes, dtype=torch.bool)
        self.is_train[train_idx] = True
        # GraphSAINT's sample_coverage: pre-draw until the node sets hold ``coverage`` times the graph's nodes, so
        # that every count behind a normalisation is large enough to divide by
        self.loss_norm, self.alpha = saint_norms(graph, self.pre_draws(generator, coverage), train_idx.numel())

    def pre_draws(self, generator: torch.Generator, coverage: float) -> Iterator[torch.Tensor]:
        """Node sets until they hold ``coverage`` times the graph's nodes."""
        drawn = 0
        while drawn < coverage * self.graph.num_nodes:
            nodes = self.draw_nodes(generator)
            drawn += nodes.numel()
            yield nodes

    def draw_nodes(self, generator: torch.Generator) -> torch.Tensor:
        return torch.unique(torch.multinomial(self.q, self.budget, replacement=True, generator=generator))

    def sample(self, generator: torch.Generator) -> Batch:
        nodes = self.draw_nodes(generator)
        weight = self.loss_norm[nodes] * self.is_train[nodes]
        rows, cols, pos = induced_entries(self.graph, nodes)
        values = self.graph.values[pos] / self.alpha[pos]
        return _subgraph_batch(nodes, rows, cols, values, weight, self.num_layers)

    def refresh(self, model, data, history, step: int) -> None:
        """GraphSAINT keeps no state between steps."""
