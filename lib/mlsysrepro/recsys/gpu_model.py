"""A latency / parallelism model of the embedding stage on a GPU, for when no GPU is at hand.

One EmbeddingBag kernel of the paper's shape (blockDim (32, 8), 1024 blocks; a warp reads one 128-B line of a row
per load, so a row of ``dim`` floats is ``dim * 4 / 128`` loads) moves ``lines`` lines. Its time is the largest of
three bounds:

- **latency** (Little's law): ``lines * latency / in_flight``, where ``latency`` mixes the L2 and DRAM latencies by
  the L2 hit rate from :mod:`mlsysrepro.recsys.l2` run on the trace's own rows, and ``in_flight`` is the resident
  warps (:mod:`mlsysrepro.recsys.occupancy`: registers per thread bound them) times the loads each warp keeps in
  flight (1 for the baseline, whose every add waits for its load; ``d`` for register prefetching at distance d);
- **DRAM bandwidth**: the missed lines' bytes over HBM bandwidth;
- **L2 bandwidth**: every line's bytes over L2 bandwidth.

The A100's numbers are its datasheet's (SMs, clock, L2 size, HBM bandwidth) and published microbenchmark
latencies of an idle GPU (L2 hit about 200 cycles, DRAM about 500). Under the stage's load every access also waits
in queues (the index load before each row's, the L2 slices, the memory controllers); one constant, the factor
``latency_scale`` by which the load stretches both latencies, is fitted (:func:`fit_latency_scale`) so that the
model gives the paper's *baseline* slowdown from high reuse to random. With idle latencies both traces run at
their bandwidth bounds, whose ratio follows from the hit rates alone; as the latencies stretch, both become
latency-bound and the ratio falls towards the ratio of their mean latencies, so the fit is unique where the
paper's slowdown lies between the two. The optimisations' speed-ups are then predictions, never fitted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .l2 import Cache
from .occupancy import A100, SM, occupancy

BLOCK_THREADS = 256  # blockDim (32, 8)
BLOCK_WARPS = BLOCK_THREADS // 32


@dataclass(frozen=True)
class GPU:
    """What the model reads of a GPU. ``dram_latency_cycles`` is the latency of a missed line under load."""

    name: str
    sm: SM
    sms: int
    clock_hz: float
    l2: Cache
    dram_bytes_per_s: float
    l2_bytes_per_s: float
    l2_latency_cycles: float
    dram_latency_cycles: float
    latency_scale: float = 1.0


#: NVIDIA A100-SXM4-40GB (datasheet: 108 SMs, 1.41 GHz boost, 40 MB L2, 1,555 GB/s HBM2); L2 bandwidth 5,120 B per
#: clock (the Ampere whitepaper's 2.3x V100); latencies from published microbenchmarks (L2 hit ~200 cycles,
#: DRAM ~500 cycles unloaded; the loaded value is what :func:`fit_dram_latency` fits).
A100_40GB = GPU("A100-SXM4-40GB", A100, 108, 1.41e9, Cache(40 * 2**20), 1.555e12, 5120 * 1.41e9, 200.0, 500.0)


@dataclass(frozen=True)
class Kernel:
    """One variant of the embedding kernel: its registers per thread (as ptxas allocates them), the prefetch
    distance (0: none), and its grid of 256-thread blocks."""

    registers: int
    distance: int = 0
    grid: int = 1024

    def warps(self, gpu: GPU) -> int:
        """Warps resident on the whole GPU: the occupancy limit, or the grid when it is smaller."""
        return min(occupancy(self.registers, BLOCK_THREADS, gpu.sm).warps * gpu.sms, self.grid * BLOCK_WARPS)

    def in_flight(self, gpu: GPU) -> int:
        return self.warps(gpu) * max(1, self.distance)


def stage_seconds(lines: float, hit_rate: float, kernel: Kernel, gpu: GPU) -> dict[str, float]:
    """The three bounds and the modelled time (``seconds``, their largest) for ``lines`` line loads."""
    if not 0 <= hit_rate <= 1:
        raise ValueError(f"hit_rate must be in [0, 1], got {hit_rate}")
    cycles = gpu.latency_scale * (hit_rate * gpu.l2_latency_cycles + (1 - hit_rate) * gpu.dram_latency_cycles)
    bounds = {"latency": lines * cycles / gpu.clock_hz / kernel.in_flight(gpu),
              "dram": lines * (1 - hit_rate) * gpu.l2.line_bytes / gpu.dram_bytes_per_s,
              "l2": lines * gpu.l2.line_bytes / gpu.l2_bytes_per_s}
    bounds["seconds"] = max(bounds.values())
    bounds["bound"] = max(("latency", "dram", "l2"), key=lambda name: bounds[name])
    return bounds


def batch_lines(rows: int, dim: int, gpu: GPU) -> int:
    """Line loads of gathering ``rows`` rows of ``dim`` float32 values."""
    return rows * -(-dim * 4 // gpu.l2.line_bytes)


def fit_latency_scale(high_hit: float, random_hit: float, lines: float, kernel: Kernel, gpu: GPU,
                      slowdown: float) -> float:
    """The factor on the idle latencies at which the baseline kernel runs ``slowdown`` times slower on the random
    trace (hit rate ``random_hit``) than on the high-reuse one (``high_hit``): the first crossing on a log grid
    from 1/4 to 256, then bisection within it."""
    def gap(scale: float) -> float:
        scaled = replace(gpu, latency_scale=scale)
        return (stage_seconds(lines, random_hit, kernel, scaled)["seconds"]
                / stage_seconds(lines, high_hit, kernel, scaled)["seconds"]) - slowdown

    grid = np.geomspace(0.25, 256.0, 161)
    gaps = np.array([gap(scale) for scale in grid])
    crossing = np.flatnonzero(np.sign(gaps[:-1]) != np.sign(gaps[1:]))
    if crossing.size == 0:
        raise ValueError(f"slowdown must be within [{gaps.min() + slowdown:.2f}, {gaps.max() + slowdown:.2f}] "
                         f"for these hit rates ({high_hit:.3f}, {random_hit:.3f}) on {gpu.name}, got {slowdown}")
    low, high = grid[crossing[0]], grid[crossing[0] + 1]
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if np.sign(gap(middle)) == np.sign(gap(low)) else (low, middle)
    return float((low + high) / 2)
