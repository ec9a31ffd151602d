"""Benchmark of decoding through the budgeted KV cache (issue 5): tokens per second against the full cache.

    .venv/bin/python benchmarks/kvcache_decode.py [--context 4096] [--tokens 64] [--batch 1] [--repeats 5]

The default-scale model's shape (4 layers, width 128, 8 query heads, 4 KV heads; random weights, which do not
change the work) prefills ``--context`` tokens, then decodes ``--tokens`` more one at a time, through the full
cache and through budgeted caches (uniform and skewed budgets, each policy) at 50, 70 and 90 % compression of the
final length. Every round decodes through each cache in turn (:func:`mlsysrepro.kvcache.evaluation.decode_speed`);
the script prints the median tokens per second and the median per-round ratio to the full cache. The issue's
target: the compressed cache no slower per token than the full one at a 4k context (ratio >= 1).

Not a test: timings depend on the machine; compare the ratios. Prints torch's thread count.
"""

from __future__ import annotations

import argparse

import torch

from mlsysrepro.kvcache import allocators
from mlsysrepro.kvcache.cache import FullCache
from mlsysrepro.kvcache.evaluation import decode_speed
from mlsysrepro.kvcache.policies import make_policy
from mlsysrepro.transformer.llama import Llama, LlamaConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab=84, dim=128, layers=4, heads=8, kv_heads=4, ffn=352)
    model = Llama(cfg).eval()
    full_len = args.context + args.tokens
    shape, caches = (cfg.layers, cfg.kv_heads), cfg.layers * cfg.kv_heads
    skew = torch.linspace(1.0, 4.0, caches).view(shape)  # a BaKlaVa-like spread of budgets
    variants = {"full": FullCache}
    for c in (0.5, 0.7, 0.9):
        total = allocators.total_budget(c, caches, full_len)
        for name, alloc in (("uniform", allocators.uniform(shape, total, 4, full_len)),
                            ("skewed", allocators.baklava(shape, total, 4, full_len, skew, 1.0))):
            for policy in ("streamingllm", "h2o", "snapkv"):
                variants[f"{name} {policy} {c:.0%}"] = (lambda a, p: lambda: a.cache(p))(alloc, make_policy(policy))
    table = decode_speed(model, variants, args.context, args.tokens, args.repeats, args.batch)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; context {args.context}, "
          f"{args.tokens} decoded tokens, batch {args.batch}, {args.repeats} rounds")
    print(table.set_index("cache")[["tokens_per_s", "speedup_vs_full", "speedup_low", "speedup_high"]].round(2)
          .to_string())


if __name__ == "__main__":
    main()
