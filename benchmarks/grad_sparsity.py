"""Benchmark of the data gradient computed only where it is needed (issue 27), against the dense one timed in the
same process.

    .venv/bin/python benchmarks/grad_sparsity.py [--batch 32] [--channels 32] [--side 28] [--repeats 7]

A 3x3 stride-1 convolution's data gradient (``torch.nn.grad.conv2d_input``, times the mask: the baseline) against
skipping dead input channels and skipping unneeded positions (:mod:`mlsysrepro.sparsity.output_sparse`), at a
range of input sparsities. The mask zeroes whole channels with probability ``--dead`` and single positions at the
given rate, as ReLUs do. Printed: milliseconds and the speed-up over dense (the median of interleaved rounds'
ratios), and the largest difference from the dense result.

Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse

import torch

from mlsysrepro.core.timing import interleaved, machine, ratios
from mlsysrepro.sparsity.output_sparse import by_channels, by_positions, dense_masked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--side", type=int, default=28)
    parser.add_argument("--dead", type=float, default=0.25)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(machine())
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(args.channels, args.channels, 3, 3, generator=generator)
    dy = torch.randn(args.batch, args.channels, args.side, args.side, generator=generator)
    print(f"{'zeros':>6} {'dense ms':>9} {'channels':>16} {'positions':>16} {'max diff':>9}")
    for zeros in (0.5, 0.8, 0.95, 0.99):
        shape = (args.batch, args.channels, args.side, args.side)
        needed = torch.rand(shape, generator=generator) >= zeros
        needed &= (torch.rand(1, args.channels, 1, 1, generator=generator) >= args.dead)
        calls = {"dense": lambda: dense_masked(dy, weight, needed, 1, 1),
                 "channels": lambda: by_channels(dy, weight, needed, 1, 1),
                 "positions": lambda: by_positions(dy, weight, needed, 1)}
        timings = interleaved(calls, args.repeats)
        speed = ratios(timings, "dense")
        reference = calls["dense"]()
        gap = max(float((calls[k]() - reference).abs().max()) for k in ("channels", "positions"))
        print(f"{zeros:>6.0%} {timings['dense'].median * 1e3:>9.2f} "
              + " ".join(f"{timings[k].median * 1e3:>7.2f} ({speed[k].median:>4.2f}x)" for k in ("channels", "positions"))
              + f" {gap:>9.1e}")


if __name__ == "__main__":
    main()
