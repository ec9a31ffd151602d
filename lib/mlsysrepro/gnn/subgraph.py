"""Subgraph samplers: Cluster-GCN (Chiang et al., KDD 2019) and GraphSAINT's node sampler (Zeng et al., ICLR 2020).

Both train on an induced subgraph, using its adjacency at every layer.

- :class:`ClusterGCN`: METIS (pymetis) cuts the graph into clusters; an epoch shuffles them and
  takes ``clusters_per_batch`` at a time, so every node (and every training node) is in exactly
  one batch per epoch. The subgraph is re-normalised by row; the loss averages its training nodes.
- :class:`SaintNode`: draws ``budget`` nodes with ``q_v ~ ||P[:, v]||^2`` and keeps the induced
  subgraph. From subgraphs drawn up front, as many as GraphSAINT's ``sample_coverage`` asks (their nodes add up
  to ``coverage`` times the graph's), it counts ``C_v`` (times node v was in a subgraph) and ``C_uv`` (times
  entry (u, v) was), then uses GraphSAINT's normalisations as its authors' code estimates them: aggregation
  ``P_uv / alpha_uv`` with ``alpha_uv = C_uv / C_u`` and loss weight ``1 / (lambda_v |train|)`` with
  ``lambda_v = C_v / n`` over the ``n`` pre-drawn subgraphs, and their fallbacks where a count is zero
  (:func:`saint_norms`). By default it uses what those counts estimate, ``alpha_uv = P(v in S | u in S)`` and
  ``lambda_v = P(v in S)``, in closed form (:func:`saint_probabilities`): on a dense graph some entries stay
  uncounted at any affordable coverage, and the fallback's factor on them swamps the gradient.
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


#: GraphSAINT's fallbacks (GraphSAINT/GraphSAINT ``graphsaint/pytorch_version/minibatch.py``, lines 204-207): the
#: aggregation factor ``C_u / C_uv`` is clipped at 1e4 (an entry never drawn, ``C_uv = 0``, gets 1e4), 0 / 0 (a node
#: never drawn) gives 0.1, and a node never drawn counts 0.1 times in its loss weight.
AGGREGATION_CAP = 1e4
NEVER_DRAWN = 0.1


def saint_norms(graph: CSRGraph, samples: Iterable[torch.Tensor], num_train: int) -> tuple[torch.Tensor, torch.Tensor]:
    """GraphSAINT's normalisations from pre-drawn node sets (Zeng et al., ICLR 2020, Sec. 3.2), estimated as the
    authors' code estimates them (``minibatch.py``, lines 196-210).

    Returns ``loss_norm`` per node, ``1 / (lambda_v * num_train)`` with ``lambda_v = C_v / len(samples)``, and
    ``aggregation`` per stored entry (u, v) of ``graph``, the factor ``1 / alpha_uv = C_u / C_uv`` that multiplies
    ``P_uv`` (``alpha_uv = C_uv / C_u`` estimates the probability that u's subgraph holds v). Where a count is zero
    the authors' fallbacks apply (:data:`AGGREGATION_CAP`, :data:`NEVER_DRAWN`): an entry that no pre-drawn subgraph
    held gets the cap rather than 1, so a rarely drawn neighbour is weighted up as the estimator asks.
    """
    node_count = torch.zeros(graph.num_nodes, dtype=torch.float64)
    entry_count = torch.zeros(graph.num_edges, dtype=torch.float64)
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
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = row_count.numpy() / entry_count.numpy()
    aggregation = np.clip(ratio, 0, AGGREGATION_CAP)
    aggregation[np.isnan(aggregation)] = NEVER_DRAWN
    counted = torch.where(node_count > 0, node_count, torch.full_like(node_count, NEVER_DRAWN))
    loss_norm = max(draws, 1) / counted / num_train
    return loss_norm.float(), torch.from_numpy(aggregation).float()


def saint_probabilities(graph: CSRGraph, q: torch.Tensor, budget: int, num_train: int
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """The quantities :func:`saint_norms` estimates, in closed form for GraphSAINT's node sampler (``budget`` draws
    with replacement from ``q``, the subgraph the distinct nodes drawn): ``P(v in S) = 1 - (1 - q_v)^n`` and, for
    u != v, ``P(u, v in S) = 1 - (1 - q_u)^n - (1 - q_v)^n + (1 - q_u - q_v)^n``. Returns ``loss_norm``
    ``1 / (P(v in S) num_train)`` and ``aggregation`` ``P(u in S) / P(u, v in S)`` per stored entry: the limits of
    the counted estimates as the pre-drawn subgraphs grow, with no entry left uncounted."""
    q = q.double()
    none = torch.exp(budget * torch.log1p(-q))  # P(v not in S)
    present = 1 - none
    u, v = graph.rows, graph.indices
    neither = torch.exp(budget * torch.log1p(-(q[u] + q[v]).clamp(max=1)))
    both = torch.where(u == v, present[u], 1 - none[u] - none[v] + neither)
    return (1 / (present * num_train)).float(), (present[u] / both).float()


#: How :class:`SaintNode` gets its normalisations.
NORMALISATIONS = ("exact", "counted")


class SaintNode:
    """GraphSAINT's node sampler. ``normalisation="counted"`` estimates the normalisations as the authors' code does,
    by counting over subgraphs pre-drawn to ``coverage`` (:func:`saint_norms`, with their fallbacks); ``"exact"`` (the
    default) computes what those counts estimate (:func:`saint_probabilities`). On a dense graph the counts leave
    entries uncounted at any affordable coverage (tolokers, 1 M entries, 1,024-node subgraphs: 17 % at coverage 50,
    1.4 % at 1,000), and the fallback's factor of 1e4 on those entries swamps the gradient (minesweeper at coverage
    50, 0.8 % uncounted: a relative gradient error of about 2e8, where the other samplers stay below 0.1)."""

    uses_history = False

    def __init__(self, graph: CSRGraph, train_idx: torch.Tensor, num_layers: int, budget: int,
                 generator: torch.Generator, coverage: float = 50.0, normalisation: str = "exact"):
        if normalisation not in NORMALISATIONS:
            raise ValueError(f"normalisation must be one of {list(NORMALISATIONS)}, got {normalisation!r}")
        self.graph, self.num_layers, self.budget = graph, num_layers, budget
        q = graph.column_norms_sq()
        self.q = q / q.sum()
        self.is_train = torch.zeros(graph.num_nodes, dtype=torch.bool)
        self.is_train[train_idx] = True
        if normalisation == "exact":
            self.loss_norm, self.aggregation = saint_probabilities(graph, self.q, budget, train_idx.numel())
        else:  # GraphSAINT's sample_coverage: pre-draw until the node sets hold ``coverage`` times the graph's nodes
            self.loss_norm, self.aggregation = saint_norms(graph, self.pre_draws(generator, coverage),
                                                          train_idx.numel())

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
        values = self.graph.values[pos] * self.aggregation[pos]
        return _subgraph_batch(nodes, rows, cols, values, weight, self.num_layers)

    def refresh(self, model, data, history, step: int) -> None:
        """GraphSAINT keeps no state between steps."""
