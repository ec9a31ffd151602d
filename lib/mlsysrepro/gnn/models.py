"""GCN and GraphSAGE models (the papers use 2-5 layers) on the whole graph or on a sampled :class:`Batch`.

One layer (Kipf & Welling, ICLR 2017; Hamilton et al., NeurIPS 2017, mean aggregator)::

    GCN:        h_i' = W  (P h)_i            SAGE:  h_i' = W [h_i , (P h)_i]

with ReLU and dropout between layers. On a batch, ``P h`` becomes ``block[l] @ h``; rows of a
layer's input that the batch did not compute fresh are read from a :class:`History` (MVS-GNN
Eq. 7, VR-GCN), and every fresh output is written back to it.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from .batch import Batch

KINDS = ("gcn", "sage")


class History:
    """Stored embeddings ``hist[l]`` (N x hidden) of every layer input ``l >= 1``."""

    def __init__(self, num_layers: int, num_nodes: int, hidden: int):
        self.tables = [None] + [torch.zeros(num_nodes, hidden) for _ in range(num_layers - 1)]

    def __getitem__(self, layer: int) -> torch.Tensor:
        return self.tables[layer]

    def write(self, layer: int, ids: torch.Tensor, values: torch.Tensor) -> None:
        """Store fresh embeddings, out of place: a pending backward may still read the old table (VR-GCN)."""
        self.tables[layer] = self.tables[layer].index_put((ids,), values)

    def fill(self, layer_inputs: list[torch.Tensor]) -> None:
        """Replace every table with exact embeddings (the first result of :meth:`GNN.exact_pass`)."""
        for l in range(1, len(self.tables)):
            self.tables[l] = layer_inputs[l].detach().clone()


class GNN(nn.Module):
    """A GCN (``kind="gcn"``) or GraphSAGE (``kind="sage"``) of ``num_layers`` layers.

    ``forward_full(x, adjacency)`` runs on the whole graph; ``forward(x, batch, history)`` on a
    sampled :class:`Batch`; ``exact_pass`` gives the exact embeddings a history stores.
    """

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, kind: str = "gcn",
                 dropout: float = 0.0):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if not 1 <= num_layers <= 8:
            raise ValueError(f"num_layers must be in 1..8, got {num_layers}")
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        factor = 2 if kind == "sage" else 1
        self.kind, self.hidden, self.dropout = kind, hidden, dropout
        self.linears = nn.ModuleList(nn.Linear(factor * a, b) for a, b in zip(dims[:-1], dims[1:]))

    @property
    def num_layers(self) -> int:
        return len(self.linears)

    @staticmethod
    def _aggregate(f, h, block, cv=None, hist=None, src=None) -> torch.Tensor:
        """``block @ f(h)``, or with VR-GCN's control variate ``block @ (f(h) - f(hist[src])) + cv @ f(hist)``."""
        if cv is None:
            return block @ f(h)
        return block @ (f(h) - f(hist[src])) + cv @ f(hist)

    def _apply(self, l: int, h_self: torch.Tensor, aggregate, return_input: bool = False):
        """Layer ``l`` on ``h_self`` (its dst rows) and ``aggregate(f) = P_hat f(h)``.

        ``P (h W^T) = (P h) W^T``: when the layer narrows (``out < in``, e.g. CiteSeer's 3,703
        features to 64) the weight goes first so aggregation runs over the narrow side;
        otherwise (or when the aggregated input is wanted too) aggregation goes first.
        """
        linear = self.linears[l]
        w, d = linear.weight, h_self.shape[1]
        w_agg = w[:, d:] if self.kind == "sage" else w
        aggregated = None
        if w.shape[0] < d and not return_input:
            out = aggregate(lambda t: t @ w_agg.T)
        else:
            aggregated = aggregate(lambda t: t)
            out = aggregated @ w_agg.T
        if self.kind == "sage":
            out = out + h_self @ w[:, :d].T
        out = out + linear.bias
        out = out if l == self.num_layers - 1 else torch.relu(out)
        if not return_input:
            return out
        return out, torch.cat([h_self, aggregated], 1) if self.kind == "sage" else aggregated

    def forward_full(self, x: torch.Tensor, adjacency: torch.Tensor, return_last_input: bool = False):
        """Exact forward on the whole graph (``adjacency`` = the sparse propagation matrix)."""
        h = x
        for l in range(self.num_layers):
            if l > 0:
                h = nn.functional.dropout(h, self.dropout, self.training)
            last = return_last_input and l == self.num_layers - 1
            h = self._apply(l, h, partial(self._aggregate, h=h, block=adjacency), return_input=last)
        return h

    @torch.no_grad()
    def exact_pass(self, x: torch.Tensor, adjacency: torch.Tensor):
        """One exact pass over the whole graph, without dropout: every layer's input (index 0 is
        ``x``; what a history stores), the logits and the last layer's input."""
        inputs, h = [x], x
        for l in range(self.num_layers - 1):
            h = self._apply(l, h, partial(self._aggregate, h=h, block=adjacency))
            inputs.append(h)
        last = self.num_layers - 1
        logits, last_input = self._apply(last, h, partial(self._aggregate, h=h, block=adjacency), return_input=True)
        return inputs, logits, last_input

    def forward(self, x: torch.Tensor, batch: Batch, history: History | None = None,
                write_history: bool = True, return_last_input: bool = False):
        """Forward on a sampled batch; returns logits of ``batch.output_ids`` (and the last layer's input)."""
        if batch.num_layers != self.num_layers:
            raise ValueError(f"batch has {batch.num_layers} layers, model has {self.num_layers}")
        h, fresh = x[batch.src_ids[0]], []
        for l in range(self.num_layers):
            src, n_dst = batch.src_ids[l], batch.num_dst[l]
            if h.shape[0] < src.numel():  # out-of-batch inputs come from the history
                h = torch.cat([h, history[l][src[h.shape[0]:]]], 0)
            if l > 0:
                h = nn.functional.dropout(h, self.dropout, self.training)
            aggregate = partial(self._aggregate, h=h, block=batch.blocks[l])
            if batch.cv_rows is not None and batch.cv_rows[l] is not None:  # VR-GCN
                aggregate = partial(aggregate, cv=batch.cv_rows[l], hist=history[l], src=src)
            last = return_last_input and l == self.num_layers - 1
            h = self._apply(l, h[:n_dst], aggregate, return_input=last)
            if last:
                h, z = h
            if l < self.num_layers - 1:
                fresh.append((l + 1, src[:n_dst], h.detach()))
        if history is not None and write_history:  # after the pass: the control variate reads the old values
            for layer, ids, values in fresh:
                history.write(layer, ids, values)
        return (h, z) if return_last_input else h


MODELS = ("gcn", "sage", "gat", "appnp")


def build_model(kind: str, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2,
                dropout: float = 0.0) -> nn.Module:
    """One of :data:`MODELS`: GCN and GraphSAGE (:class:`GNN`), GAT (:mod:`.gat`) or APPNP (:mod:`.appnp`)."""
    from .appnp import APPNP
    from .gat import GAT

    if kind in KINDS:
        return GNN(in_dim, hidden, out_dim, num_layers, kind, dropout)
    if kind == "gat":
        return GAT(in_dim, hidden, out_dim, num_layers, dropout=dropout)
    if kind == "appnp":
        return APPNP(in_dim, hidden, out_dim, num_layers, dropout=dropout)
    raise ValueError(f"model must be one of {MODELS}, got {kind!r}")
