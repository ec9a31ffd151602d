"""Benchmark of structured dropout (issue 7): speed-ups measured in one process, never assumed.

    .venv/bin/python benchmarks/structured_dropout.py [--hidden 650] [--steps 35] [--repeats 3]

1. The three GEMMs of an LSTM input projection (H -> 4H) and of the PTB decoder (H -> 10,000) under a
   structured mask, dense-masked against compacted (mlsysrepro.sparsity.gemm_timing), p = 0.5, beside
   the ideal 1/(1-p), for batch 20, 64 and 128.
2. The PTB language model of Zaremba et al. ("medium": 2 x H, 10,000 words), one training step on a
   BPTT window (forward, backward, SGD update), p = 0.5: structured (compacted) dropout against the same
   implementation with standard dropout, and the same model on torch.nn.LSTM (oneDNN) with standard
   dropout between layers, for batch 20, 64 and 128.

Prints torch's thread settings. Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

from mlsysrepro.sparsity.gemm_timing import median_seconds, time_stages
from mlsysrepro.sparsity.models import WordLM

VOCAB = 10_000


class TorchLM(nn.Module):
    """The same language model on torch.nn.LSTM, standard dropout on the embeddings, between layers and before the decoder."""

    def __init__(self, hidden: int, p: float):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, hidden)
        self.drop = nn.Dropout(p)
        self.lstm = nn.LSTM(hidden, hidden, 2, dropout=p)
        self.decoder = nn.Linear(hidden, VOCAB)

    def forward(self, ids, state=None, generator=None):
        out, state = self.lstm(self.drop(self.embedding(ids)), state)
        return self.decoder(self.drop(out)), state


def step_seconds(model, ids, repeats: int, generator=None) -> float:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        logits, _ = model(ids, None, generator)
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return median_seconds(step, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=650)
    parser.add_argument("--steps", type=int, default=35)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    H, T = args.hidden, args.steps
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, "
          f"oneDNN {'available' if torch.backends.mkldnn.is_available() else 'off'}")

    print(f"\n1. GEMM stages at p = 0.5 (T = {T}): dense-masked / compacted")
    for name, out_dim in (("input projection H -> 4H", 4 * H), ("decoder H -> 10,000", VOCAB)):
        for batch in (20, 64, 128):
            rows = time_stages(T, batch, H, out_dim, 0.5, repeats=args.repeats)
            print(f"  {name:<24} batch {batch:>3}: " + ", ".join(f"{r['stage']} {r['speedup']:.2f}x" for r in rows)
                  + f"  (ideal {rows[0]['ideal_speedup']:.2f}x)")

    print(f"\n2. PTB language model, 2 x {H}, one training step on a {T}-token window, p = 0.5")
    for batch in (20, 64, 128):
        torch.manual_seed(0)
        ids = torch.randint(VOCAB, (T, batch))
        g = torch.Generator().manual_seed(0)
        structured = step_seconds(WordLM(VOCAB, H, 2, 0.5, "structured"), ids, args.repeats, g)
        standard = step_seconds(WordLM(VOCAB, H, 2, 0.5, "standard"), ids, args.repeats, g)
        reference = step_seconds(TorchLM(H, 0.5), ids, args.repeats)
        print(f"  batch {batch:>3}: structured {structured * 1e3:7.0f} ms, standard (ours) {standard * 1e3:7.0f} ms, "
              f"torch.nn.LSTM {reference * 1e3:7.0f} ms;  speed-up vs standard {standard / structured:.2f}x, "
              f"vs torch.nn.LSTM {reference / structured:.2f}x")


if __name__ == "__main__":
    main()
