"""DLRM (Naumov et al., 2019): a bottom MLP over the dense features, one EmbeddingBag table per sparse feature
(sum-pooled), the dot interaction of every pair of the resulting vectors, and a top MLP to one logit.

The embedding stage (:meth:`DLRM.embed`) runs the tables one after the other, as the reference ``dlrm_s_pytorch``
does with its list of ``nn.EmbeddingBag`` and as the MICRO'24 artifact times it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def mlp(sizes: Sequence[int], last_activation: bool = True) -> nn.Sequential:
    """Linear layers of ``sizes`` with ReLU between them (and after the last when ``last_activation``)."""
    layers: list[nn.Module] = []
    for i, (inputs, outputs) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(inputs, outputs))
        if last_activation or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """``dense_features`` -> bottom MLP ``bottom`` (its last width is ``dim``); ``tables`` tables of ``rows`` x
    ``dim``; the strictly upper triangle of the (tables + 1)^2 dot products beside the bottom output; top MLP
    ``top`` (ending in 1 logit)."""

    def __init__(self, dense_features: int, bottom: Sequence[int], tables: int, rows: int, dim: int,
                 top: Sequence[int]):
        super().__init__()
        if bottom[-1] != dim:
            raise ValueError(f"bottom must end at dim={dim} (the dot interaction pairs equal widths), got {bottom}")
        if tables < 1 or rows < 1:
            raise ValueError(f"tables and rows must be >= 1, got {tables}, {rows}")
        self.bottom = mlp([dense_features, *bottom])
        self.tables = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        vectors = tables + 1
        pairs = vectors * (vectors - 1) // 2
        self.top = mlp([dim + pairs, *top], last_activation=False)
        upper = torch.triu_indices(vectors, vectors, offset=1)
        self.register_buffer("upper", upper, persistent=False)

    def embed(self, indices: torch.Tensor, offsets: torch.Tensor) -> list[torch.Tensor]:
        """Every table's pooled vectors (batch x dim) for one stream of ``indices`` and ``offsets`` per table
        (``indices``: tables x lookups, or one row shared by every table)."""
        rows = indices.expand(len(self.tables), -1) if indices.dim() == 1 else indices
        return [table(rows[t], offsets) for t, table in enumerate(self.tables)]

    def interact(self, dense: torch.Tensor, pooled: list[torch.Tensor]) -> torch.Tensor:
        """The dot interaction: the bottom output beside every pair's dot product."""
        vectors = torch.stack([dense, *pooled], dim=1)
        dots = vectors @ vectors.transpose(1, 2)
        return torch.cat([dense, dots[:, self.upper[0], self.upper[1]]], dim=1)

    def forward(self, dense: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.top(self.interact(self.bottom(dense), self.embed(indices, offsets))).squeeze(1)
