"""Mini-batch samplers for GNN training, in plain torch (PyG's need pyg-lib or torch-sparse).

Every sampler has ``sample(generator) -> Batch`` (see :mod:`.batch`). Most pick seed nodes
uniformly from the training set (:class:`UniformBatches`) and hand them to a *neighbourhood
builder* that grows the per-layer blocks top-down:

- :class:`FullNeighborhood`: every neighbour, exact (with uniform seeds: MVS-GNN's "UNS");
- :class:`NodeWise`: GraphSAGE, ``fanout`` distinct neighbours per node (all of them when it has fewer), as PyG's
  ``NeighborLoader`` samples (``replace=False``), weighted ``P_ij * deg_i / min(fanout, deg_i)`` (unbiased); or,
  with ``replace=True``, ``fanout`` draws with replacement weighted ``P_ij * deg_i / fanout``;
- :class:`LayerWise`: FastGCN (``q_j ~ ||P[:, j]||^2`` over all nodes) and LADIES (the same
  restricted to the rows of the layer above), ``s`` draws per layer, weighted
  ``P_ij * count_j / (s q_j)`` (unbiased); with ``renormalise``, as LADIES' code does (the registry's LADIES),
  the layer's own nodes join the drawn ones and each sampled row is scaled back to the full row's sum (biased
  but consistent, and without rows that aggregate nothing);
- :class:`OneHopHistory`: MVS-GNN's batch graph, the batch's rows of ``P`` over the batch and
  its one-hop neighbours, reused at every layer; outside the batch the history stands in;
- :class:`VRGCN`: node-wise fan-out with VR-GCN's control variate (Chen et al., ICML 2018);
- :class:`ExactFirstLayer`: wraps a builder; GCN's first layer reads ``P X``, computed once
  (features are fixed), so only the layers above are sampled (LLCG's machines and server).

Cluster-GCN and GraphSAINT sample subgraphs instead (:mod:`.subgraph`); MVS-GNN's own node
selection is in :mod:`.mvs`.
"""

from __future__ import annotations

import torch

from .batch import Batch, relabel, sparse_block
from .graph import CSRGraph


def _block(rows, cols_local, values, n_dst, n_src):
    return sparse_block(rows, cols_local, values, (n_dst, n_src))


class LayerByLayer:
    """Grows a batch top-down: layer ``l``'s dst nodes pick their entries with :meth:`entries`,
    and the nodes those entries reach become the dst nodes of layer ``l - 1``."""

    uses_history = False

    def __init__(self, graph: CSRGraph, num_layers: int):
        self.graph, self.num_layers = graph, num_layers

    def entries(self, dst: torch.Tensor, layer: int, generator: torch.Generator | None):
        """(local row, global column, weight) of layer ``layer``'s block."""
        raise NotImplementedError

    def build(self, seeds: torch.Tensor, weights: torch.Tensor, generator: torch.Generator | None = None) -> Batch:
        src_ids, num_dst, blocks, dst = [], [], [], seeds
        for layer in reversed(range(self.num_layers)):
            rows, cols, vals = self.entries(dst, layer, generator)
            src, local = relabel(dst, cols, self.graph.num_nodes)
            src_ids.append(src), num_dst.append(dst.numel())
            blocks.append(_block(rows, local, vals, dst.numel(), src.numel()))
            dst = src
        return Batch(src_ids[::-1], num_dst[::-1], blocks[::-1], weights)


class FullNeighborhood(LayerByLayer):
    """The exact L-hop computation graph of the seeds."""

    def entries(self, dst, layer, generator):
        return self.graph.row_slice(dst)


