"""The stall arithmetic of DS-Analyzer and its Stash extension, on measured seconds per iteration.

Every time is seconds per iteration at the same per-worker batch: RUN0 has one worker and RUN1-RUN3 have many, so
per-iteration time is what "normalised by samples processed per worker" leaves comparable (the authors' analysis
divides each run's TRAIN time by its sample count for the same reason).

- prep stall          = T(RUN3) - T(RUN1)                     share of T(RUN3)
- fetch stall         = T(RUN2) - T(RUN3)                     share of T(RUN2)  (DS-Analyzer's definition)
- fetch stall, fork   = T(RUN2) - prep stall                  what the Stash fork's ``analyze.py`` computes; it
                                                              counts compute and prep inside "fetch"
- interconnect stall  = T(RUN1, G workers, 1 machine) - T(RUN0)           share of T(RUN1)
- network stall       = T(RUN1, 2 machines x G/2) - T(RUN1, 1 machine x G)  share of the one-machine time

A negative difference (noise larger than the stall) is kept as measured; :func:`share` clips it at 0 as the
authors do for prep.
"""

from __future__ import annotations

from dataclasses import dataclass


def share(stall: float, total: float) -> float:
    """``stall / total`` clipped at 0 (a stall the noise hid is no stall)."""
    if total <= 0:
        raise ValueError(f"total time must be > 0, got {total}")
    return max(0.0, stall / total)


@dataclass(frozen=True)
class DataStalls:
    prep: float
    fetch: float
    fetch_fork: float
    prep_share: float
    fetch_share: float


def data_stalls(run1: float, run2: float, run3: float) -> DataStalls:
    """Prep and fetch stalls from seconds per iteration of RUN1 (synthetic), RUN2 (cold) and RUN3 (cached)."""
    prep = run3 - run1
    fetch = run2 - run3
    return DataStalls(prep=prep, fetch=fetch, fetch_fork=run2 - prep, prep_share=share(prep, run3),
                      fetch_share=share(fetch, run2))


def interconnect_stall(run0: float, run1: float) -> tuple[float, float]:
    """(seconds, share of RUN1) that all-reduce inside one machine adds to the per-iteration compute."""
    return run1 - run0, share(run1 - run0, run1)


def network_stall(one_machine: float, two_machines: float) -> tuple[float, float, float]:
    """(seconds, share of the one-machine time, slowdown factor) of splitting the same workers over two machines."""
    stall = two_machines - one_machine
    return stall, share(stall, one_machine), two_machines / one_machine
