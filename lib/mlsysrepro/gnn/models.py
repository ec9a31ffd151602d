"""GCN and GraphSAGE models of 2-5 layers that run on the whole graph or on a sampled :class:`Batch`.

One layer (Kipf & Welling, ICLR 2017; Hamilton et al., NeurIPS 2017, mean aggregator)::

    GCN:        h_i' = W  (P h)_i            SAGE:  h_i' = W [h_i , (P h)_i]

with ReLU and dropout between layers. On a batch, ``P h`` becomes ``block[l] @ h``; rows of a
layer's input that the batch did not compute fresh are read from a :class:`History` (MVS-GNN
Eq. 7, VR-GCN), and every fresh output is written back to it.
"""

from __future__ import annotations

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

    def fill(self, layer_inputs: list[torch.Tensor]) -> None:
        """Overwrite every table with exact embeddings (from :meth:`GNN.layer_inputs`)."""
        for l in range(1, len(self.tables)):
            self.tables[l].copy_(layer_inputs[l])


class GNN(nn.Module):
    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, kind: str = "gcn", dropout: float = 0.0):
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

    def _combine(self, h_self: torch.Tensor, aggregated: torch.Tensor) -> torch.Tensor:
        return torch.cat([h_self, aggregated], 1) if self.kind == "sage" else aggregated

    def _activate(self, l: int, out: torch.Tensor) -> torch.Tensor:
        return out if l == self.num_layers - 1 else torch.relu(out)

    def forward_full(self, x: torch.Tensor, adjacency: torch.Tensor, return_last_input: bool = False):
        """Exact forward on the whole graph (``adjacency`` = the sparse propagation matrix)."""
        h = x
        for l, linear in enumerate(self.linears):
            if l > 0:
                h = nn.functional.dropout(h, self.dropout, self.training)
            z = self._combine(h, adjacency @ h)
            h = self._activate(l, linear(z))
        return (h, z) if return_last_input else h

    @torch.no_grad()
    def layer_inputs(self, x: torch.Tensor, adjacency: torch.Tensor) -> list[torch.Tensor]:
        """Exact input of every layer (index 0 is ``x``), without dropout: what a history stores."""
        inputs, h = [x], x
        for l, linear in enumerate(self.linears[:-1]):
            h = torch.relu(linear(self._combine(h, adjacency @ h)))
            inputs.append(h)
        return inputs

    def forward(self, x: torch.Tensor, batch: Batch, history: History | None = None,
                write_history: bool = True, return_last_input: bool = False):
        """Forward on a sampled batch; returns logits of ``batch.output_ids`` (and the last layer's input)."""
        if batch.num_layers != self.num_layers:
            raise ValueError(f"batch has {batch.num_layers} layers, model has {self.num_layers}")
        h, fresh = x[batch.src_ids[0]], []
        for l, linear in enumerate(self.linears):
            src, n_dst = batch.src_ids[l], batch.num_dst[l]
            if h.shape[0] < src.numel():  # out-of-batch inputs come from the history
                h = torch.cat([h, history[l][src[h.shape[0]:]]], 0)
            if l > 0:
                h = nn.functional.dropout(h, self.dropout, self.training)
            cv = batch.cv_rows[l] if batch.cv_rows is not None else None
            if cv is None:
                aggregated = batch.blocks[l] @ h
            else:  # VR-GCN control variate: sampled difference plus exact aggregation of the history
                aggregated = batch.blocks[l] @ (h - history[l][src]) + cv @ history[l]
            z = self._combine(h[:n_dst], aggregated)
            h = self._activate(l, linear(z))
            if l < self.num_layers - 1:
                fresh.append((l + 1, src[:n_dst], h.detach()))
        if history is not None and write_history:  # after the pass: the control variate reads the old values
            for layer, ids, values in fresh:
                history[layer][ids] = values
        return (h, z) if return_last_input else h
