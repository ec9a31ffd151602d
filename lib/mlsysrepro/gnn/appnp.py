"""APPNP: predict, then propagate (Klicpera et al., ICLR 2019), on the whole graph or a sampled :class:`Batch`.

A two-layer MLP predicts ``H = f(X)`` per node from its own features; ``K`` steps of personalised
PageRank then spread the predictions over the graph (Eq. 7-8 of the APPNP paper)::

    Z^0 = H,   Z^{k+1} = (1 - alpha) P Z^k + alpha H,   output Z^K

On a batch, step ``k`` is ``block[k] @ Z`` and the teleport term reads ``H`` at the step's dst
nodes, which lead every layer's src list (see :mod:`.batch`), so ``K`` is the batch's layer count.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .batch import Batch


class APPNP(nn.Module):
    """``num_layers`` propagation steps after a two-layer MLP; same call signatures as :class:`.models.GNN`."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, alpha: float = 0.1,
                 dropout: float = 0.0):
        super().__init__()
        self.mlp_in, self.mlp_out = nn.Linear(in_dim, hidden), nn.Linear(hidden, out_dim)
        self.hidden, self.alpha, self.dropout, self._steps = hidden, alpha, dropout, num_layers

    @property
    def num_layers(self) -> int:
        return self._steps

    def _propagate(self, x: torch.Tensor, blocks: list[torch.Tensor]) -> torch.Tensor:
        h = self.mlp_out(F.dropout(torch.relu(self.mlp_in(x)), self.dropout, self.training))
        z = h
        for block in blocks:
            z = (1 - self.alpha) * (block @ z) + self.alpha * h[: block.shape[0]]
        return z

    def forward_full(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        return self._propagate(x, [adjacency] * self.num_layers)

    def forward(self, x: torch.Tensor, batch: Batch, history=None, write_history: bool = True) -> torch.Tensor:
        if history is not None:
            raise ValueError("APPNP does not use a history; pick a sampler without one")
        if batch.num_layers != self.num_layers:
            raise ValueError(f"batch has {batch.num_layers} layers, APPNP propagates {self.num_layers} steps")
        return self._propagate(x[batch.src_ids[0]], batch.blocks)
