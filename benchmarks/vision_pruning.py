"""Benchmark of vision-token pruning in a VLM's prefill (issue 23): measured speed-up against the unpruned prefill,
beside the speed-up the FLOPs promise.

    .venv/bin/python benchmarks/vision_pruning.py [--image 96] [--patch 4] [--dim 256] [--layers 8] [--text 16]
                                                  [--batch 4] [--saving 0.54] [--repeats 7]

The AsymVLM notebook times its tiny model (64 vision tokens), where the encoder and per-call overheads hide most of
what pruning saves. This script times a :class:`mlsysrepro.transformer.vlm.TinyVLM` with random weights (which do
not change the work) at a LLaVA-1.5-like count of vision tokens (``(image / patch)²``, 576 at the defaults) and a
wider, deeper decoder: the unpruned prefill, then random pruning, spatial pooling and AsymVLM's scorer (an untrained
:class:`mlsysrepro.kvcache.pruners.RelevanceScorer`, the same work as a trained one; its own FLOPs counted) before
prefill, and FastV after layer 1, each keeping the tokens that save ``--saving`` of the prefill FLOPs
(:mod:`mlsysrepro.kvcache.schedules`). Every round runs each in turn, in alternating order
(:func:`mlsysrepro.core.timing.interleaved`); the script prints the median seconds, the median per-round speed-up
over the unpruned prefill with its 95 % interval, and the FLOPs ratio ``1 / (1 - saving)``.

Where ``transformers`` is installed, the peer a user would run comes next: HuggingFace's own
``LlavaForConditionalGeneration`` prefill (random weights, the same decoder shape) against
:func:`mlsysrepro.kvcache.hf_vlm.pruned_llava_prefill` on the same model at the same saving.

Not a test: timings depend on the machine; compare the ratios. Prints the machine.
"""

from __future__ import annotations

import argparse

import pandas as pd
import torch

from mlsysrepro.core.timing import interleaved, machine, ratios
from mlsysrepro.kvcache import schedules
from mlsysrepro.kvcache.pruners import AsymVLM, RelevanceScorer
from mlsysrepro.kvcache.pruning import PruningPlan, pruned_prefill
from mlsysrepro.kvcache.scoring import make_scorer
from mlsysrepro.transformer.flops import saving
from mlsysrepro.transformer.llama import LlamaConfig
from mlsysrepro.transformer.vlm import TinyVLM, VLMConfig


def compare(title: str, fns: dict, saved: dict[str, float], repeats: int) -> None:
    """Time ``fns`` (the first, ``unpruned``, the baseline) in interleaved rounds and print each one's median
    seconds, its per-round speed-up with the 95 % interval, and the FLOPs it ``saved`` beside their ratio."""
    with torch.no_grad():
        timings = interleaved(fns, repeats)
    speedups = ratios(timings, "unpruned")
    print(title)
    print(pd.DataFrame([dict(method=name, seconds=t.median, speedup=speedups[name].median,
                             speedup_low=speedups[name].interval[0], speedup_high=speedups[name].interval[1],
                             flops_saved=saved[name], flops_ratio=1 / (1 - saved[name]))
                        for name, t in timings.items()]).set_index("method").round(3).to_string())


def tiny_vlm(args) -> None:
    decoder = LlamaConfig(vocab=64, dim=args.dim, layers=args.layers, heads=8, kv_heads=4, ffn=int(2.75 * args.dim))
    model = TinyVLM(VLMConfig(image=args.image, patch=args.patch, vit_dim=64, vit_layers=2, vit_heads=4,
                              decoder=decoder)).eval()
    g = torch.Generator().manual_seed(1)
    pixels = torch.rand(args.batch, args.image, args.image, generator=g)
    question = torch.randint(0, 64, (args.batch, args.text), generator=g)
    n, text = model.cfg.vision_tokens, args.text
    scorer = AsymVLM(network=RelevanceScorer(args.dim).eval())
    before = schedules.single_stage(decoder, 0, args.saving, n, text)
    plans = {"random": PruningPlan(make_scorer("random"), ((0, before),)),
             "pooling": PruningPlan(make_scorer("pooling", side=model.cfg.side), ((0, before),)),
             "asymvlm": PruningPlan(scorer, ((0, schedules.single_stage(decoder, 0, args.saving, n, text,
                                                                        extra=scorer.flops(n, text))),))}
    try:
        plans["fastv"] = PruningPlan(make_scorer("fastv"), ((1, schedules.single_stage(decoder, 1, args.saving, n,
                                                                                        text)),))
    except schedules.Unreachable as why:
        print(f"FastV left out: {why}")
    fns = {"unpruned": lambda: model(pixels, question)}
    fns.update({name: (lambda plan=plan: pruned_prefill(model, pixels, question, plan)) for name, plan in plans.items()})
    saved = {"unpruned": 0.0}
    for name, plan in plans.items():
        out = pruned_prefill(model, pixels, question, plan)
        saved[name] = float(saving(decoder, out.lengths, torch.full((args.batch,), n + text),
                                   plan.pruner.flops(n, text)).mean())
    compare(f"TinyVLM: {n} vision + {text} text tokens, decoder width {args.dim} x {args.layers} layers, "
            f"batch {args.batch}, {args.repeats} rounds", fns, saved, args.repeats)


