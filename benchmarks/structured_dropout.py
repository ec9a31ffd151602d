"""Benchmark of structured dropout: every exact form of case III, measured in one process, never assumed.

    .venv/bin/python benchmarks/structured_dropout.py [--hidden 650] [--batches 20 64] [--p 0.5] [--repeats 5]
                                                     [--device cpu]

The notebook's two speed measurements (mlsysrepro.papers.structured_dropout), printed as tables, after the machine
(processor, torch's threads, the BLAS and vector instructions its kernels use):

1. The three GEMMs (forward, backward-data, backward-weight) of the PTB model's input projection (H -> 4H) and
   decoder (H -> 10,000) under case III's per-step mask, in every form (mlsysrepro.sparsity.compaction.STAGE_FORMS:
   dense masked, per-draw compacted, batched compacted), as speed-ups over the dense form beside the ideal 1/(1-p).
2. One training step of PTB "medium" (2 x H, BPTT 35) and of the CoNLL-2003 BiLSTM tagger: standard dropout, case
   III under every kernel (mlsysrepro.sparsity.compaction.KERNELS: which form each GEMM takes), a longer mask period,
   case IV, and torch.nn.LSTM (oneDNN) with standard dropout; speed-up over standard dropout (the median of the
   per-round ratios), and seconds per epoch. The kernel that wins here is the one the notebook's CPU claim (C7)
   reads; the forms the ``auto`` kernel picked for each projection are printed after it.

Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse

import pandas as pd

from mlsysrepro.core.settings import resolve
from mlsysrepro.core.timing import machine
from mlsysrepro.papers import structured_dropout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=650)
    parser.add_argument("--batches", type=int, nargs="+", default=[20, 64])
    parser.add_argument("--p", type=float, default=0.5)
    parser.add_argument("--periods", type=int, nargs="+", default=[5])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu", choices=structured_dropout.DEVICES)
    args = parser.parse_args()
    settings = resolve("structured_dropout", structured_dropout.PRESETS, {
        "scale": "default", "speed_hidden": args.hidden, "speed_batches": args.batches, "speed_ps": [args.p],
        "speed_periods": args.periods, "speed_repeats": args.repeats, "p": args.p, "device": args.device})
    print(", ".join(f"{key}: {value}" for key, value in machine(args.device).items()))
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", None)

    if args.device == "cpu":
        print(f"\n1. GEMM stages at p = {args.p}: speed-up over the dense masked form (x), H = {args.hidden}, "
              f"T = {settings.bptt}; the ideal is {structured_dropout.stage_breakdown_ideal(settings):.2f}x")
        stages = structured_dropout.stage_breakdown(settings)
        print(stages.pivot_table(index=["gemm", "batch", "stage"], columns="form", values="speedup").round(2))

    print(f"\n2. One training step at p = {args.p}: speed-up over standard dropout (x), and seconds per epoch")
    speed = structured_dropout.speed_table(settings)
    print(speed.pivot_table(index="variant", columns=["task", "batch"], values="speedup_vs_standard",
                            sort=False).round(2))
    print(speed.pivot_table(index="variant", columns=["task", "batch"], values="epoch_s", sort=False).round(0))
    for name, task, batch in structured_dropout.speed_settings(speed, args.p):
        print(f"fastest case III kernel, {name}: {structured_dropout.fastest_kernel(speed, task, args.p, batch)}")
    print("\nforms the auto kernel picked (forward, backward-data, backward-weight), per projection T x B x H -> N:")
    print(structured_dropout.auto_forms(settings).to_string(index=False))


if __name__ == "__main__":
    main()
