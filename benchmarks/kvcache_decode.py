"""Benchmark of prefill and decoding through our KV caches, against HuggingFace transformers, the full cache and
one prefill per cache.

    .venv/bin/python benchmarks/kvcache_decode.py [--context 4096] [--tokens 64] [--batch 1] [--repeats 5]
        [--windows 16] [--only huggingface|compressed|shared]

The default-scale model's shape (4 layers, width 128, 8 query heads, 4 KV heads; random weights, which do not
change the work), in three tables, each timed round-robin in this one process (:mod:`mlsysrepro.core.timing`):

1. **Against HuggingFace** (needs the ``hf`` extra; skipped without it): the same weights copied into a
   ``transformers.LlamaForCausalLM`` with its SDPA attention (:func:`mlsysrepro.kvcache.hf.to_huggingface`), the
   peer a user would pick. Prefill of ``--context`` tokens through our model with each kind of cache (full,
   StreamingLLM, SnapKV, H2O at 50 %) against HuggingFace's prefill (H2O, which needs every query's attention
   weights, also against HuggingFace's eager attention returning them); then ``--tokens`` decoded tokens through our
   full cache against HuggingFace's ``DynamicCache``. Ratios > 1: ours is faster. Issue 38's targets: prefill
   >= 0.8x and full-cache decoding >= 1.0x of HuggingFace at a 4k context.
2. **Compressed against full**: decoding through budgeted caches (uniform and skewed budgets, each policy) at 50,
   70 and 90 % compression of the final length against the full cache
   (:func:`mlsysrepro.kvcache.evaluation.decode_speed`); the target: no slower per token than the full cache.

3. **Shared prefill** (``--only shared``): the perplexity of ``--windows`` windows of a 512-token default-scale
   sequence (448 context tokens, 64 scored) through 20 budgeted SnapKV caches (uniform and skewed budgets at five
   compressions, two spreads), by one prefill per cache (kvpress' protocol, which prefills again for every press)
   against one prefill shared by all (:func:`mlsysrepro.kvcache.evaluation.continuation_nlls`), which the BaKlaVa
   notebook's evaluations use; both give the same numbers, bit for bit (``tests/kvcache``).

Not a test: timings depend on the machine; compare the ratios. Prints torch's thread count.
"""

from __future__ import annotations

import argparse
import copy

import torch

from mlsysrepro.core.timing import interleaved, ratios
from mlsysrepro.kvcache import allocators
from mlsysrepro.kvcache.cache import FullCache
from mlsysrepro.kvcache.evaluation import continuation_nll, continuation_nlls, decode_speed
from mlsysrepro.kvcache.policies import make_policy
from mlsysrepro.transformer.llama import Llama, LlamaConfig


def _row(name: str, speedup) -> str:
    low, high = speedup.interval
    return f"  {name:<34} {speedup.median:6.2f}x  [{low:.2f}, {high:.2f}]"


@torch.no_grad()
def against_huggingface(model: Llama, context: int, tokens: int, repeats: int, batch: int) -> None:
    """Print our prefill (per cache) and full-cache decoding as speed-ups over HuggingFace's SDPA model."""
    try:
        from transformers import DynamicCache
        from mlsysrepro.kvcache.hf import to_huggingface
    except ImportError:
        print("HuggingFace comparison skipped: transformers is not installed (pip install -e '.[hf]')")
        return
    hf, eager = to_huggingface(model, "sdpa"), to_huggingface(model, "eager")
    prompt = torch.randint(0, model.cfg.vocab, (batch, context + tokens))
    budget = allocators.uniform((model.cfg.layers, model.cfg.kv_heads),
                                allocators.total_budget(0.5, model.cfg.layers * model.cfg.kv_heads, context),
                                4, context)
    caches = {"ours, full cache": FullCache}
    caches.update({f"ours, {p} 50 %": (lambda p: lambda: budget.cache(make_policy(p)))(p)
                   for p in ("streamingllm", "snapkv", "h2o")})
    prefills = {name: (lambda make: lambda: model(prompt[:, :context], cache=make()))(make)
                for name, make in caches.items()}
    prefills["huggingface"] = lambda: hf(prompt[:, :context], past_key_values=DynamicCache(), use_cache=True)
    prefills["huggingface eager"] = lambda: eager(prompt[:, :context], past_key_values=DynamicCache(),
                                                  use_cache=True, output_attentions=True)
    timings = interleaved(prefills, repeats)
    speedups, over_eager = ratios(timings, "huggingface"), ratios(timings, "huggingface eager")
    print(f"prefill of {context} tokens, speed-up over HuggingFace LlamaForCausalLM (SDPA), median [95 %]:")
    for name in caches:
        print(_row(name, speedups[name]))
    print("H2O needs every query's attention weights, which SDPA never writes out; against HuggingFace's eager "
          "attention returning them (output_attentions, how kvpress' observed-attention press gets them):")
    print(_row("ours, h2o 50 %", over_eager["ours, h2o 50 %"]))

    ours, theirs = FullCache(), DynamicCache()
    model(prompt[:, :context], cache=ours)
    hf(prompt[:, :context], past_key_values=theirs, use_cache=True)

    def decode_ours(cache):
        for t in range(context, context + tokens):
            model(prompt[:, t:t + 1], torch.full((batch, 1), t), cache)

    def decode_hf(cache):
        for t in range(context, context + tokens):
            hf(prompt[:, t:t + 1], past_key_values=cache, use_cache=True)

    fresh = {"ours, full cache": lambda: copy.deepcopy(ours), "huggingface": lambda: copy.deepcopy(theirs)}
    timings = interleaved({"ours, full cache": decode_ours, "huggingface": decode_hf}, repeats, warmup=0,
                          setup=lambda name: fresh[name]())
    print(f"decoding {tokens} tokens after {context}, speed-up over HuggingFace DynamicCache (SDPA):")
    print(_row("ours, full cache", ratios(timings, "huggingface")["ours, full cache"]))


