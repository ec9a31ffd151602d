"""Wall-clock timing that holds up on a shared machine: device synchronisation, interleaved repeats, intervals.

Every timed number in the collection (benchmarks, speed tables, timing claims) comes from here:

- :func:`synchronize` / :func:`clock`: wait for a GPU's queued work, so that a wall-clock time covers it (a no-op
  on the CPU);
- :func:`interleaved`: time several callables over ``repeats`` rounds, each round calling every callable once,
  in an order that alternates from round to round (forward, then reversed). A slow spell of the machine then
  slows every callable alike, and no callable always runs right after the same other one; timed one after the
  other instead, the ratios between them drifted by 30 % on a 2-core VM;
- :class:`Timing`: the samples of one callable, their median and a distribution-free interval for the median
  (:func:`median_interval`);
- :func:`ratios`: per-round ratios against a baseline timed in the same rounds (a speed-up and its interval),
  which cancel the drift that hits a whole round.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch


def synchronize(device: torch.device | str | None = None) -> None:
    """Wait until ``device``'s queued work is done (CUDA runs asynchronously); nothing to wait for on the CPU."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def clock(device: torch.device | str | None = None) -> float:
    """``time.perf_counter()`` once ``device``'s queued work is done."""
    synchronize(device)
    return time.perf_counter()


def median_interval(samples, confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval for the median of ``samples``: the order statistics ``x_(k)`` and
    ``x_(n+1-k)`` with the largest ``k`` whose coverage ``1 - 2 P(Binomial(n, 1/2) < k)`` is at least
    ``confidence``; with too few samples for that, the whole range (for 5 samples: min and max, 94 %)."""
    values = sorted(samples)
    n = len(values)
    if n == 0:
        raise ValueError("median_interval needs at least one sample")
    k, below = 1, 1 / 2**n  # below = P(Binomial(n, 1/2) < k)
    while k + 1 <= (n + 1) // 2:
        below_next = below + math.comb(n, k) / 2**n  # P(Binomial < k + 1)
        if 1 - 2 * below_next < confidence:
            break
        k, below = k + 1, below_next
    return values[k - 1], values[n - k]


@dataclass(frozen=True)
class Timing:
    """Seconds of each timed call of one callable (or ratios, from :func:`ratios`)."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def interval(self) -> tuple[float, float]:
        """A 95 % interval for the median (:func:`median_interval`)."""
        return median_interval(self.samples)


def interleaved(fns: Mapping[str, Callable], repeats: int, *, warmup: int = 1,
                setup: Callable[[str], Any] | None = None,
                device: torch.device | str | None = None) -> dict[str, Timing]:
    """Time every callable of ``fns`` over ``repeats`` rounds; returns a :class:`Timing` per name.

    Each callable is first called ``warmup`` times, untimed. Round ``r`` then calls each once, in the order of
    ``fns`` for even ``r`` and the reverse for odd ``r``. With ``setup``, ``setup(name)`` runs untimed before each
    call and its result is the call's argument (a fresh copy of a state the call consumes, say); without it the
    callables take no argument. With ``device``, the clock waits for the device's queued work (:func:`clock`).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")

    def call(name: str) -> float:
        args = () if setup is None else (setup(name),)
        start = clock(device)
        fns[name](*args)
        return clock(device) - start

    for name in fns:
        for _ in range(warmup):
            call(name)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for round_ in range(repeats):
        for name in (order if round_ % 2 == 0 else order[::-1]):
            samples[name].append(call(name))
    return {name: Timing(tuple(values)) for name, values in samples.items()}


def ratios(timings: Mapping[str, Timing], baseline: str) -> dict[str, Timing]:
    """Per name, the per-round ratios ``baseline seconds / its seconds`` (a speed-up over ``baseline``: above 1 is
    faster), from timings of the same rounds of :func:`interleaved`."""
    if baseline not in timings:
        raise ValueError(f"baseline must be one of {sorted(timings)}, got {baseline!r}")
    base = timings[baseline].samples
    return {name: Timing(tuple(b / s for b, s in zip(base, t.samples))) for name, t in timings.items()}


def machine(device: torch.device | str | None = None) -> dict[str, str]:
    """What a timing ran on: the processor (or ``device``'s GPU), torch, its intra-op threads, the BLAS and the
    vector instructions its CPU kernels use, and oneDNN; every timed table of the collection prints it beside it."""
    import platform
    import re

    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    library = re.search(r"(Intel\(R\) oneAPI Math Kernel Library Version [\w.]+|OpenBLAS [\w.]+)", config)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    except OSError:
        pass
    described = {"cpu": cpu, "torch": torch.__version__, "threads": str(torch.get_num_threads()),
                 "blas": (library.group(1) if library else blas.group(1) if blas else "unknown"),
                 "cpu kernels": torch.backends.cpu.get_cpu_capability(),
                 "oneDNN": "on" if torch.backends.mkldnn.is_available() else "off"}
    if device is not None and torch.device(device).type == "cuda":
        described["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return described
