"""The vision-token pruners AsymVLM is compared with, and AsymVLM's own, each one small scorer class.

All are :class:`.pruning.VisionPruner` s, registered by name (:func:`.scoring.make_scorer`). What each reads and
keeps (the published methods on our 4-layer decoder; "-like" marks a simplification, said in its docstring):

- ``random``: a random subset (seeded): the floor any signal must beat.
- ``pooling``: spatial pooling: kept tokens spread evenly over the patch grid, each dropped token averaged into
  its nearest kept one (so the image is seen at a coarser resolution).
- ``fastv`` (Chen et al., ECCV 2024): after layer K, the tokens the last text token attends to most.
- ``pyramiddrop`` (Xing et al., CVPR 2025): FastV's signal at several stages, keeping a fixed ratio at each.
- ``sparsevlm`` (Zhang et al., ICML 2025), SparseVLM-like: the attention that the question's tokens pay the
  vision tokens at an early layer (the text "raters"; without its token recycling).
- ``visionzip`` (Yang et al., CVPR 2025), VisionZip-like: before prefill, the dominant tokens by the ViT's [CLS]
  attention, plus contextual tokens into which the rest are merged by similarity.
- ``fitprune`` (Ye et al., AAAI 2025), FitPrune-like: the text's attention, with per-layer keep counts fitted
  offline on calibration data (:func:`.schedules.fit_counts`) instead of FitPrune's attention-divergence search.
- ``asymvlm`` (Feng, Gulhan, Kandemir 2026): a learned scorer before prefill (:class:`RelevanceScorer`, trained
  on how much the unpruned model's answer depends on each token, :func:`.pruning.answer_saliency`), with a
  per-sample adaptive budget (:class:`.pruning.AdaptiveBudget`); the scorer's architecture and target are our
  documented choices (the paper does not publish them).
- ``oracle``: the patches of the cells that hold the answer first (the upper bound a scorer could reach).
- ``teacher``: a relevance computed outside the prefill from the unpruned model (its answer saliency, which
  AsymVLM's scorer learns to predict, or its text-to-vision attention): what a scorer fitting that target exactly
  would keep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from .pruning import VisionPruner
from .scoring import register_scorer


def _grid(positions: torch.Tensor, side: int) -> torch.Tensor:
    """(B, N, 2) patch-grid coordinates (row, col) of vision tokens at ``positions`` (raster order)."""
    return torch.stack((positions // side, positions % side), -1).to(torch.float32)


def _average_into(states: torch.Tensor, keep: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
    """Each kept token's state averaged with the tokens it owns: ``owner`` (B, N) is the index into ``keep`` (B, k)
    of the token each of the N tokens is merged into (a kept token owns itself)."""
    b, k, d = *keep.shape, states.shape[-1]
    total = states.new_zeros(b, k, d).scatter_add_(1, owner[..., None].expand(-1, -1, d), states)
    count = states.new_zeros(b, k).scatter_add_(1, owner, states.new_ones(owner.shape))
    return total / count[..., None]


@register_scorer
@dataclass(frozen=True)
class RandomPruner(VisionPruner):
    seed: int = 0
    name: ClassVar[str] = "random"

    def accumulate(self, score, seen):
        return torch.rand(score.shape, generator=torch.Generator().manual_seed(self.seed))


def spread_order(side: int) -> torch.Tensor:
    """(side², ) a rank for every patch such that, for any k, the k best-ranked patches are spread evenly over the
    grid: the patches sorted by their bit-reversed Morton (Z-order) code, a 2-D van der Corput sequence."""
    bits = max(1, (side - 1).bit_length())
    rows, cols = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    code = torch.zeros(side, side, dtype=torch.long)
    for bit in range(bits):  # interleave the bits of row and col, most significant first after reversal
        code |= ((rows >> bit) & 1) << (2 * (bits - 1 - bit) + 1)
        code |= ((cols >> bit) & 1) << (2 * (bits - 1 - bit))
    rank = torch.empty(side * side, dtype=torch.long)
    rank[code.flatten().argsort()] = torch.arange(side * side)
    return rank


@register_scorer
@dataclass(frozen=True)
class SpatialPooling(VisionPruner):
    side: int = 8
    name: ClassVar[str] = "pooling"

    def accumulate(self, score, seen):
        return -spread_order(self.side).to(score.dtype).expand_as(score).clone()

    def merge(self, states, positions, keep, side, score):
        grid = _grid(positions, side)
        kept = grid.gather(1, keep[..., None].expand(-1, -1, 2))
        owner = torch.cdist(grid, kept).argmin(-1)  # nearest kept patch (ties to the earlier one)
        return _average_into(states, keep, owner)


@dataclass(frozen=True)
class AttentionPruner(VisionPruner):
    """Ranks the vision tokens by the attention the signal it ``reads`` paid them (summed over its queries)."""

    def accumulate(self, score, seen):
        return seen.paid


@register_scorer
@dataclass(frozen=True)
class FastV(AttentionPruner):
    name: ClassVar[str] = "fastv"
    reads: ClassVar[str] = "last"


@register_scorer
@dataclass(frozen=True)
class PyramidDrop(FastV):
    name: ClassVar[str] = "pyramiddrop"


@register_scorer
@dataclass(frozen=True)
class SparseVLM(AttentionPruner):
    name: ClassVar[str] = "sparsevlm"
    reads: ClassVar[str] = "text"


@register_scorer
@dataclass(frozen=True)
class FitPrune(SparseVLM):
    name: ClassVar[str] = "fitprune"


@register_scorer
@dataclass(frozen=True)
class VisionZip(AttentionPruner):
    """Dominant tokens by [CLS] attention; ``contextual_share`` of the budget (VisionZip's 10 of 64) are targets
    spread evenly over the rest, each remaining token merged into the target whose state is most similar (cosine)."""

    contextual_share: float = 10 / 64
    name: ClassVar[str] = "visionzip"
    reads: ClassVar[str] = "cls"

    def _contextual(self, count: int) -> int:
        return min(count - 1, round(count * self.contextual_share))

    def select(self, score, positions, count):
        contextual = self._contextual(count)
        dominant = score.topk(count - contextual, dim=-1).indices
        if not contextual:
            return dominant.sort(-1).values
        rest = score.scatter(1, dominant, float("inf")).argsort(-1)[:, :score.shape[-1] - dominant.shape[1]]
        spread = torch.linspace(0, rest.shape[1] - 1, contextual).round().long()
        return torch.cat((dominant, rest.sort(-1).values[:, spread]), 1).sort(-1).values

    def merge(self, states, positions, keep, side, score):
        b, n, d = states.shape
        contextual = self._contextual(keep.shape[1])
        kept = states.gather(1, keep[..., None].expand(-1, -1, d))
        if not contextual:
            return kept
        # the targets are the kept tokens outside the dominant ones (the highest scores)
        is_dominant = torch.zeros(b, n, dtype=torch.bool).scatter_(
            1, score.topk(keep.shape[1] - contextual, dim=-1).indices, True)
        target = ~is_dominant.gather(1, keep)  # (B, k)
        similarity = F.normalize(states, dim=-1) @ F.normalize(kept, dim=-1).transpose(1, 2)  # (B, N, k)
        owner = similarity.masked_fill(~target[:, None], float("-inf")).argmax(-1)
        slot = torch.full((b, n), -1).scatter_(1, keep, torch.arange(keep.shape[1]).expand_as(keep))
        owner = torch.where(slot >= 0, slot, owner)  # a kept token owns itself; dominant ones absorb nothing else
        return _average_into(states, keep, owner)


@dataclass(frozen=True)
class GivenRelevance(VisionPruner):
    """Ranks by ``relevance`` (B, N), a score per vision token that is set for each batch from outside the model's
    prefill (so it costs no FLOPs here: these pruners are references, not methods)."""

    relevance: torch.Tensor | None = None

    def given(self, score: torch.Tensor) -> torch.Tensor:
        if self.relevance is None or self.relevance.shape != score[:, 0].shape:
            raise ValueError(f"{self.name}: relevance must be set to the batch's (B, N) scores, got "
                             f"{None if self.relevance is None else tuple(self.relevance.shape)}")
        return self.relevance[:, None].to(score.dtype)


@register_scorer
@dataclass(frozen=True)
class Oracle(GivenRelevance):
    """``relevance``: 1 on the patches of the cells that hold the answer, ties broken by the [CLS] attention."""

    name: ClassVar[str] = "oracle"
    reads: ClassVar[str] = "cls"

    def accumulate(self, score, seen):
        return self.given(score) + seen.paid


@register_scorer
@dataclass(frozen=True)
class Teacher(GivenRelevance):
    """``relevance``: a target computed from the unpruned model, named by ``signal``: ``saliency``
    (:func:`.pruning.answer_saliency`, what AsymVLM's scorer is trained on) or ``attention``
    (:func:`.pruning.text_to_vision_relevance`, what a scorer distilled from attention would learn). Pruning by it
    shows what a scorer would keep if it fitted that target exactly; computing it takes a whole unpruned prefill,
    so it is a diagnostic, never a method."""

    signal: str = "saliency"
    name: ClassVar[str] = "teacher"

    def __post_init__(self):
        if self.signal not in ("saliency", "attention"):
            raise ValueError(f"signal must be 'saliency' or 'attention', got {self.signal!r}")

    def accumulate(self, score, seen):
        return self.given(score)


class RelevanceScorer(nn.Module):
    """AsymVLM's learned scorer (our architecture): a keep-logit per vision token from the token and the question,

        s_i = k(v_i) · sum_l q(e_l + p_l) / sqrt(h) + w · k(v_i),

    with ``k`` and ``q`` two-layer MLPs to width ``h``, ``e_l`` the question's embeddings and ``p_l`` a learned
    embedding of each token's place counted from the question's end (questions are left-padded). The MLP on each
    question token before the sum keeps "row 2 col 3" apart from "row 3 col 2"; the bilinear term lets a row and a
    column add up on their cell."""

    def __init__(self, dim: int, hidden: int = 32, places: int = 16):
        super().__init__()
        self.hidden, self.places = hidden, places
        self.place = nn.Embedding(places, dim)
        self.key = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.query = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.prior = nn.Linear(hidden, 1, bias=False)

    def forward(self, vision: torch.Tensor, question: torch.Tensor) -> torch.Tensor:
        """Logits (B, N) for vision tokens (B, N, D) and question embeddings (B, L, D)."""
        length = question.shape[1]
        place = (length - 1 - torch.arange(length)).clamp(max=self.places - 1)
        q = self.query(question + self.place(place)).sum(1)  # (B, h)
        k = self.key(vision)  # (B, N, h)
        return (k @ q[..., None])[..., 0] * self.hidden ** -0.5 + self.prior(k)[..., 0]

    def flops(self, n_vision: int, n_text: int) -> float:
        """Multiply-accumulates for one sequence: both MLPs on their tokens, the dot products and the prior."""
        mlp = sum(m.in_features * m.out_features for m in self.key if isinstance(m, nn.Linear))
        return float((n_vision + n_text) * mlp + 2 * n_vision * self.hidden)


@register_scorer
@dataclass(frozen=True)
class AsymVLM(VisionPruner):
    """Scores from the learned :class:`RelevanceScorer` (``network``), read before prefill."""

    network: RelevanceScorer | None = field(default=None, compare=False)
    name: ClassVar[str] = "asymvlm"
    reads: ClassVar[str] = "states"

    def accumulate(self, score, seen):
        if self.network is None:
            raise ValueError("asymvlm: network must be a trained RelevanceScorer (train_scorer)")
        return self.network(seen.states, seen.query)[:, None]

    def flops(self, n_vision, n_text):
        return self.network.flops(n_vision, n_text)


def train_scorer(network: RelevanceScorer, sample, teacher, steps: int, lr: float, generator: torch.Generator
                 ) -> list[float]:
    """Fit ``network`` to a teacher's relevance: ``sample(generator)`` gives (vision states, question embeddings,
    batch) and ``teacher(batch)`` the (B, N) target distribution (AsymVLM's: the unpruned model's answer saliency;
    the upper reference's: the answer cells); the loss is KL(target || softmax(logits)). Adam, ``steps`` steps."""
    opt = torch.optim.Adam(network.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        vision, question, batch = sample(generator)
        target = teacher(batch)
        loss = F.kl_div(network(vision, question).log_softmax(-1), target, reduction="batchmean")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    network.eval()
    return losses
