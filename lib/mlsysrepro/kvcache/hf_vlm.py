"""Optional: vision-token pruning before prefill inside a HuggingFace LLaVA model (the AsymVLM notebook's ``paper``
path to LLaVA-1.5 checkpoints such as ``llava-hf/llava-1.5-7b-hf``). Needs ``transformers`` (tested with 4.57 and 5.17),
which the project does not install.

A LLaVA model writes one projected vision feature into each image placeholder token of ``input_ids`` and runs its
language model over the whole sequence. :func:`pruned_llava_prefill` does the same with only the features a
:class:`.pruning.PruningPlan` keeps: the pruner reads the features and the prompt's text after the image
(:class:`.scoring.Observation` ``states`` and ``query``, as on :class:`mlsysrepro.transformer.vlm.TinyVLM`), the
dropped features are removed from the sequence (so no decoder layer pays for them) and the kept ones keep their
original positions (``position_ids``, so RoPE sees the same distances). An adaptive budget runs each distinct count
as its own sub-batch, as :func:`.pruning.pruned_prefill` does::

    model = LlavaForConditionalGeneration.from_pretrained("llava-hf/llava-1.5-7b-hf")  # where weights exist
    scorer = RelevanceScorer(model.config.text_config.hidden_size)  # trained with pruners.train_scorer
    plan = PruningPlan(AsymVLM(network=scorer), ((0, 288),), AdaptiveBudget(0.9, 144, 576))
    out = pruned_llava_prefill(model, inputs["input_ids"], inputs["pixel_values"], plan)

The text side needs no adapter: :class:`.hf.HFCache` runs :class:`.policies.TemporalThreshold` (and H2O,
StreamingLLM) inside the same model's language model unchanged, the prompt's prefix and the image protected::

    model.model.language_model.set_attn_implementation(hf.ATTENTION)  # the vision tower keeps its own
    policy = TemporalThreshold(vision=image_end, sinks=1, recent=4)  # image_end: the image's last position + 1
    cache = hf.HFCache(BudgetedCache(budgets, policy), model.model.language_model)
    model(input_ids=ids, pixel_values=pixels, past_key_values=cache, use_cache=True)  # then decode through it

Limits: pruners that act before prefill only (random, pooling, AsymVLM, the oracle-style :class:`.pruners.Teacher`
with its relevance given); FastV, PyramidDrop, SparseVLM and FitPrune read the decoder's attention at a layer
inside it, and VisionZip the vision tower's [CLS] attention, which this adapter does not hook (a clear error names
them). One image per row at the same offset in every row (a batch of one prompt template, no padding); LLaVA's
``default`` feature strategy (one token per patch, a square grid). Qwen2-VL's 3-D rotary positions (M-RoPE) are not
LLaVA's and are not supported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .pruning import PruningPlan, prune_step, vision_scores
from .scoring import Observation

#: What a pruner may read here: nothing, or the vision features and the question's embeddings.
SUPPORTED_SIGNALS = ("none", "states")


@dataclass(frozen=True)
class LlavaPrefill:
    """``logits`` (B, vocab) at the prompt's last position; ``lengths`` (B,) the tokens the language model ran on;
    ``kept`` (B, N) the indices of the image's features kept (-1 after the last one)."""

    logits: torch.Tensor
    lengths: torch.Tensor
    kept: torch.Tensor


def _image_span(model, input_ids: torch.Tensor, n_features: int) -> int:
    """Where the image's placeholder tokens start, the same in every row; a clear error otherwise."""
    is_image = input_ids == model.config.image_token_id
    if not (is_image.sum(1) == n_features).all():
        raise ValueError(f"input_ids must hold exactly one image ({n_features} tokens of image_token_id "
                         f"{model.config.image_token_id}) per row; rows hold {is_image.sum(1).tolist()}")
    start = is_image.int().argmax(1)
    if not (start == start[0]).all() or not is_image[:, start[0]:start[0] + n_features].all():
        raise ValueError("the image's placeholder tokens must be one contiguous run at the same offset in every row "
                         "(one prompt template, no padding)")
    return int(start[0])


def _check(plan: PruningPlan) -> None:
    if any(layer != 0 for layer, _ in plan.stages) or not plan.stages:
        raise ValueError(f"pruned_llava_prefill runs one stage before prefill (layer 0); {plan.pruner.name}'s stages "
                         f"{plan.stages} act inside the decoder, which this adapter does not hook")
    if plan.pruner.reads not in SUPPORTED_SIGNALS:
        raise ValueError(f"{plan.pruner.name} reads {plan.pruner.reads!r}; this adapter gives pruners one of "
                         f"{SUPPORTED_SIGNALS}")


def image_features(model, pixel_values: torch.Tensor) -> torch.Tensor:
    """The projected image features, (B, N, D): transformers 4.x returns them per image, 5.x as the
    ``pooler_output`` of a model output."""
    found = model.get_image_features(pixel_values=pixel_values)
    found = getattr(found, "pooler_output", found)
    return found if isinstance(found, torch.Tensor) else torch.stack(list(found))


@torch.no_grad()
def pruned_llava_prefill(model, input_ids: torch.Tensor, pixel_values: torch.Tensor, plan: PruningPlan
                         ) -> LlavaPrefill:
    """The prefill of a HuggingFace ``LlavaForConditionalGeneration`` over ``input_ids`` (B, L) and one image per
    row (``pixel_values``), with the image's features pruned by ``plan`` before the language model runs."""
    _check(plan)
    features = image_features(model, pixel_values)  # (B, N, D)
    n = features.shape[1]
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"the image gives {n} features, not a square grid: use vision_feature_select_strategy "
                         "'default'")
    start = _image_span(model, input_ids, n)
    embeds = model.get_input_embeddings()(input_ids).to(features.dtype)
    before, after = embeds[:, :start], embeds[:, start + n:]
    positions = torch.arange(input_ids.shape[1], device=input_ids.device).expand(len(input_ids), -1)
    scores = vision_scores(plan.pruner, Observation(states=features, query=after), features)  # once, for every row
    per_row = (plan.adaptive.counts(scores) if plan.adaptive is not None
               else torch.full((len(features),), min(plan.stages[0][1], n)))
    logits = features.new_empty(len(features), model.config.text_config.vocab_size)
    lengths = torch.empty(len(features), dtype=torch.long)
    kept = torch.full((len(features), n), -1, dtype=torch.long)
    for k in per_row.unique().tolist():
        rows = (per_row == k).nonzero()[:, 0]
        image, keep = prune_step(plan.pruner, scores[rows], features[rows], positions[rows, start:start + n] - start, k,
                                 side)
        x = torch.cat((before[rows], image, after[rows]), 1)
        ids = torch.cat((positions[rows, :start], start + keep, positions[rows, start + n:]), 1)
        logits[rows] = model(inputs_embeds=x, position_ids=ids, logits_to_keep=1).logits[:, -1]
        lengths[rows] = x.shape[1]
        kept[rows, :k] = keep
    return LlavaPrefill(logits, lengths, kept)
