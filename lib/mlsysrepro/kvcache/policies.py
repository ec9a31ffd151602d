"""Eviction policies: which entries a KV head keeps when it holds more than its budget.

A policy is a token scorer (:class:`.scoring.TokenScorer`, the contract every KV eviction method and token pruner
implements): it scores every cached entry from the attention it receives and protects some entries outright; the
cache (:class:`.cache.BudgetedCache`) keeps, per KV head, the protected entries and then the highest scores up
to the head's budget. Protected entries count against the budget like any other (sinks and windows included).

- :class:`StreamingLLM` (Xiao et al., ICLR 2024): the first ``sinks`` tokens (attention sinks) and the most recent
  tokens; the score is the position itself.
- :class:`H2O` (Zhang et al., NeurIPS 2023): the heavy hitters, the tokens with the largest attention accumulated
  over every query so far, and a recent window of ``recent_fraction`` of the budget (the paper's half / half).
- :class:`SnapKV` (Li et al., NeurIPS 2024): at prefill, the attention that the last ``window`` queries (the
  observation window) pay each key before the window, summed over the window and average-pooled over
  neighbouring positions (``kernel``, zero-padded), as the authors' code and NVIDIA kvpress do; the window itself
  is kept. SnapKV compresses only the prompt; to hold the same budget while
  decoding, each new query's attention is added to a decaying score (decay ``1 - 1/window``), an exponentially
  weighted observation window that slides with the decoding. This decoding rule is our choice, documented as such.

- :class:`TemporalThreshold` (AsymVLM, Feng et al. 2026): the text eviction of a VLM: the image and the sinks
  kept, cold text tokens (a recent-attention average below a threshold) evicted oldest first once the text is
  over its budget.

Query heads of one KV head (grouped-query attention) pool their attention into one score by summing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .scoring import SCORERS, TokenScorer, make_scorer, register_scorer, split_protected


@register_scorer
@dataclass(frozen=True)
class StreamingLLM(TokenScorer):
    sinks: int = 4
    name = "streamingllm"

    def protected(self, budgets):
        return split_protected(budgets, torch.full_like(budgets, self.sinks), torch.zeros_like(budgets))


@register_scorer
@dataclass(frozen=True)
class H2O(TokenScorer):
    recent_fraction: float = 0.5
    name = "h2o"

    def protected(self, budgets):
        return split_protected(budgets, torch.zeros_like(budgets), (budgets * self.recent_fraction).long())

    def query_weights(self, queries, prefill):
        return torch.ones(queries)

    def accumulate(self, score, seen):
        return score.add_(seen.paid)

    def priority(self, score, positions):
        return score


@register_scorer
@dataclass(frozen=True)
class SnapKV(TokenScorer):
    window: int = 16
    kernel: int = 5
    name = "snapkv"

    def protected(self, budgets):
        return split_protected(budgets, torch.zeros_like(budgets), torch.full_like(budgets, self.window))

    def query_weights(self, queries, prefill):
        """At prefill the votes of the last ``window`` queries (the observation window); then every query."""
        weights = torch.ones(queries)
        if prefill:
            weights[:max(0, queries - self.window)] = 0
        return weights

    def accumulate(self, score, seen):
        if seen.prefill:
            votes = seen.paid
            prefix = votes.shape[-1] - self.window
            if prefix <= 0:  # the whole prompt is the window, which is kept anyway
                return votes
            # the window's own keys take no part in the pooling: they would lend their votes to their neighbours
            pooled = F.avg_pool1d(votes[..., :prefix], self.kernel, stride=1, padding=self.kernel // 2)
            return torch.cat([pooled, votes[..., prefix:]], dim=-1)
        return score.mul_(1 - 1 / self.window).add_(seen.paid)

    def priority(self, score, positions):
        return score


@register_scorer
@dataclass(frozen=True)
class TemporalThreshold(TokenScorer):
    """AsymVLM's text-token eviction (our reading of "temporal threshold-based eviction, applied only when the text
    tokens exceed a fixed budget"). The first ``vision`` positions (the image, pruned before prefill) and ``sinks``
    text tokens after them are never evicted, nor the ``recent`` newest tokens; so the cache's budget minus those
    is the text budget, and nothing is evicted until the text exceeds it. Each token's score is an exponential
    moving average of the attention it receives, ``s <- decay * s + (1 - decay) * a`` per query (at prefill the
    queries in order): its *temporal* relevance, which fades unless the token keeps being read. Over budget, the
    token whose average has fallen lowest goes first, whatever its age. (A threshold on the average, "cold below
    it", orders the evictions exactly as the average does, so none is carried: the budget is the trigger.)"""

    vision: int = 0
    sinks: int = 1
    recent: int = 4
    decay: float = 0.9
    name = "temporal_threshold"

    def __post_init__(self):
        if not 0 <= self.decay < 1:
            raise ValueError(f"decay must be in [0, 1), got {self.decay}")
        if self.vision < 0 or self.sinks < 0 or self.recent < 0:
            raise ValueError("vision, sinks and recent must be >= 0")

    def protected(self, budgets):
        return split_protected(budgets, torch.full_like(budgets, self.vision + self.sinks),
                               torch.full_like(budgets, self.recent))

    def query_weights(self, queries, prefill):
        """The T queries folded in order: query t weighs ``(1 - decay) * decay^(T-1-t)``, the last the most."""
        return (1 - self.decay) * self.decay ** torch.arange(queries - 1, -1, -1, dtype=torch.float64)

    def accumulate(self, score, seen):
        return score.mul_(self.decay ** seen.queries).add_(seen.paid)

    def priority(self, score, positions):
        return score


POLICIES = {name: SCORERS[name] for name in ("streamingllm", "h2o", "snapkv", "temporal_threshold")}


def make_policy(name: str, **options) -> TokenScorer:
    """A policy by name (``streamingllm``, ``h2o``, ``snapkv``, ``temporal_threshold``) with its options."""
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {name!r}")
    return make_scorer(name, **options)
