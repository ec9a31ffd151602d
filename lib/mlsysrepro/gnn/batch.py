"""The one batch type every sampler returns and every model consumes.

A GNN of ``L`` layers computes, at layer ``l``, outputs for ``dst`` nodes from inputs on ``src``
nodes through an aggregation matrix ``block[l]`` (``len(dst) x len(src)``). Conventions:

- ``src_ids[l]`` lists layer ``l``'s input nodes, its outputs first: ``src_ids[l][:num_dst[l]]``
  are the ``dst`` nodes, so a layer can read a node's own input (GraphSAGE's self term).
- ``src_ids[l + 1]`` starts with layer ``l``'s ``dst`` nodes; if it is longer, the remaining
  rows are read from the model's history (stored embeddings; VR-GCN and MVS-GNN, Eq. 7 of
  MVS-GNN: fresh inside the batch, historical outside).
- ``block[l]`` is already normalised and importance-weighted, so ``block[l] @ h`` estimates
  ``P[dst] @ h`` (unbiasedly for the node-wise, layer-wise and full-neighbour samplers).
- ``cv_rows[l]`` (VR-GCN only): the exact rows ``P[dst, :]`` over all N nodes, used with the
  history as a control variate: ``block @ (h - hist[src]) + cv_rows @ hist``.
- ``loss_weight`` weights each output node's loss; their weighted sum estimates the mean
  training loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Batch:
    src_ids: list[torch.Tensor]
    num_dst: list[int]
    blocks: list[torch.Tensor]  # sparse CSR (num_dst[l] x len(src_ids[l]))
    loss_weight: torch.Tensor
    cv_rows: list[torch.Tensor | None] | None = None

    @property
    def num_layers(self) -> int:
        return len(self.blocks)

    @property
    def output_ids(self) -> torch.Tensor:
        """The nodes whose predictions enter the loss."""
        return self.src_ids[-1][: self.num_dst[-1]]


def sparse_block(rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """A sparse CSR matrix from entries whose ``rows`` are sorted (every builder emits them so).

    Repeated (row, column) entries are summed by the product, so a neighbour drawn twice counts
    twice. CSR needs no coalescing and multiplies several times faster than COO on the CPU.
    """
    if rows.numel() > 1 and bool((rows[1:] < rows[:-1]).any()):
        raise ValueError("sparse_block needs entries sorted by row")
    crow = torch.zeros(shape[0] + 1, dtype=torch.long)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=shape[0]), 0)
    return torch.sparse_csr_tensor(crow, cols, values, shape, check_invariants=False)


def relabel(dst: torch.Tensor, neighbours: torch.Tensor, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``src = dst ++ (neighbours not in dst, ascending)`` and each neighbour's position in ``src``.

    Marks nodes in a boolean array instead of sorting the neighbour list (``torch.unique``): O(N + E).
    """
    seen = torch.zeros(num_nodes, dtype=torch.bool)
    seen[neighbours] = True
    seen[dst] = False
    extra = seen.nonzero().view(-1)
    local = torch.empty(num_nodes, dtype=torch.long)
    local[dst] = torch.arange(dst.numel())
    local[extra] = torch.arange(dst.numel(), dst.numel() + extra.numel())
    return torch.cat([dst, extra]), local[neighbours]
