"""Graph attention network (Velickovic et al., ICLR 2018), on the whole graph or a sampled :class:`Batch`.

One layer, per head ``k`` (Eq. 1-4 of the GAT paper)::

    z_j = W^k h_j,   e_ij = LeakyReLU(a_dst^k . z_i + a_src^k . z_j),
    alpha_ij = softmax over j in N(i) of e_ij,   h_i' = sum_j alpha_ij z_j

Hidden layers concatenate ``heads`` heads (ELU between layers); the output layer has one head.
The neighbourhood is the block's sparsity pattern: attention re-weights the entries itself, so
the block's values (a sampler's importance weights) are not used, and a neighbour drawn twice
by a with-replacement sampler counts twice in the softmax. Every step is a tensor op over the
block's entries: a segment softmax (``scatter_reduce``/``index_add``), then the weighted sum. Without
autograd (evaluation on the whole graph) the sum is one sparse product per head, with the attention
weights as the block's values, which never builds an entries x features tensor; with autograd it is
an ``index_add`` (a sampled block may repeat an entry, which CSR's backward rejects).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .batch import Batch


def block_entries(block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, column) of every stored entry of a sparse CSR block."""
    crow = block.crow_indices()
    rows = torch.repeat_interleave(torch.arange(crow.numel() - 1), crow.diff())
    return rows, block.col_indices()


class GATLayer(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, heads: int):
        super().__init__()
        self.heads, self.out_dim = heads, out_dim
        self.linear = nn.Linear(in_dim, heads * out_dim, bias=False)
        self.att_src = nn.Parameter(torch.empty(heads, out_dim))
        self.att_dst = nn.Parameter(torch.empty(heads, out_dim))
        self.bias = nn.Parameter(torch.zeros(heads * out_dim))
        nn.init.xavier_uniform_(self.att_src), nn.init.xavier_uniform_(self.att_dst)

    def forward(self, h: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
        """``h``: the block's src rows (dst rows first); returns the dst rows' outputs."""
        n_dst = block.shape[0]
        z = self.linear(h).view(-1, self.heads, self.out_dim)
        rows, cols = block_entries(block)
        score = F.leaky_relu((z[:n_dst] * self.att_dst).sum(-1)[rows] + (z * self.att_src).sum(-1)[cols], 0.2)
        top = torch.full((n_dst, self.heads), -torch.inf).scatter_reduce(0, rows[:, None].expand_as(score), score,
                                                                         "amax", include_self=True)
        weight = torch.exp(score - top[rows])
        alpha = weight / torch.zeros(n_dst, self.heads).index_add(0, rows, weight)[rows]
        if torch.is_grad_enabled():
            out = torch.zeros(n_dst, self.heads, self.out_dim).index_add(0, rows, alpha[..., None] * z[cols])
            return out.reshape(n_dst, -1) + self.bias
        crow = block.crow_indices()
        out = [torch.sparse_csr_tensor(crow, cols, alpha[:, k], block.shape, check_invariants=False) @ z[:, k]
               for k in range(self.heads)]
        return torch.cat(out, 1) + self.bias


class GAT(nn.Module):
    """``num_layers`` GAT layers; the same call signatures as :class:`.models.GNN` (no history)."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, heads: int = 4,
                 dropout: float = 0.0):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
        dims = [in_dim] + [hidden] * (num_layers - 1)
        self.layers = nn.ModuleList(GATLayer(d, hidden // heads, heads) for d in dims)
        self.layers[-1] = GATLayer(dims[-1], out_dim, 1)
        self.hidden, self.dropout = hidden, dropout

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def _run(self, h: torch.Tensor, blocks: list[torch.Tensor]) -> torch.Tensor:
        for l, (layer, block) in enumerate(zip(self.layers, blocks)):
            if l > 0:
                h = F.dropout(F.elu(h), self.dropout, self.training)
            h = layer(h, block)
        return h

    def forward_full(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        return self._run(x, [adjacency] * self.num_layers)

    def forward(self, x: torch.Tensor, batch: Batch, history=None, write_history: bool = True) -> torch.Tensor:
        if history is not None:
            raise ValueError("GAT does not use a history; pick a sampler without one")
        return self._run(x[batch.src_ids[0]], batch.blocks)
