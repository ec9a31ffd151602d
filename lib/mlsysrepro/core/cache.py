"""Expensive artifacts (trained checkpoints, profiles, simulation tables) cached under ``data/cache/``.

An artifact is keyed by the run's seed, the values of an explicit list of the knobs it depends on, its name and
a ``version`` the caller bumps when the code that computes it changes. A knob that does not change the artifact
(a worker count, a speed measurement's size) is left out of the list, so changing it never invalidates the
cache. ``use_cache=False`` (every notebook's parameter) recomputes and overwrites. Files are written atomically,
so an interrupted run never leaves a half-written artifact that a later run would trust::

    w_star = cached("w_star", settings, fit, knobs=("n_samples", "n_features", "fit_steps"))
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from . import paths
from .settings import Settings


def cache_key(name: str, settings: Settings, knobs: Iterable[str], version: int = 1) -> str:
    """A short stable hash of the paper, the seed, ``name``, ``version`` and the values of ``knobs``; a ValueError
    names a knob that is not one of the paper's parameters."""
    knobs = sorted(set(knobs))
    unknown = [k for k in knobs if k not in settings.values]
    if unknown:
        raise ValueError(f"knobs {unknown} are not parameters of {settings.paper}; parameters: "
                         f"{sorted(settings.values)}")
    blob = json.dumps([settings.paper, settings.seed, name, version, {k: settings.values[k] for k in knobs}],
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cache_path(name: str, settings: Settings, knobs: Iterable[str], version: int = 1) -> Path:
    """``data/cache/<paper>/<name>-v<version>-<key>.pt``."""
    return paths.cache_dir() / settings.paper / f"{name}-v{version}-{cache_key(name, settings, knobs, version)}.pt"


def cached(name: str, settings: Settings, compute: Callable[[], Any], *, knobs: Iterable[str],
           version: int = 1) -> Any:
    """Return ``compute()``, loading it from the cache when an artifact for this seed and these ``knobs`` exists.

    ``knobs`` lists every knob ``compute`` reads (directly or through the tasks it runs); ``compute`` must return
    something ``torch.save`` can store (tensors, state dicts, frames, dicts of numbers). With
    ``settings.use_cache`` false the artifact is recomputed and overwritten.
    """
    path = cache_path(name, settings, knobs, version)
    if settings.use_cache and path.exists():
        return torch.load(path, weights_only=False)
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        torch.save(value, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return value
