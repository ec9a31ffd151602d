"""Embedding-access traces: the MICRO'24 artifact's real row-id traces, Zipf traces fitted to Meta's locality
statistics for the ones that are missing, and the batches the artifact's benchmark cuts from a trace.

The artifact (``scripts/load_emb.py``) reads a trace of row ids of one 500K-row table circularly and gives each
sample ``pooling`` consecutive ids; every table of the model reads the same stream. Its four datasets are
``reuse_high``, ``reuse_medium``, ``reuse_low`` and ``random``; only ``medium`` and ``low`` are small enough to be in
the registry (``dlrm_micro24_traces``, with the four 60K hot-row lists the L2-pinning kernel pins).

What stands in for the two missing traces, said wherever a trace is shown:

- ``high``: a Zipf trace over the table's rows (ranks shuffled onto row ids, draws independent) whose exponent is
  fitted (:func:`fit_zipf`) so that its *reuse* (:func:`reuse_ratio`, the share of accesses that repeat a row
  already accessed) equals that of the highest-reuse dataset in Meta's ``dlrm_datasets`` locality statistics
  (:func:`meta_locality`), the tables the artifact's traces were extracted from;
- ``random``: ids drawn uniformly over the table (its reuse is chance alone).

:func:`reuse_stats` measures any trace the same way (accesses, unique rows, reuse, the share of accesses that the
top-k rows or a given hot list cover), so the stand-ins are compared with the real traces on one footing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from ..core.data import fetch

TRACES = ("high", "medium", "low", "random")
REAL = {"medium": "reuse_medium_table_500K.txt", "low": "reuse_low_table_500K.txt"}
HOT_LISTS = {name: f"pinned_indices/rj_60K_{name}_hot_indices.txt" for name in ("high", "medium", "low")}
HOT_LISTS["random"] = "pinned_indices/rj_60K_random_indices.txt"
TABLE_ROWS = 500_000
SOURCES = {
    "high": "Zipf stand-in: the artifact's reuse_high trace is not in the registry (>= 4 MiB); exponent fitted to the "
            "reuse of the highest-reuse table of Meta's dlrm_datasets",
    "medium": "real: the artifact's reuse_medium trace (429,951 ids of a 500K-row table)",
    "low": "real: the artifact's reuse_low trace (379,910 ids of a 500K-row table)",
    "random": "stand-in: ids uniform over the table (the artifact's random_500K trace is not in the registry)",
}


def _read_ids(path) -> np.ndarray:
    ids = np.loadtxt(path, dtype=np.int64, ndmin=1)
    if ids.size == 0:
        raise ValueError(f"{path}: no row ids")
    return ids


def load_real(name: str) -> np.ndarray:
    """The artifact's real trace ``name`` (``medium`` or ``low``): row ids of a 500K-row table, in order."""
    if name not in REAL:
        raise ValueError(f"name must be one of {sorted(REAL)} (the traces in the registry), got {name!r}")
    return _read_ids(fetch("dlrm_micro24_traces") / REAL[name])


def load_hot_rows(name: str) -> np.ndarray:
    """The artifact's 60,000 hot row ids for dataset ``name`` (one of :data:`TRACES`): what L2 pinning pins."""
    if name not in HOT_LISTS:
        raise ValueError(f"name must be one of {sorted(HOT_LISTS)}, got {name!r}")
    return _read_ids(fetch("dlrm_micro24_traces") / HOT_LISTS[name])


@dataclass(frozen=True)
class Locality:
    """One dataset of Meta's locality statistics: accesses and unique rows of one batch of 65,536 samples."""

    name: str
    accesses: float
    unique: float

    @property
    def reuse(self) -> float:
        return 1.0 - self.unique / self.accesses


def meta_locality(year: int | None = None) -> list[Locality]:
    """Every dataset of Meta's ``dlrm_datasets`` locality statistics (``year`` 2021 or 2022, or both)."""
    years = (2021, 2022) if year is None else (year,)
    if any(y not in (2021, 2022) for y in years):
        raise ValueError(f"year must be 2021, 2022 or None, got {year!r}")
    found = []
    for y in years:
        text = (fetch("meta_dlrm_datasets_stats") / f"locality_stats_{y}.txt").read_text()
        pattern = r"(\S+\.pt)\s*\n.*?Avg # of indices: ([\d.]+)\s*\nAvg # of unique cols: ([\d.]+)"
        for name, accesses, unique in re.findall(pattern, text, flags=re.S):
            found.append(Locality(f"{y}/{name}", float(accesses), float(unique)))
    if not found:
        raise ValueError("meta_dlrm_datasets_stats: no dataset found in the locality statistics")
    return found


def zipf_probabilities(rows: int, exponent: float) -> np.ndarray:
    """P(rank r) proportional to (r + 1) ** -exponent over ``rows`` ranks (exponent 0: uniform)."""
    if rows < 1 or exponent < 0:
        raise ValueError(f"rows must be >= 1 and exponent >= 0, got rows={rows}, exponent={exponent}")
    weights = np.arange(1, rows + 1, dtype=float) ** -float(exponent)
    return weights / weights.sum()


