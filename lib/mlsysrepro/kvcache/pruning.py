"""Vision-token pruning inside a VLM's prefill, through the token-scorer contract (:mod:`.scoring`).

A *vision pruner* is a :class:`.scoring.TokenScorer` over the image's tokens: at a pruning point it receives one
:class:`.scoring.Observation` (the signal it reads: the ViT's [CLS] attention, the attention the text pays the
vision tokens at the layer before, or the tokens' states and the question's), folds it into a score
(``accumulate``) and the tokens of highest ``priority`` are kept (:func:`.scoring.keep_mask`), the selection every
scorer of the collection shares. A pruner that merges what it drops into what it keeps (spatial pooling,
VisionZip's contextual tokens) overrides :meth:`VisionPruner.merge`, and one that selects by more than a ranking
(VisionZip) overrides :meth:`VisionPruner.select`.

A :class:`PruningPlan` says where a pruner acts: its *stages*, ``(layer, vision tokens kept)``, where layer 0 is
before prefill (AsymVLM, VisionZip, pooling) and layer ``k`` the input of decoder block ``k`` (FastV,
PyramidDrop, SparseVLM), and optionally an :class:`AdaptiveBudget`, a per-sample count at layer 0.
:func:`pruned_prefill` runs the decoder block by block and removes the dropped tokens from the sequence (so they
cost nothing after), the kept ones keeping their positions (RoPE) and their order; it returns the answer logits
and the tokens every layer ran on, which :mod:`mlsysrepro.transformer.flops` turns into FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ..transformer.llama import rotate
from ..transformer.vlm import TinyVLM
from .cache import FullCache
from .scoring import Observation, TokenScorer, keep_mask

#: The signals a pruner may read (:attr:`VisionPruner.reads`): nothing, the ViT's [CLS] attention, the attention of
#: the last text token or of every text token at the layer before the stage, the vision and question states.
SIGNALS = ("none", "cls", "last", "text", "states")


@dataclass(frozen=True)
class VisionPruner(TokenScorer):
    """A token scorer over vision tokens (one "head": scores are (B, 1, N)); higher score kept."""

    name: ClassVar[str] = "vision"
    reads: ClassVar[str] = "none"

    def priority(self, score, positions):
        return score

    def select(self, score: torch.Tensor, positions: torch.Tensor, count: int) -> torch.Tensor:
        """Indices (B, count), increasing, of the vision tokens to keep: :func:`.scoring.keep_mask` on the score."""
        keep = keep_mask(self, score[:, None], positions[:, None], torch.tensor([count]))[:, 0]
        return keep.to(torch.int8).topk(count, dim=-1, sorted=False).indices.sort(-1).values

    def merge(self, states: torch.Tensor, positions: torch.Tensor, keep: torch.Tensor, side: int,
              score: torch.Tensor) -> torch.Tensor:
        """The kept tokens' states (B, count, D) given all ``states`` (B, N, D) at ``positions`` on a patch grid
        ``side`` patches a side, and the ``score`` that selected them: by default the kept ones as they are
        (pruning); a merging pruner folds the dropped ones in."""
        return states.gather(1, keep[..., None].expand(-1, -1, states.shape[-1]))

    def flops(self, n_vision: int, n_text: int) -> float:
        """The pruner's own multiply-accumulates per sequence (0 for one that reads what the model computes)."""
        return 0.0


@dataclass(frozen=True)
class AdaptiveBudget:
    """AsymVLM's per-sample budget (our documented rule): the fewest tokens whose softmax-normalised scores reach
    mass ``top_p``, clamped to ``[k_min, k_max]``."""

    top_p: float
    k_min: int
    k_max: int

    def __post_init__(self):
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 1 <= self.k_min <= self.k_max:
            raise ValueError(f"need 1 <= k_min ({self.k_min}) <= k_max ({self.k_max})")

    def counts(self, score: torch.Tensor) -> torch.Tensor:
        """(B,) tokens to keep for scores (B, N)."""
        mass = score.softmax(-1).sort(-1, descending=True).values.cumsum(-1)
        reached = (mass < self.top_p).sum(-1) + 1  # tokens needed to reach top_p
        return reached.clamp(self.k_min, min(self.k_max, score.shape[-1]))


@dataclass(frozen=True)
class PruningPlan:
    """Where ``pruner`` acts: ``stages`` ((layer, vision tokens kept), layers increasing, counts not increasing);
    with ``adaptive`` the first stage must be at layer 0 and its count is chosen per sample."""

    pruner: VisionPruner
    stages: tuple[tuple[int, int], ...] = ()
    adaptive: AdaptiveBudget | None = None

    def __post_init__(self):
        layers = [layer for layer, _ in self.stages]
        counts = [count for _, count in self.stages]
        if layers != sorted(set(layers)) or any(layer < 0 for layer in layers):
            raise ValueError(f"stages must have distinct layers >= 0 in increasing order, got {self.stages}")
        if any(c < 1 for c in counts) or counts != sorted(counts, reverse=True):
            raise ValueError(f"stages must keep >= 1 token and never more than at the stage before: {self.stages}")
        if self.pruner.reads not in SIGNALS:
            raise ValueError(f"{type(self.pruner).__name__}.reads must be one of {SIGNALS}, got {self.pruner.reads!r}")
        if self.stages and self.stages[0][0] == 0 and self.pruner.reads in ("last", "text"):
            raise ValueError(f"{self.pruner.name} reads decoder attention, which does not exist before prefill "
                             "(layer 0): give it a stage at layer >= 1")
        if self.adaptive is not None and (not self.stages or self.stages[0][0] != 0):
            raise ValueError("an adaptive budget chooses the count before prefill: the first stage must be layer 0")


