"""The token-scorer contract: one interface for everything that decides which tokens a model keeps.

A *scorer* ranks tokens; whoever holds the tokens keeps, within a budget, the protected ones and then those of
highest priority. The KV-cache eviction policies (:mod:`.policies`: StreamingLLM, H2O, SnapKV) are scorers that a
:class:`.cache.BudgetedCache` consults after every attention; a token pruner that drops tokens before prefill (a
vision-token pruner, say) is a scorer whose score reads the tokens' states instead of attention. Like kvpress'
"presses": one contract, one small class per method, registered by name (:func:`register_scorer`,
:func:`make_scorer`).

A scorer answers four questions (each has a default, so a method overrides only what it changes):

- :meth:`TokenScorer.protected`: per head, how many sink tokens (the first positions) and recent tokens are kept
  whatever their score, for the heads' budgets;
- :meth:`TokenScorer.query_weights`: whose attention it reads, a weight per new query (None: none; then the
  model never writes out attention weights and runs its fused kernel);
- :meth:`TokenScorer.accumulate`: the running score of every token after one more :class:`Observation` (the
  attention the new queries paid, or the tokens' hidden states);
- :meth:`TokenScorer.priority`: what unprotected tokens are ranked by, higher kept.

:func:`ranked` turns the three answers into one priority per token (protected +inf, empty slots -inf), and
:func:`keep_mask` applies a budget to it: the selection rule the budgeted cache and every pruner share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch


@dataclass(frozen=True)
class Observation:
    """What a scorer may read at one step.

    ``paid``: (B, H, S) attention that the new queries paid each of the S tokens, weighted per query by the
    scorer's :meth:`TokenScorer.query_weights`, summed over those queries and over the query heads that share a
    KV head (None for a scorer that reads no attention). ``queries``: how many new queries there were (T).
    ``prefill``: these are the first tokens of the sequences. ``states``: (B, S, D) hidden states of the scored
    tokens, for scorers that read content (a learned pruner); None when the caller has none. ``query``: (B, L, D)
    the states of the text that a query-aware pruner reads beside the scored tokens (the question)."""

    paid: torch.Tensor | None = None
    prefill: bool = False
    queries: int = 0
    states: torch.Tensor | None = None
    query: torch.Tensor | None = None


@dataclass(frozen=True)
class TokenScorer:
    """Defaults: no sinks, no protected window, scores unused (so: keep the newest tokens)."""

    name: ClassVar[str] = "scorer"

    def protected(self, budgets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per head, how many sink tokens (the first positions) and how many recent tokens are always kept, for
        ``budgets`` (H,); the two never add up to more than the budget."""
        zero = torch.zeros_like(budgets)
        return zero, zero

    def query_weights(self, queries: int, prefill: bool) -> torch.Tensor | None:
        """(T,) how much the attention of each of ``queries`` new queries counts in :attr:`Observation.paid`; None
        when the scorer reads no attention."""
        return None

    def accumulate(self, score: torch.Tensor, seen: Observation) -> torch.Tensor:
        """The new score (B, H, S) after ``seen``. May update ``score`` in place (its holder owns it)."""
        return score

    def priority(self, score: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """What unprotected tokens are ranked by (higher is kept)."""
        return positions.to(score.dtype)


def split_protected(budgets: torch.Tensor, sinks: torch.Tensor,
                    window: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sinks, window)`` cut to fit ``budgets``: sinks first, then as much of the window as is left."""
    sinks = torch.minimum(sinks, budgets)
    return sinks, torch.minimum(window, budgets - sinks)


def ranked(scorer: TokenScorer, score: torch.Tensor, positions: torch.Tensor, sinks: torch.Tensor,
           window: torch.Tensor) -> torch.Tensor:
    """(B, H, S) priority of every slot: the scorer's, +inf for protected tokens (the first ``sinks`` positions and
    the ``window`` most recent ones, per head (H,)), -inf for empty slots (position -1)."""
    now = positions.max(-1, keepdim=True).values
    protect = (positions >= 0) & ((positions < sinks[:, None]) | (positions > now - window[:, None]))
    priority = scorer.priority(score, positions).masked_fill(protect, float("inf"))
    return priority.masked_fill(positions < 0, float("-inf"))


def keep_mask(scorer: TokenScorer, score: torch.Tensor, positions: torch.Tensor,
              budgets: torch.Tensor) -> torch.Tensor:
    """(B, H, S) True for the tokens kept within ``budgets`` (H,): the protected ones, then the highest priority
    (ties to the earlier slot), never an empty slot."""
    sinks, window = scorer.protected(budgets)
    priority = ranked(scorer, score, positions, sinks, window)
    order = priority.argsort(dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(order.shape[-1]).expand_as(order))
    return (rank < budgets[:, None]) & (positions >= 0)


SCORERS: dict[str, type[TokenScorer]] = {}


def register_scorer(cls: type[TokenScorer]) -> type[TokenScorer]:
    """Class decorator: make ``cls`` available to :func:`make_scorer` under ``cls.name`` (once)."""
    if cls.name in SCORERS:
        raise ValueError(f"a token scorer named {cls.name!r} is already registered")
    SCORERS[cls.name] = cls
    return cls


def make_scorer(name: str, **options) -> TokenScorer:
    """A registered scorer by name, with its options."""
    if name not in SCORERS:
        raise ValueError(f"scorer must be one of {sorted(SCORERS)}, got {name!r}")
    return SCORERS[name](**options)

