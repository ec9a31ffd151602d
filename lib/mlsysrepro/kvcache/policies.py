"""Eviction policies: which entries a KV head keeps when it holds more than its budget.

A policy scores every cached entry from the attention it receives and protects some entries outright; the
cache (:class:`.cache.BudgetedCache`) keeps, per KV head, the protected entries and then the highest scores up
to the head's budget. Protected entries count against the budget like any other (sinks and windows included).

- :class:`StreamingLLM` (Xiao et al., ICLR 2024): the first ``sinks`` tokens (attention sinks) and the most recent
  tokens; the score is the position itself.
- :class:`H2O` (Zhang et al., NeurIPS 2023): the heavy hitters, the tokens with the largest attention accumulated
  over every query so far, and a recent window of ``recent_fraction`` of the budget (the paper's half / half).
- :class:`SnapKV` (Li et al., NeurIPS 2024): at prefill, the attention that the last ``window`` queries (the
  observation window) pay each key, summed over the window and max-pooled over neighbouring positions
  (``kernel``); the window itself is kept. SnapKV compresses only the prompt; to hold the same budget while
  decoding, each new query's attention is added to a decaying score (decay ``1 - 1/window``), an exponentially
  weighted observation window that slides with the decoding. This decoding rule is our choice, documented as such.

Query heads of one KV head (grouped-query attention) pool their attention into one score by summing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Policy:
    """Defaults: no sinks, no protected window, scores unused (so: keep the newest entries)."""

    name = "policy"

    def protected(self, budgets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per head, how many sink tokens (the first positions) and how many recent tokens are always kept,
        for ``budgets`` (H,); the two never add up to more than the budget."""
        zero = torch.zeros_like(budgets)
        return zero, zero

    def accumulate(self, score: torch.Tensor, weights: torch.Tensor, prefill: bool) -> torch.Tensor:
        """The new score (B, H, S) after the queries' attention ``weights`` (B, H, T, S), summed over a KV head's
        query heads; ``prefill`` when these are the first tokens of the sequences. May update ``score`` in place
        (the cache owns it)."""
        return score

    def priority(self, score: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """What the cache ranks unprotected entries by (higher is kept)."""
        return positions.to(score.dtype)


def _split(budgets: torch.Tensor, sinks: torch.Tensor, window: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    sinks = torch.minimum(sinks, budgets)
    return sinks, torch.minimum(window, budgets - sinks)


@dataclass(frozen=True)
class StreamingLLM(Policy):
    sinks: int = 4
    name = "streamingllm"

    def protected(self, budgets):
        return _split(budgets, torch.full_like(budgets, self.sinks), torch.zeros_like(budgets))


@dataclass(frozen=True)
class H2O(Policy):
    recent_fraction: float = 0.5
    name = "h2o"

    def protected(self, budgets):
        return _split(budgets, torch.zeros_like(budgets), (budgets * self.recent_fraction).long())

    def accumulate(self, score, weights, prefill):
        return score.add_(weights.sum(2))

    def priority(self, score, positions):
        return score


@dataclass(frozen=True)
class SnapKV(Policy):
    window: int = 16
    kernel: int = 7
    name = "snapkv"

    def protected(self, budgets):
        return _split(budgets, torch.zeros_like(budgets), torch.full_like(budgets, self.window))

    def accumulate(self, score, weights, prefill):
        if prefill:
            votes = weights[:, :, -self.window:].sum(2)
            return F.max_pool1d(votes, self.kernel, stride=1, padding=self.kernel // 2)
        return score.mul_(1 - 1 / self.window).add_(weights.sum(2))

    def priority(self, score, positions):
        return score


POLICIES = {p.name: p for p in (StreamingLLM, H2O, SnapKV)}


def make_policy(name: str, **options) -> Policy:
    """A policy by name (``streamingllm``, ``h2o``, ``snapkv``) with its options."""
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {name!r}")
    return POLICIES[name](**options)
