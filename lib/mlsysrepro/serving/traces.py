"""Request-arrival traces for a serving simulator: per-second request counts over whole days.

Cocktail is evaluated on the Wikipedia pageview trace and a Twitter trace (both as in MArk and INFaaS). Neither can
be had here (no internet at run time; the Cocktail repository ships no licensed copy). What stands in, said plainly
wherever a trace is shown: the **shape** of the load over a day comes from a real cluster trace's job-submission
times in the registry, and the **counts** per second are drawn around that shape.

- :func:`daily_shape` — a relative rate per minute (mean 1) from submission times, either ``folded`` (every
  submission placed at its time of day: one smooth diurnal curve, repeated each day, the shape of a pageview
  trace) or ``consecutive`` (the trace's own consecutive days, hour by hour: irregular, bursty days);
- :func:`per_second_arrivals` — requests per second: Poisson counts around the shape, scaled to a mean rate, with
  a gamma-distributed factor per minute (a doubly stochastic, Cox process) whose shape parameter sets the burstiness;
- :func:`submission_times` — the registry traces the shapes are built from;
- :func:`load_wikipedia_pageviews` — the real Wikimedia hourly pageview dumps, for the ``paper`` scale where they
  have been downloaded: the same per-minute shape, from the genuine trace.
"""

from __future__ import annotations

import gzip
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.data import fetch

DAY = 86_400
MINUTES = 1_440
SOURCES = {"openb": "Alibaba openb pod creation times (cluster-trace-gpu-v2023, openb_pod_list_default: 8,152 pods "
                    "over 149 days; the registry's one trace with real submission times spanning days)"}
MODES = ("folded", "consecutive")


def submission_times(source: str) -> np.ndarray:
    """Seconds since the first submission of every job of a registry trace (:data:`SOURCES`)."""
    files = {"openb": "openb_pod_list_default.csv"}
    if source not in files:
        raise ValueError(f"source must be one of {sorted(SOURCES)}, got {source!r}")
    path = fetch("alibaba_gpu_traces_small") / "cluster-trace-gpu-v2023" / "csv" / files[source]
    column = pd.read_csv(path, usecols=["creation_time"]).creation_time
    seconds = np.sort(column.to_numpy(dtype=float))
    return seconds - seconds[0]


def _circular_smooth(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1:
        return values
    kernel = np.ones(window) / window
    padded = np.concatenate([values[-window:], values, values[:window]])
    return np.convolve(padded, kernel, mode="same")[window:-window]


def daily_shape(seconds: np.ndarray, days: int, mode: str = "folded", smooth_minutes: int = 60,
                start_day: int | None = None) -> np.ndarray:
    """A relative arrival rate for each minute of ``days`` days (mean 1 over them).

    ``folded``: submissions counted by minute of the day over the whole trace, smoothed over ``smooth_minutes``
    (circularly) and repeated each day. ``consecutive``: submissions counted by hour on the trace's own days from
    ``start_day`` on (None: the ``days`` consecutive days with the most submissions), each hour's count spread over
    its minutes and smoothed likewise (an empty hour keeps a tenth of the mean, so no minute has zero load)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    if mode == "folded":
        counts = np.bincount((np.asarray(seconds) % DAY // 60).astype(int), minlength=MINUTES).astype(float)
        shape = np.tile(_circular_smooth(counts, smooth_minutes), days)
    else:
        span_days = int(np.asarray(seconds).max() // DAY)
        if start_day is None:
            daily = np.bincount((np.asarray(seconds) // DAY).astype(int), minlength=span_days)[:span_days]
            start_day = int(np.argmax(np.convolve(daily, np.ones(days), mode="valid")))
        if start_day + days > span_days:
            raise ValueError(f"start_day + days must be at most the trace's {span_days} whole days, got "
                             f"{start_day} + {days}")
        hours = np.bincount((np.asarray(seconds) // 3600).astype(int), minlength=(start_day + days) * 24)
        hourly = hours[start_day * 24:(start_day + days) * 24].astype(float)
        if hourly.sum() == 0:
            raise ValueError(f"the trace has no submission on days {start_day} to {start_day + days - 1}")
        hourly = np.maximum(hourly, 0.1 * hourly.mean())
        shape = _circular_smooth(np.repeat(hourly, 60), smooth_minutes)
    return shape / shape.mean()


def per_second_arrivals(shape: np.ndarray, mean_rate: float, seed: int, burst_shape: float = 20.0) -> np.ndarray:
    """Requests in each second: Poisson with mean ``mean_rate * shape[minute] * g[minute]``, where ``g`` is a
    gamma factor of mean 1 and shape ``burst_shape`` per minute (its coefficient of variation is
    ``1 / sqrt(burst_shape)``; ``inf``: none)."""
    if mean_rate <= 0:
        raise ValueError(f"mean_rate must be > 0 requests per second, got {mean_rate}")
    if burst_shape <= 0:
        raise ValueError(f"burst_shape must be > 0, got {burst_shape}")
    rng = np.random.default_rng(seed)
    factor = np.ones(len(shape)) if np.isinf(burst_shape) else rng.gamma(burst_shape, 1 / burst_shape, len(shape))
    return rng.poisson(np.repeat(mean_rate * np.asarray(shape) * factor, 60)).astype(np.int64)


def per_minute(arrivals: np.ndarray) -> np.ndarray:
    """Mean requests per second in each whole minute of a per-second trace."""
    minutes = len(arrivals) // 60
    return np.asarray(arrivals[:minutes * 60], dtype=float).reshape(minutes, 60).mean(1)


_DUMP_NAME = re.compile(r"(?:pageviews|projectviews)-(\d{8})-(\d{6})")


def load_wikipedia_pageviews(paths, project: str = "en") -> pd.Series:
    """Views per hour of one Wikimedia project from hourly dump files (``pageviews-YYYYMMDD-HH0000[.gz]`` or
    ``projectviews-...``, https://dumps.wikimedia.org/other/pageviews/, CC0): lines ``domain_code page_title
    count_views total_response_size``, summed over the lines whose domain code is ``project`` (``en`` is the
    English Wikipedia's desktop site). Indexed by the hour's UTC start; pass ``.to_numpy()`` to
    :func:`shape_from_hourly` to drive :func:`per_second_arrivals`."""
    totals = {}
    for path in map(Path, paths):
        match = _DUMP_NAME.search(path.name)
        if not match:
            raise ValueError(f"{path}: not a pageview dump name (pageviews-YYYYMMDD-HHMMSS or projectviews-...)")
        hour = datetime.strptime("".join(match.groups()), "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
        opener = gzip.open if path.suffix == ".gz" else open
        views = 0
        with opener(path, "rt", encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                fields = line.split(" ")
                if len(fields) != 4:
                    raise ValueError(f"{path}:{number}: expected 4 space-separated fields, got {len(fields)}")
                if fields[0] == project:
                    views += int(fields[2])
        totals[pd.Timestamp(hour)] = views
    if not totals:
        raise ValueError("paths is empty: pass at least one hourly dump file")
    return pd.Series(totals, name=f"{project} views per hour").sort_index()


def shape_from_hourly(hourly: np.ndarray, smooth_minutes: int = 60) -> np.ndarray:
    """A per-minute relative rate (mean 1) from counts per hour: each hour spread over its minutes, smoothed."""
    hourly = np.asarray(hourly, dtype=float)
    if hourly.size == 0 or hourly.sum() <= 0:
        raise ValueError("hourly must hold at least one positive count")
    shape = _circular_smooth(np.repeat(hourly, 60), smooth_minutes)
    return shape / shape.mean()