def distinct_offsets(degree: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """(n, k) offsets: for each row of ``degree`` (n,) with ``degree >= k``, a uniformly random set of ``k``
    distinct offsets in ``[0, degree)``. Floyd's algorithm (Bentley & Floyd, CACM 1987), vectorised over rows: step
    ``i`` draws ``t`` in ``[0, d - k + i]`` and keeps it, or ``d - k + i`` when ``t`` was kept already; O(k^2) per row,
    whatever the degree. PyG's sampler runs the same algorithm one node at a time (pyg-lib,
    ``csrc/sampler/cpu/neighbor_kernel.cpp``, "Case 3: Sample without replacement")."""
    n = degree.numel()
    chosen = torch.empty(n, k, dtype=torch.long)
    for i in range(k):
        top = degree - k + i  # the largest offset this step may take
        t = (torch.rand(n, generator=generator) * (top + 1)).long().clamp_(max=top)
        taken = (chosen[:, :i] == t[:, None]).any(1)
        chosen[:, i] = torch.where(taken, top, t)
    return chosen


class NodeWise(LayerByLayer):
    """GraphSAGE sampling: ``fanout`` neighbours (self loop included) per node; distinct ones, as PyG's sampler, or
    with ``replace=True`` drawn with replacement."""

    def __init__(self, graph: CSRGraph, num_layers: int, fanout: int, replace: bool = False):
        if fanout < 1:
            raise ValueError(f"fanout must be >= 1, got {fanout}")
        super().__init__(graph, num_layers)
        self.fanout, self.replace = fanout, replace

    def entries(self, dst, layer, generator):
        g, k = self.graph, self.fanout
        if self.replace:
            rows = torch.arange(dst.numel()).repeat_interleave(k)
            deg = g.degree[dst][rows]
            pos = g.indptr[dst][rows] + (torch.rand(rows.numel(), generator=generator) * deg).long()
            return rows, g.indices[pos], g.values[pos] * deg / k
        degree = g.degree[dst]
        taken = degree.clamp(max=k)
        rows = torch.arange(dst.numel()).repeat_interleave(taken)  # sorted by row, as a block needs
        first = torch.cumsum(taken, 0) - taken  # where each row's entries start
        pos = torch.empty(rows.numel(), dtype=torch.long)
        small = (degree <= k).nonzero()[:, 0]  # every neighbour, exactly
        local, all_pos = g.row_entries(dst[small])
        pos[first[small][local] + all_pos - g.indptr[dst[small]][local]] = all_pos
        large = (degree > k).nonzero()[:, 0]
        pos[(first[large][:, None] + torch.arange(k)).flatten()] = (
            g.indptr[dst[large]][:, None] + distinct_offsets(degree[large], k, generator)).flatten()
        return rows, g.indices[pos], g.values[pos] * (degree / taken)[rows]


class LayerWise(LayerByLayer):
    """FastGCN (``kind="fastgcn"``) and LADIES (``kind="ladies"``) layer-wise importance sampling."""

    def __init__(self, graph: CSRGraph, num_layers: int, layer_size: int, kind: str = "ladies",
                 renormalise: bool = False):
        if kind not in ("ladies", "fastgcn"):
            raise ValueError(f"kind must be 'ladies' or 'fastgcn', got {kind!r}")
        super().__init__(graph, num_layers)
        self.layer_size, self.kind, self.renormalise = layer_size, kind, renormalise
        self.global_q = graph.column_norms_sq()

    def entries(self, dst, layer, generator):
        g, s = self.graph, self.layer_size
        rows, pos = g.row_entries(dst)
        cols, vals = g.indices[pos], g.values[pos]
        if self.kind == "ladies":  # q_j ~ sum_{i in layer above} P_ij^2
            q = torch.zeros(g.num_nodes).index_add_(0, cols, vals**2)
        else:
            q = self.global_q
        q = q / q.sum()
        drawn = torch.multinomial(q, s, replacement=True, generator=generator)
        count = torch.bincount(drawn, minlength=g.num_nodes).float()
        if self.renormalise:  # LADIES' code: the layer's own nodes join the drawn ones (each row keeps its self loop)
            count = count.index_put_((dst,), count[dst].clamp(min=1))
        keep = count[cols] > 0  # drawn nodes no row links to are useless
        full_sums = torch.zeros(dst.numel()).index_add_(0, rows, vals)
        rows, cols, vals = rows[keep], cols[keep], vals[keep]
        weighted = vals * count[cols] / (s * q[cols])
        if self.renormalise:  # and scales each sampled row back to its full row's sum
            sampled_sums = torch.zeros(dst.numel()).index_add_(0, rows, weighted)
            weighted = weighted * (full_sums / sampled_sums.clamp(min=1e-12))[rows]
        return rows, cols, weighted


class OneHopHistory:
    """MVS-GNN's batch graph: rows of P for the batch over batch + one-hop neighbours, at every layer."""

    uses_history = True

    def __init__(self, graph: CSRGraph, num_layers: int):
        self.graph, self.num_layers = graph, num_layers

    def build(self, seeds: torch.Tensor, weights: torch.Tensor, generator: torch.Generator | None = None) -> Batch:
        rows, cols, vals = self.graph.row_slice(seeds)
        src, local = relabel(seeds, cols, self.graph.num_nodes)
        block = _block(rows, local, vals, seeds.numel(), src.numel())
        L = self.num_layers
        return Batch([src] * L, [seeds.numel()] * L, [block] * L, weights)


class VRGCN(NodeWise):
    """Node-wise sampling plus VR-GCN's control variate ``P_hat (h - hist) + P hist`` on layers >= 1.

    Layer 0 aggregates the (fixed, exactly known) features over every neighbour.
    """

    uses_history = True

    def entries(self, dst, layer, generator):
        return self.graph.row_slice(dst) if layer == 0 else super().entries(dst, layer, generator)

    def build(self, seeds: torch.Tensor, weights: torch.Tensor, generator: torch.Generator) -> Batch:
        batch = super().build(seeds, weights, generator)
        batch.cv_rows = [None]
        for layer in range(1, self.num_layers):  # exact rows P[dst, :] over all N nodes
            dst = batch.src_ids[layer][: batch.num_dst[layer]]
            rows, cols, vals = self.graph.row_slice(dst)
            batch.cv_rows.append(_block(rows, cols, vals, dst.numel(), self.graph.num_nodes))
        return batch


class ExactFirstLayer:
    """GCN's first layer, ``(P X)[dst] W``, is exact and costs one row lookup once ``P X`` is stored.

    ``builder`` grows the upper ``num_layers - 1`` layers; the first layer's block is the identity
    over their input nodes, so a model given ``P X`` (:func:`aggregate_features`) instead of ``X``
    computes the exact first layer. Only for models whose first layer is linear in ``P X`` (GCN).
    """

    uses_history = False

    def __init__(self, builder):
        self.builder, self.graph = builder, builder.graph

    def build(self, seeds: torch.Tensor, weights: torch.Tensor, generator: torch.Generator | None = None) -> Batch:
        if self.builder.num_layers == 0:
            src_ids, num_dst, blocks = [], [], []
            inputs = seeds
        else:
            upper = self.builder.build(seeds, weights, generator)
            src_ids, num_dst, blocks, inputs = upper.src_ids, upper.num_dst, upper.blocks, upper.src_ids[0]
        n = inputs.numel()
        identity = torch.sparse_csr_tensor(torch.arange(n + 1), torch.arange(n), torch.ones(n), (n, n),
                                           check_invariants=False)
        return Batch([inputs] + src_ids, [n] + num_dst, [identity] + blocks, weights)


def aggregate_features(graph: CSRGraph, x: torch.Tensor) -> torch.Tensor:
    """``P X``: the first layer's aggregation of fixed features, for :class:`ExactFirstLayer`."""
    return graph.adjacency() @ x


class UniformBatches:
    """``batch_size`` training nodes drawn uniformly without replacement, each weighted 1/B."""

    def __init__(self, builder, train_idx: torch.Tensor, batch_size: int):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.builder, self.train_idx = builder, train_idx
        self.batch_size = min(batch_size, train_idx.numel())
        self.uses_history = builder.uses_history

    def sample(self, generator: torch.Generator) -> Batch:
        pick = torch.randperm(self.train_idx.numel(), generator=generator)[: self.batch_size]
        weights = torch.full((self.batch_size,), 1.0 / self.batch_size)
        return self.builder.build(self.train_idx[pick], weights, generator)

    def refresh(self, model, data, history, step: int) -> None:
        """Nothing to refresh (MVS-GNN's sampler refreshes its checkpoint here)."""
