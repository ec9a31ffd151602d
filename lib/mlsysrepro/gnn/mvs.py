"""MVS-GNN: minimal-variance node sampling with historical embeddings (Cong et al., KDD 2020).

The variance of a sampled GNN gradient splits into an *embedding-approximation* part (from
sampled neighbourhoods) and a *stochastic-gradient* part (from sampled training nodes).
MVS-GNN attacks both (Algorithm 1):

1. Every ``K`` steps, a checkpoint: take a fraction ``gamma`` of the training nodes uniformly,
   compute exact embeddings and each node's gradient norm ``g_i`` (:func:`last_layer_grad_norms`),
   and refresh the history. The paper runs the exact forward over the L-hop computation graph of
   the gamma subset; we run it over the whole graph (one sparse product per layer), which
   refreshes every node's history and, on graphs where the L-hop graph of the subset is most of
   the graph (all of ours at gamma = 100 %), costs less than building that computation graph.
2. Sample with the minimal-variance probabilities ``p_i = min(1, g_i / mu)``, ``mu`` solving
   ``sum_i min(1, g_i / mu) = B`` (Eqs. 8-9, Theorem 4.1; :func:`mvs_probabilities`): each
   candidate joins the batch independently with probability ``p_i`` and its loss is weighted
   ``1 / (p_i |C|)``, which keeps the mini-batch gradient unbiased.
3. For the next ``K`` steps the batch aggregates fresh embeddings inside the batch and stored
   ones outside (Eq. 7; :class:`.samplers.OneHopHistory`), or every neighbour exactly
   (:class:`.samplers.FullNeighborhood`, the setting of the paper's Fig. 4).

As in the authors' code, ``g_i`` is the norm of node i's gradient of the *last* layer's
weight and bias; for a linear last layer ``o_i = W z_i + b`` and cross-entropy it is
``||softmax(o_i) - e_{y_i}|| * sqrt(||z_i||^2 + 1)`` (an outer product's norm; :mod:`.losses`
has the multi-label form), so no per-node backward pass is needed.
"""

from __future__ import annotations

import torch

from .losses import output_gradient


def mvs_probabilities(weights: torch.Tensor, batch_size: float) -> torch.Tensor:
    """``p_i = min(1, w_i / mu)`` with ``sum p = batch_size`` (Eq. 9), in O(n log n).

    Sorting ``w`` descending, if the ``k`` largest are capped at 1 then
    ``mu_k = (sum of the rest) / (B - k)``; the answer is the smallest ``k`` whose next weight
    does not exceed ``mu_k``. With fewer than ``B`` positive weights every positive one gets 1.
    Computed and returned in float64, so ``sum p = B`` holds to ~1e-12.
    """
    w = weights.double()
    n = w.numel()
    if (w < 0).any() or not torch.isfinite(w).all():
        raise ValueError("weights must be finite and non-negative")
    if not 0 < batch_size <= n:
        raise ValueError(f"batch_size must be in (0, {n}], got {batch_size}")
    positive = int((w > 0).sum())
    if positive <= batch_size:
        return (w > 0).double()
    desc, _ = torch.sort(w, descending=True)
    k = torch.arange(int(batch_size) + 1, dtype=torch.double)  # number of capped weights
    capped_sum = torch.cat([torch.zeros(1, dtype=torch.double), torch.cumsum(desc, 0)])[: k.numel()]
    mu = (w.sum() - capped_sum) / (batch_size - k)
    valid = (desc[: k.numel()] <= mu) & (batch_size - k > 0)
    mu_star = mu[int(valid.nonzero()[0])]
    return torch.clamp(w / mu_star, max=1.0)


