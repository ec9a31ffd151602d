"""Benchmark of structured dropout (issue 7): speed-ups measured in one process, never assumed.

    .venv/bin/python benchmarks/structured_dropout.py [--hidden 650] [--batches 20 64] [--ps 0.5] [--repeats 3]

The notebook's two speed measurements (mlsysrepro.papers.structured_dropout), printed as tables:

1. The three GEMMs (forward, backward-data, backward-weight) of the PTB model's input projection (H -> 4H) and
   decoder (H -> 10,000) under case III's per-step mask, dense-masked against compacted, beside the ideal
   1/(1-p), at each batch.
2. One training step of PTB "medium" (2 x H, BPTT 35) and of the CoNLL-2003 BiLSTM tagger: standard dropout,
   structured (case III), structured with a longer mask period, case IV, all on our LSTM, and torch.nn.LSTM
   (oneDNN) with standard dropout; speed-up against standard dropout, and seconds per epoch.

Prints torch's thread settings. Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse

import pandas as pd
import torch

from mlsysrepro.core.settings import resolve
from mlsysrepro.papers import structured_dropout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=650)
    parser.add_argument("--batches", type=int, nargs="+", default=[20, 64])
    parser.add_argument("--ps", type=float, nargs="+", default=[0.5])
    parser.add_argument("--periods", type=int, nargs="+", default=[5])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    settings = resolve("structured_dropout", structured_dropout.PRESETS, {
        "scale": "default", "speed_hidden": args.hidden, "speed_batches": args.batches, "speed_ps": args.ps,
        "speed_periods": args.periods, "speed_repeats": args.repeats, "p": args.ps[0]})
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, "
          f"oneDNN {'available' if torch.backends.mkldnn.is_available() else 'off'}")
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", None)

    print(f"\n1. GEMM stages, compacted vs dense-masked (x), H = {args.hidden}, T = {settings.bptt}")
    stages = pd.concat([structured_dropout.stage_breakdown(settings, batch) for batch in args.batches])
    print(stages.pivot_table(index=["gemm", "batch", "p"], columns="stage", values="speedup").round(2))

    print("\n2. One training step: speed-up vs standard dropout (x), and seconds per epoch")
    speed = structured_dropout.speed_table(settings)
    print(speed.pivot_table(index=["task", "batch", "p"], columns="variant", values="speedup_vs_standard").round(2))
    print(speed.pivot_table(index=["task", "batch", "p"], columns="variant", values="epoch_s").round(0))


if __name__ == "__main__":
    main()
