"""A graph in CSR form, built once per dataset, with the normalised adjacencies GNNs use.

``CSRGraph`` holds the symmetric adjacency ``A`` (no duplicates) plus self loops, so row ``i``
lists ``i`` and its neighbours. Its ``values`` are those of the row-normalised propagation
matrix ``P = D^-1 (A + I)`` (the "L" of MVS-GNN and GraphSAGE-mean), or of the symmetric
``D^-1/2 (A + I) D^-1/2`` (Kipf & Welling's GCN). Everything is a tensor op: no Python loop
runs over nodes or edges.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CSRGraph:
    """Rows ``indptr[i]:indptr[i+1]`` of ``indices``/``values`` are node ``i``'s in-neighbours."""

    indptr: torch.Tensor  # (N + 1,) int64
    indices: torch.Tensor  # (E,) int64, sorted within each row
    values: torch.Tensor  # (E,) float32, the propagation matrix's entries

    @property
    def num_nodes(self) -> int:
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self.indices.numel()

    @property
    def degree(self) -> torch.Tensor:
        """Entries per row, self loop included."""
        return self.indptr.diff()

    @property
    def rows(self) -> torch.Tensor:
        """The row index of every stored entry (COO row vector)."""
        return torch.repeat_interleave(torch.arange(self.num_nodes), self.degree)

    @classmethod
    def from_edge_index(cls, edge_index: torch.Tensor, num_nodes: int, norm: str = "row") -> "CSRGraph":
        """Symmetrise, drop duplicates and existing self loops, add one self loop per node, normalise."""
        if norm not in ("row", "sym"):
            raise ValueError(f"norm must be 'row' or 'sym', got {norm!r}")
        src, dst = edge_index.long()
        keep = src != dst
        src, dst = torch.cat([src[keep], dst[keep]]), torch.cat([dst[keep], src[keep]])
        loops = torch.arange(num_nodes)
        key = torch.unique(torch.cat([src * num_nodes + dst, loops * num_nodes + loops]))  # sorted
        rows, cols = key // num_nodes, key % num_nodes
        indptr = torch.zeros(num_nodes + 1, dtype=torch.long)
        indptr[1:] = torch.cumsum(torch.bincount(rows, minlength=num_nodes), 0)
        deg = indptr.diff().float()
        if norm == "row":
            values = 1.0 / deg[rows]
        else:
            values = deg[rows].rsqrt() * deg[cols].rsqrt()
        return cls(indptr, cols, values)

    def adjacency(self) -> torch.Tensor:
        """The propagation matrix as a sparse CSR tensor (N x N) for full-graph products."""
        n = self.num_nodes
        return torch.sparse_csr_tensor(self.indptr, self.indices, self.values, (n, n), check_invariants=False)

    def row_entries(self, nodes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The stored entries of rows ``nodes``: (local row 0..len(nodes)-1, position in ``indices``)."""
        start, count = self.indptr[nodes], self.degree[nodes]
        local_row = torch.repeat_interleave(torch.arange(nodes.numel()), count)
        offsets = torch.arange(local_row.numel()) - torch.repeat_interleave(torch.cumsum(count, 0) - count, count)
        return local_row, start[local_row] + offsets

    def row_slice(self, nodes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The stored entries of rows ``nodes``: (local row, column, value)."""
        local_row, pos = self.row_entries(nodes)
        return local_row, self.indices[pos], self.values[pos]

    def column_norms_sq(self) -> torch.Tensor:
        """``||P[:, j]||^2`` for every column j (FastGCN/LADIES/GraphSAINT importance)."""
        return torch.zeros(self.num_nodes).index_add_(0, self.indices, self.values**2)