def expected_reuse(rows: int, accesses: int, exponent: float) -> float:
    """The expected reuse of ``accesses`` independent Zipf draws: 1 - E[unique] / accesses, where
    E[unique] = sum over rows of 1 - (1 - p_r) ** accesses."""
    p = zipf_probabilities(rows, exponent)
    unique = float(-np.expm1(accesses * np.log1p(-np.minimum(p, 1 - 1e-15))).sum())
    return 1.0 - unique / accesses


def fit_zipf(rows: int, accesses: int, reuse: float, tolerance: float = 1e-6) -> float:
    """The Zipf exponent whose expected reuse over ``accesses`` draws from ``rows`` rows is ``reuse`` (bisection:
    reuse rises with the exponent, from the uniform's chance reuse towards 1)."""
    low, high = 0.0, 8.0
    floor, ceiling = expected_reuse(rows, accesses, low), expected_reuse(rows, accesses, high)
    if not floor <= reuse <= ceiling:
        raise ValueError(f"reuse must be within [{floor:.4f}, {ceiling:.4f}] for {accesses} draws from {rows} rows "
                         f"(uniform to exponent {high}), got {reuse}")
    while high - low > tolerance:
        middle = (low + high) / 2
        low, high = (middle, high) if expected_reuse(rows, accesses, middle) < reuse else (low, middle)
    return (low + high) / 2


def zipf_trace(rows: int, accesses: int, exponent: float, seed: int) -> np.ndarray:
    """``accesses`` independent draws of Zipf ranks, each rank mapped to a row id by a random permutation (hot rows
    are scattered over the table, as in the real traces)."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(zipf_probabilities(rows, exponent))
    ranks = np.minimum(np.searchsorted(cdf, rng.random(accesses), side="right"), rows - 1)
    return rng.permutation(rows)[ranks].astype(np.int64)


def high_reuse_target() -> Locality:
    """The highest-reuse dataset of Meta's locality statistics: what the ``high`` stand-in is fitted to."""
    return max(meta_locality(), key=lambda d: d.reuse)


def load_trace(name: str, seed: int = 0, rows: int = TABLE_ROWS) -> np.ndarray:
    """Trace ``name`` of :data:`TRACES` over a table of ``rows`` rows: the real traces (ids folded into ``rows``
    when the table is smaller), or the stand-ins, as long as the medium trace. Each (name, seed, rows) is read or
    drawn once per process (the high-reuse stand-in's exponent is a fit); callers get their own copy."""
    if name not in TRACES:
        raise ValueError(f"name must be one of {TRACES}, got {name!r}")
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    return _trace(name, seed, rows).copy()


@lru_cache(maxsize=32)
def _trace(name: str, seed: int, rows: int) -> np.ndarray:
    if name in REAL:
        return load_real(name) % rows
    length = load_real("medium").size
    if name == "random":
        return np.random.default_rng(seed).integers(rows, size=length, dtype=np.int64)
    exponent = fit_zipf(rows, length, high_reuse_target().reuse)
    return zipf_trace(rows, length, exponent, seed)


def reuse_ratio(ids: np.ndarray) -> float:
    """The share of accesses that repeat a row already accessed: 1 - unique / accesses."""
    ids = np.asarray(ids)
    if ids.size == 0:
        raise ValueError("ids is empty")
    return 1.0 - np.unique(ids).size / ids.size


def coverage(ids: np.ndarray, rows: np.ndarray) -> float:
    """The share of the accesses ``ids`` that fall on ``rows`` (a hot list)."""
    ids = np.asarray(ids)
    return float(np.isin(ids, np.asarray(rows)).mean())


def top_rows(ids: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` most accessed rows of a trace (ties broken by row id), most accessed first."""
    rows, counts = np.unique(np.asarray(ids), return_counts=True)
    order = np.lexsort((rows, -counts))
    return rows[order[:k]]


def reuse_stats(ids: np.ndarray, hot: np.ndarray | None = None, k: int = 60_000) -> dict[str, float]:
    """Accesses, unique rows, reuse, the top-``k`` rows' share of accesses, and a hot list's share (``hot``)."""
    ids = np.asarray(ids)
    stats = {"accesses": int(ids.size), "unique": int(np.unique(ids).size), "reuse": reuse_ratio(ids),
             f"top_{k}_share": coverage(ids, top_rows(ids, k))}
    if hot is not None:
        stats["hot_list_share"] = coverage(ids, hot)
    return stats


def batches(ids: np.ndarray, batch: int, pooling: int, count: int, start: int = 0
            ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The artifact's batching (``load_emb.py``): the trace read circularly from ``start``, each sample taking
    ``pooling`` consecutive ids; ``count`` batches of ``batch`` samples as (indices, offsets) for an EmbeddingBag."""
    if batch < 1 or pooling < 1 or count < 1:
        raise ValueError(f"batch, pooling and count must be >= 1, got {batch}, {pooling}, {count}")
    ids = torch.as_tensor(np.asarray(ids), dtype=torch.int64)
    per_batch = batch * pooling
    offsets = torch.arange(batch, dtype=torch.int64) * pooling
    return [(ids[(start + k * per_batch + torch.arange(per_batch)) % ids.numel()], offsets) for k in range(count)]
