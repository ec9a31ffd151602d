"""Per-node losses for single-label and multi-label node classification, and their output gradients.

Single-label targets are a vector of class ids (cross-entropy, softmax); multi-label targets
(PPI, Yelp) are an ``N x C`` 0/1 matrix (binary cross-entropy averaged over the C labels, as
the papers' code does). :func:`output_gradient` is ``d loss_i / d logits_i`` in closed form, which
MVS-GNN's gradient-norm trick needs.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def is_multilabel(y: torch.Tensor) -> bool:
    return y.dim() == 2


def node_losses(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One loss per node: cross-entropy, or binary cross-entropy averaged over the labels."""
    if is_multilabel(y):
        return F.binary_cross_entropy_with_logits(logits, y.float(), reduction="none").mean(1)
    return F.cross_entropy(logits, y, reduction="none")


def output_gradient(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``d node_losses(logits, y)_i / d logits_i``: ``softmax - onehot``, or ``(sigmoid - y) / C``."""
    if is_multilabel(y):
        return (torch.sigmoid(logits) - y.float()) / y.shape[1]
    delta = torch.softmax(logits, 1)
    delta[torch.arange(y.numel()), y] -= 1.0
    return delta


def f1_micro(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Micro-averaged F1: accuracy for single-label targets; over every (node, label) pair otherwise."""
    if not is_multilabel(y):
        return float((logits.argmax(1) == y).float().mean())
    predicted, truth = logits > 0, y.bool()
    true_positives = (predicted & truth).sum()
    return float(2 * true_positives / (predicted.sum() + truth.sum()).clamp(min=1))