def compressed_against_full(model: Llama, context: int, tokens: int, repeats: int, batch: int) -> None:
    cfg = model.cfg
    full_len = context + tokens
    shape, caches = (cfg.layers, cfg.kv_heads), cfg.layers * cfg.kv_heads
    skew = torch.linspace(1.0, 4.0, caches).view(shape)  # a BaKlaVa-like spread of budgets
    variants = {"full": FullCache}
    for c in (0.5, 0.7, 0.9):
        total = allocators.total_budget(c, caches, full_len)
        for name, alloc in (("uniform", allocators.uniform(shape, total, 4, full_len)),
                            ("skewed", allocators.baklava(shape, total, 4, full_len, skew, 1.0))):
            for policy in ("streamingllm", "h2o", "snapkv"):
                variants[f"{name} {policy} {c:.0%}"] = (lambda a, p: lambda: a.cache(p))(alloc, make_policy(policy))
    table = decode_speed(model, variants, context, tokens, repeats, batch)
    print(f"decoding {tokens} tokens after {context}, compressed caches against the full cache:")
    print(table.set_index("cache")[["tokens_per_s", "speedup_vs_full", "speedup_low", "speedup_high"]].round(2)
          .to_string())


@torch.no_grad()
def shared_prefill(model: Llama, windows: int, repeats: int, context: int = 448, scored: int = 64) -> None:
    cfg = model.cfg
    shape, caches = (cfg.layers, cfg.kv_heads), cfg.layers * cfg.kv_heads
    policy = make_policy("snapkv")
    makers = []
    for c in (0.5, 0.7, 0.8, 0.9, 0.95):
        total = allocators.total_budget(c, caches, context)
        for spread in (1.0, 4.0):
            skew = torch.linspace(1.0, spread, caches).view(shape)
            for alloc in (allocators.uniform(shape, total, 4, context),
                          allocators.baklava(shape, total, 4, context, skew, 1.0)):
                makers.append((lambda a: lambda: a.cache(policy))(alloc))
    tokens = torch.randint(0, cfg.vocab, (windows, context + scored), generator=torch.Generator().manual_seed(0))
    timings = interleaved({"one prefill per cache": lambda: [continuation_nll(model, tokens, context, make)
                                                             for make in makers],
                           "shared prefill": lambda: continuation_nlls(model, tokens, context, makers)}, repeats)
    print(f"perplexity of {windows} windows ({context} context + {scored} scored tokens) through {len(makers)} "
          "budgeted SnapKV caches, speed-up over one prefill per cache:")
    print(_row("shared prefill", ratios(timings, "one prefill per cache")["shared prefill"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--windows", type=int, default=16)
    parser.add_argument("--only", choices=("huggingface", "compressed", "shared"), default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Llama(LlamaConfig(vocab=84, dim=128, layers=4, heads=8, kv_heads=4, ffn=352)).eval()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; context {args.context}, "
          f"{args.tokens} decoded tokens, batch {args.batch}, {args.repeats} rounds")
    if args.only in (None, "huggingface"):
        against_huggingface(model, args.context, args.tokens, args.repeats, args.batch)
    if args.only in (None, "compressed"):
        compressed_against_full(model, args.context, args.tokens, args.repeats, args.batch)
    if args.only in (None, "shared"):
        shared_prefill(model, args.windows, args.repeats)


if __name__ == "__main__":
    main()