def last_layer_grad_norms(logits: torch.Tensor, last_input: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-node norm of the loss gradient w.r.t. the last layer's weight and bias."""
    return output_gradient(logits, y).norm(dim=1) * torch.sqrt((last_input**2).sum(1) + 1.0)


def sampling_variance(logits: torch.Tensor, last_input: torch.Tensor, y: torch.Tensor,
                      batch_size: int) -> dict[str, float]:
    """When MVS's batches beat a fixed-size uniform batch: the last layer's per-node gradients ``g_i`` (weight
    and bias) of ``N`` candidates against batches of (expected) size ``B`` (a diagnostic of ours, not the paper's).

    The two estimators of the mean gradient have the variances

        V_MVS     = (1/N^2) sum_i (1 - p_i) / p_i ||g_i||^2        (p_i = min(1, ||g_i|| / mu), Eq. 9)
        V_uniform = (1/B) (1 - B/N) N/(N - 1) E||g_i - g_mean||^2  (B nodes without replacement).

    With no ``p_i`` capped at 1, ``V_MVS = E||g_i||^2 (rho - f) / B`` and ``V_uniform ~ E||g_i||^2 (1 - a)(1 - f) / B``,
    where ``f = B/N``, ``rho = (E||g_i||)^2 / E||g_i||^2`` (1 when every norm is equal, small when a few nodes
    dominate) and ``a = ||g_mean||^2 / E||g_i||^2`` (1 when every gradient is equal, 0 when they cancel). The rule
    of thumb: MVS has the lower variance when ``rho + a (1 - f) < 1`` -- the norms must be spread *and* the
    gradients must not share a direction; as ``a <= rho``, ``a >= 1/2`` rules MVS out whatever the norms.

    When the norms are so spread that ``k`` nodes are capped (``p_i = 1``, always sampled, no variance), ``rho - f``
    (negative once ``rho < f``) gives way to its capped form ``rho_c - f = B (S^2 / (B - k) - Q) / (N^2 E||g_i||^2)``,
    ``S`` and ``Q`` the sum of the uncapped norms and of their squares: the same ``V_MVS`` without the capped
    nodes' terms, never negative, equal to ``rho - f`` when ``k = 0``.

    Returns ``rho``, ``alignment`` (a), ``capped`` (k), ``rule_of_thumb`` = (rho_c - f) / ((1 - a)(1 - f)) and
    ``last_layer_ratio`` = V_MVS / V_uniform with MVS's actual, capped probabilities (ratios < 1: MVS has the lower
    variance).
    """
    n = y.numel()
    if not 0 < batch_size < n:
        raise ValueError(f"batch_size must be in (0, {n}) (the candidates), got {batch_size}")
    delta = output_gradient(logits, y).double()
    z1 = torch.cat([last_input.double(), torch.ones(n, 1, dtype=torch.double)], 1)  # the bias: a weight on 1
    sq_norms = (delta**2).sum(1) * (z1**2).sum(1)  # ||g_i||^2 of the outer product delta_i z1_i^T
    mean_sq = sq_norms.mean()
    mean_grad_sq = ((delta.T @ z1 / n) ** 2).sum()
    rho = float(sq_norms.sqrt().mean() ** 2 / mean_sq)
    alignment = float(mean_grad_sq / mean_sq)
    f = batch_size / n
    norms = sq_norms.sqrt()
    p = mvs_probabilities(norms, batch_size)
    free = p < 1
    capped = n - int(free.sum())
    # every node with a gradient capped (no more of them than B): MVS takes them all, with no variance
    excess = (batch_size * (norms[free].sum() ** 2 / (batch_size - capped) - sq_norms[free].sum()) / (n**2 * mean_sq)
              if capped < batch_size else 0.0)
    terms = torch.where(p > 0, (1 - p) / p.clamp(min=1e-300) * sq_norms, torch.zeros(1, dtype=torch.double))
    v_mvs = terms.sum() / n**2
    v_uniform = (1 - f) / batch_size * n / (n - 1) * (mean_sq - mean_grad_sq)
    spread = (1 - alignment) * (1 - f)
    return {"rho": rho, "alignment": alignment, "capped": capped,
            "rule_of_thumb": float(excess) / spread if spread > 0 else float("inf"),
            "last_layer_ratio": float(v_mvs / v_uniform) if v_uniform > 0 else float("inf")}


class MVSSampler:
    """MVS-GNN's sampler: checkpoint every ``inner_steps``, then Bernoulli(p_i) batches."""

    def __init__(self, builder, train_idx: torch.Tensor, batch_size: int, gamma: float, inner_steps: int,
                 generator: torch.Generator):
        if not 0 < gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], got {gamma}")
        if inner_steps < 1:
            raise ValueError(f"inner_steps must be >= 1, got {inner_steps}")
        self.builder, self.train_idx, self.gamma, self.inner_steps = builder, train_idx, gamma, inner_steps
        self.num_candidates = max(1, round(gamma * train_idx.numel()))
        self.batch_size = min(batch_size, self.num_candidates)
        self.uses_history = True  # the checkpoint refreshes it; OneHopHistory reads it
        self.generator = generator
        self.candidates = self.probabilities = None

    def refresh(self, model, data, history, step: int) -> None:
        """The checkpoint of Algorithm 1 (every ``inner_steps`` steps): exact forward, gradient norms, p."""
        if step % self.inner_steps:
            return
        pick = torch.randperm(self.train_idx.numel(), generator=self.generator)[: self.num_candidates]
        self.candidates = self.train_idx[pick]
        adjacency = data.graph.adjacency()
        inputs, logits, last_input = model.exact_pass(data.x, adjacency)  # no dropout
        if history is not None:
            history.fill(inputs)
        c = self.candidates
        norms = last_layer_grad_norms(logits[c], last_input[c], data.y[c])
        self.probabilities = mvs_probabilities(norms, self.batch_size)

    def sample(self, generator: torch.Generator):
        if self.probabilities is None:
            raise RuntimeError("MVSSampler.sample() before refresh(): the first checkpoint computes p")
        while True:
            chosen = torch.rand(self.num_candidates, generator=generator) < self.probabilities
            if chosen.any():
                break
        p = self.probabilities[chosen]
        weights = (1.0 / (p * self.num_candidates)).float()
        return self.builder.build(self.candidates[chosen], weights, generator)