@dataclass(frozen=True)
class PrunedPrefill:
    """``logits`` (B, vocab) of the answer; ``lengths`` (B, layers) the tokens each decoder layer ran on; ``kept``
    (B,) the vision tokens kept at the last stage and ``positions`` (B, N) which (their positions, -1 after the
    last one)."""

    logits: torch.Tensor
    lengths: torch.Tensor
    kept: torch.Tensor
    positions: torch.Tensor


def text_attention(block, x: torch.Tensor, positions: torch.Tensor, n_vision: int, last_only: bool) -> torch.Tensor:
    """The attention (B, 1, Q, n_vision) that the text tokens of ``x`` (all of them, or the last) pay the vision
    tokens in ``block``, averaged over its heads: the row of the attention matrix the block computes anyway."""
    attn, cfg = block.attn, block.attn.cfg
    b, s, _ = x.shape
    queries = torch.arange(s - 1 if last_only else n_vision, s)
    h = block.attn_norm(x)
    q = attn.q(h[:, queries]).view(b, len(queries), cfg.heads, cfg.head_dim).transpose(1, 2)
    k = attn.kv(h).view(b, s, 2, cfg.kv_heads, cfg.head_dim)[:, :, 0].transpose(1, 2)
    q = rotate(q, positions[:, queries], cfg.rope_base)
    k = rotate(k, positions, cfg.rope_base).repeat_interleave(cfg.heads // cfg.kv_heads, 1)
    scores = q @ k.transpose(-1, -2) * cfg.head_dim ** -0.5  # (B, heads, Q, S); text queries see every vision key
    visible = positions[:, None, None, :] <= positions[:, queries][:, None, :, None]
    weights = scores.masked_fill(~visible, float("-inf")).softmax(-1).mean(1)
    return weights[:, None, :, :n_vision]


def _observe(plan: PruningPlan, previous: tuple | None, x: torch.Tensor, n_vision: int, cls: torch.Tensor
             ) -> Observation:
    reads = plan.pruner.reads
    if reads in ("last", "text"):
        block, before, positions = previous
        weights = text_attention(block, before, positions, n_vision, last_only=reads == "last")
        return Observation(paid=weights.sum(2), queries=weights.shape[2])
    if reads == "cls":
        return Observation(paid=cls[:, None], queries=1, states=x[:, :n_vision], query=x[:, n_vision:])
    return Observation(states=x[:, :n_vision], query=x[:, n_vision:])


def vision_scores(pruner: VisionPruner, seen: Observation, vision: torch.Tensor) -> torch.Tensor:
    """(B, N): ``pruner``'s score of each of the ``vision`` tokens (B, N, D) from what it has ``seen``."""
    return pruner.accumulate(vision.new_zeros(len(vision), 1, vision.shape[1]), seen)[:, 0]


def prune_step(pruner: VisionPruner, score: torch.Tensor, vision: torch.Tensor, positions: torch.Tensor, count: int,
               side: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One pruning point: of the ``vision`` tokens (B, N, D) at ``positions`` (B, N), keep the ``count`` that
    ``pruner`` selects by their ``score`` (B, N; :func:`vision_scores`); returns their states (B, count, D), merged
    as the pruner merges, and their indices (B, count), increasing. ``side``: patches a side of the image's grid."""
    keep = pruner.select(score, positions, min(count, vision.shape[1]))
    return pruner.merge(vision, positions, keep, side, score), keep


def _run(model: TinyVLM, plan: PruningPlan, vision: torch.Tensor, cls: torch.Tensor, text: torch.Tensor,
         counts: dict[int, int], before: torch.Tensor | None = None) -> PrunedPrefill:
    """The prefill of rows that keep the same number of tokens at every stage (``counts``: layer -> count);
    ``before``: the pruner's scores before prefill (layer 0) when the caller has them already."""
    decoder, side = model.decoder, model.cfg.side
    x = torch.cat((vision, text), 1)
    positions = torch.arange(x.shape[1]).expand(len(x), -1)
    n_vision, lengths, previous = vision.shape[1], [], None
    for layer, block in enumerate(decoder.blocks):
        if layer in counts:  # a count of every token still runs the pruner (and must change nothing)
            score = (before if layer == 0 and before is not None
                     else vision_scores(plan.pruner, _observe(plan, previous, x, n_vision, cls), x[:, :n_vision]))
            kept, keep = prune_step(plan.pruner, score, x[:, :n_vision], positions[:, :n_vision], counts[layer], side)
            x = torch.cat((kept, x[:, n_vision:]), 1)
            positions = torch.cat((positions[:, :n_vision].gather(1, keep), positions[:, n_vision:]), 1)
            cls = cls.gather(1, keep)
            n_vision = keep.shape[1]
        lengths.append(x.shape[1])
        previous = (block, x, positions)
        x = block(x, positions, None)
    logits = decoder.head(decoder.norm(x[:, -1]))
    kept = torch.full((len(x), vision.shape[1]), -1)
    kept[:, :n_vision] = positions[:, :n_vision]
    return PrunedPrefill(logits, torch.tensor(lengths).expand(len(x), -1), torch.full((len(x),), n_vision), kept)


@torch.no_grad()
def pruned_prefill(model: TinyVLM, pixels: torch.Tensor, question: torch.Tensor, plan: PruningPlan
                   ) -> PrunedPrefill:
    """Answer ``question`` (B, L) about ``pixels`` with the vision tokens ``plan`` keeps. Rows whose adaptive
    budgets differ run as separate batches (one per distinct count), so every sequence is exactly as long as its
    budget says: nothing is masked. The scores that choose the budgets also select the tokens (scored once)."""
    vision, cls = model.encode(pixels)
    text = model.embed_question(question)
    counts = dict(plan.stages)
    if plan.adaptive is None:
        return _run(model, plan, vision, cls, text, counts)
    seen = _observe(plan, None, torch.cat((vision, text), 1), vision.shape[1], cls)
    scores = vision_scores(plan.pruner, seen, vision)
    per_row = plan.adaptive.counts(scores)
    logits = vision.new_empty(len(vision), model.cfg.decoder.vocab)
    lengths = torch.empty(len(vision), model.cfg.decoder.layers, dtype=torch.long)
    kept = torch.empty(len(vision), dtype=torch.long)
    positions = torch.empty(len(vision), vision.shape[1], dtype=torch.long)
    for count in per_row.unique().tolist():
        rows = (per_row == count).nonzero()[:, 0]
        later = {layer: min(c, count) for layer, c in counts.items() if layer > 0}
        part = _run(model, plan, vision[rows], cls[rows], text[rows], {0: count, **later}, scores[rows])
        logits[rows], lengths[rows], kept[rows], positions[rows] = part.logits, part.lengths, part.kept, part.positions
    return PrunedPrefill(logits, lengths, kept, positions)


class _AttentionRecorder:
    """A cache that keeps everything (like :class:`.cache.FullCache`) and sums, over layers, the attention the
    tokens after the first ``n_vision`` pay the first ``n_vision`` (averaged over the heads)."""

    def __init__(self, n_vision: int):
        self.full, self.n_vision, self.total = FullCache(), n_vision, None

    def update(self, layer, k, v, positions):
        return self.full.update(layer, k, v, positions)

    def query_weights(self, layer, queries):
        return (torch.arange(queries) >= self.n_vision).double()  # the text queries

    def observe(self, layer, paid):
        paid = paid[:, :, :self.n_vision].mean(1)  # (B, N)
        self.total = paid if self.total is None else self.total + paid


@torch.no_grad()
def text_to_vision_relevance(model: TinyVLM, pixels: torch.Tensor, question: torch.Tensor) -> torch.Tensor:
    """(B, N): the share of the attention the question's tokens pay each vision token in the unpruned model,
    summed over its layers and normalised over the vision tokens: what a scorer distilled from attention would
    learn (a learned FastV / SparseVLM), kept as a reference beside AsymVLM's teacher (:func:`answer_saliency`)."""
    vision, _ = model.encode(pixels)
    recorder = _AttentionRecorder(vision.shape[1])
    model.decoder.forward_embeddings(torch.cat((vision, model.embed_question(question)), 1), cache=recorder)
    return recorder.total / recorder.total.sum(-1, keepdim=True)


def answer_saliency(model: TinyVLM, pixels: torch.Tensor, question: torch.Tensor, answer: torch.Tensor
                    ) -> torch.Tensor:
    """(B, N): how much the unpruned model's answer depends on each vision token, normalised over the tokens: the
    gradient of the answer's log-probability with respect to the token's state, times the state, summed over the
    width, in absolute value (gradient x input; Shrikumar et al. 2016). The teacher of AsymVLM's learned scorer
    (our reading of a scorer learned for the answer: see :mod:`mlsysrepro.papers.asymvlm`)."""
    with torch.no_grad():
        vision, _ = model.encode(pixels)
        text = model.embed_question(question)
    vision = vision.detach().requires_grad_(True)
    with torch.enable_grad():
        logits = model.decoder.forward_embeddings(torch.cat((vision, text), 1))[:, -1]
        chosen = logits.log_softmax(-1).gather(1, answer[:, None]).sum()
        (gradient,) = torch.autograd.grad(chosen, vision)
    saliency = (gradient * vision).sum(-1).abs().detach()
    return saliency / saliency.sum(-1, keepdim=True).clamp(min=1e-12)
