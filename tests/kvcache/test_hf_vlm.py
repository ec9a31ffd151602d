"""The HuggingFace LLaVA adapter (optional; skipped without ``transformers``): on a tiny randomly initialised
LlavaForConditionalGeneration, keeping every image feature reproduces HuggingFace's own logits, a budget removes
exactly the dropped features from the language model's input with the kept ones at their positions, an adaptive
budget keeps each row's own count, and pruners this adapter cannot run are refused by name."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from mlsysrepro.kvcache.hf_vlm import image_features, pruned_llava_prefill  # noqa: E402
from mlsysrepro.kvcache.pruners import AsymVLM, RelevanceScorer, Teacher  # noqa: E402
from mlsysrepro.kvcache.pruning import AdaptiveBudget, PruningPlan  # noqa: E402
from mlsysrepro.kvcache.scoring import make_scorer  # noqa: E402

IMAGE_TOKEN, N, DIM = 39, 16, 32


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    vision = transformers.CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                           num_attention_heads=2, image_size=16, patch_size=4)
    text = transformers.LlamaConfig(vocab_size=40, hidden_size=DIM, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    cfg = transformers.LlavaConfig(vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN,
                                   vision_feature_layer=-2, vision_feature_select_strategy="default")
    return transformers.LlavaForConditionalGeneration(cfg).double().eval()


@pytest.fixture(scope="module")
def inputs():
    g = torch.Generator().manual_seed(1)
    rows = 4
    ids = torch.cat((torch.full((rows, 2), 1), torch.full((rows, N), IMAGE_TOKEN),
                     torch.randint(2, IMAGE_TOKEN, (rows, 6), generator=g)), 1)
    return ids, torch.rand(rows, 3, 16, 16, generator=g, dtype=torch.float64)


def language_model_calls(model):
    """Records (inputs_embeds, position_ids) of every language-model call."""
    calls = []
    handle = model.model.language_model.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append((kwargs["inputs_embeds"], kwargs["position_ids"])),
        with_kwargs=True)
    return calls, handle


def test_keeping_every_feature_reproduces_huggingface(model, inputs):
    ids, pixels = inputs
    with torch.no_grad():
        full = model(input_ids=ids, pixel_values=pixels).logits[:, -1]
    out = pruned_llava_prefill(model, ids, pixels, PruningPlan(make_scorer("random"), ((0, N),)))
    torch.testing.assert_close(out.logits, full)
    assert out.lengths.tolist() == [ids.shape[1]] * len(ids)


def test_a_budget_removes_the_dropped_features_and_keeps_the_positions(model, inputs):
    ids, pixels = inputs
    relevance = torch.zeros(len(ids), N, dtype=torch.float64)
    relevance[:, [0, 5, 10, 15]] = 1
    calls, handle = language_model_calls(model)
    try:
        out = pruned_llava_prefill(model, ids, pixels, PruningPlan(Teacher(relevance=relevance), ((0, 4),)))
    finally:
        handle.remove()
    (embeds, positions), = calls
    assert embeds.shape[1] == ids.shape[1] - N + 4 and out.lengths.tolist() == [embeds.shape[1]] * len(ids)
    assert positions[0].tolist() == [0, 1, 2, 7, 12, 17] + list(range(2 + N, ids.shape[1]))
    assert out.kept[:, :4].tolist() == [[0, 5, 10, 15]] * len(ids) and (out.kept[:, 4:] == -1).all()
    with torch.no_grad():
        full = model(input_ids=ids, pixel_values=pixels).logits[:, -1]
    assert not torch.allclose(out.logits, full)


def test_an_adaptive_budget_keeps_each_rows_own_count(model, inputs):
    ids, pixels = inputs
    torch.manual_seed(2)
    network = RelevanceScorer(DIM, hidden=8).double().eval()
    plan = PruningPlan(AsymVLM(network=network), ((0, 8),), AdaptiveBudget(0.5, 2, 12))
    out = pruned_llava_prefill(model, ids, pixels, plan)
    with torch.no_grad():
        features = image_features(model, pixels)
        expected = plan.adaptive.counts(network(features, model.get_input_embeddings()(ids[:, 2 + N:])))
    assert out.lengths.tolist() == (ids.shape[1] - N + expected).tolist()
    assert ((out.kept >= 0).sum(1) == expected).all()


def test_pruners_inside_the_decoder_and_bad_layouts_are_refused(model, inputs):
    ids, pixels = inputs
    with pytest.raises(ValueError, match="fastv.*inside the decoder"):
        pruned_llava_prefill(model, ids, pixels, PruningPlan(make_scorer("fastv"), ((1, 4),)))
    with pytest.raises(ValueError, match="visionzip reads 'cls'"):
        pruned_llava_prefill(model, ids, pixels, PruningPlan(make_scorer("visionzip"), ((0, 4),)))
    with pytest.raises(ValueError, match="exactly one image"):
        one_short = torch.cat((ids[:, :2], ids[:, 3:]), 1)  # 15 placeholders for 16 features
        pruned_llava_prefill(model, one_short, pixels, PruningPlan(make_scorer("random"), ((0, 4),)))


@torch.no_grad()
def test_the_text_eviction_runs_inside_the_llava_language_model(model, inputs):
    """AsymVLM's text side needs no adapter: kvcache.hf's cache runs TemporalThreshold in LLaVA's language model,
    holding its budget and never evicting the prompt's prefix, the image or the newest tokens."""
    from mlsysrepro.kvcache.cache import BudgetedCache
    from mlsysrepro.kvcache.hf import ATTENTION, HFCache
    from mlsysrepro.kvcache.policies import TemporalThreshold

    ids, pixels = inputs
    image_end = 2 + N  # the prefix and the image: protected
    budget = image_end + 1 + 5
    inner = BudgetedCache(torch.full((2, 2), budget), TemporalThreshold(vision=image_end, sinks=1, recent=2))
    language = model.model.language_model
    language.set_attn_implementation(ATTENTION)
    try:
        cache = HFCache(inner, language)
        model(input_ids=ids, pixel_values=pixels, past_key_values=cache, use_cache=True)
        for step in range(8):
            token = torch.full((len(ids), 1), 3 + step)
            logits = model(input_ids=token, past_key_values=cache, use_cache=True).logits
    finally:
        language.set_attn_implementation("eager")
    assert (inner.held() == budget).all() and torch.isfinite(logits).all()
    newest = ids.shape[1] + 7
    for positions in inner.positions.values():
        for row in positions.flatten(0, 1):
            held = set(row[row >= 0].tolist())
            assert set(range(image_end + 1)) <= held and {newest - 1, newest} <= held