def huggingface_llava(args) -> None:
    try:
        import transformers
    except ImportError:
        print("\nHuggingFace LLaVA: transformers is not installed (pip install -e .[hf]); skipped")
        return
    from mlsysrepro.kvcache.hf_vlm import pruned_llava_prefill

    torch.manual_seed(0)
    image_token = 63
    vision = transformers.CLIPVisionConfig(hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                                           num_attention_heads=4, image_size=args.image, patch_size=args.patch)
    text_cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=args.dim, intermediate_size=int(2.75 * args.dim),
                                        num_hidden_layers=args.layers, num_attention_heads=8, num_key_value_heads=4,
                                        max_position_embeddings=4096)
    model = transformers.LlavaForConditionalGeneration(transformers.LlavaConfig(
        vision_config=vision, text_config=text_cfg, image_token_index=image_token, vision_feature_layer=-2,
        vision_feature_select_strategy="default")).eval()
    n = (args.image // args.patch) ** 2
    g = torch.Generator().manual_seed(1)
    ids = torch.cat((torch.ones(args.batch, 1, dtype=torch.long), torch.full((args.batch, n), image_token),
                     torch.randint(2, image_token, (args.batch, args.text), generator=g)), 1)
    pixels = torch.rand(args.batch, 3, args.image, args.image, generator=g)
    decoder = LlamaConfig(vocab=64, dim=args.dim, layers=args.layers, heads=8, kv_heads=4, ffn=int(2.75 * args.dim))
    scorer = AsymVLM(network=RelevanceScorer(args.dim).eval())
    keep = schedules.single_stage(decoder, 0, args.saving, n, args.text + 1)
    keep_scored = schedules.single_stage(decoder, 0, args.saving, n, args.text + 1, extra=scorer.flops(n, args.text + 1))
    plans = {"random": PruningPlan(make_scorer("random"), ((0, keep),)),
             "asymvlm": PruningPlan(scorer, ((0, keep_scored),))}
    fns = {"unpruned": lambda: model(input_ids=ids, pixel_values=pixels, logits_to_keep=1)}
    fns.update({name: (lambda plan=plan: pruned_llava_prefill(model, ids, pixels, plan)) for name, plan in plans.items()})
    saved = {"unpruned": 0.0}
    full = torch.full((args.batch,), ids.shape[1])
    for name, plan in plans.items():
        lengths = pruned_llava_prefill(model, ids, pixels, plan).lengths
        saved[name] = float(saving(decoder, lengths[:, None].expand(-1, args.layers), full,
                                   plan.pruner.flops(n, args.text + 1)).mean())
    compare(f"\nHuggingFace LLaVA (transformers {transformers.__version__}): its own prefill against "
            f"kvcache.hf_vlm.pruned_llava_prefill, {n} vision + {args.text + 1} text tokens", fns, saved, args.repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image", type=int, default=96, help="pixels a side")
    parser.add_argument("--patch", type=int, default=4, help="pixels a patch side")
    parser.add_argument("--dim", type=int, default=256, help="decoder width (heads: 8, KV heads: 4)")
    parser.add_argument("--layers", type=int, default=8, help="decoder layers")
    parser.add_argument("--text", type=int, default=16, help="question tokens")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--saving", type=float, default=0.54, help="share of the prefill FLOPs to save")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if not 0 < args.saving < 1:
        parser.error(f"--saving must be in (0, 1), got {args.saving}")
    torch.manual_seed(0)
    print(machine())
    tiny_vlm(args)
    huggingface_llava(args)


if __name__ == "__main__":
    main()
