"""Expensive artifacts (trained checkpoints, profiles) cached under ``data/cache/``.

An artifact is keyed by a hash of the settings that produced it plus a ``version`` the caller
bumps when the code that computes it changes; ``use_cache=False`` (every notebook's parameter)
recomputes and overwrites. Files are written atomically, so an interrupted run never leaves a
half-written artifact that a later run would trust::

    model_state = cached("bigram_lm", settings, train_model, version=1)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

from . import paths
from .settings import Settings


def cache_path(name: str, settings: Settings, version: int = 1) -> Path:
    """``data/cache/<paper>/<name>-v<version>-<settings hash>.pt``."""
    return paths.cache_dir() / settings.paper / f"{name}-v{version}-{settings.key(name, version)}.pt"


def cached(name: str, settings: Settings, compute: Callable[[], Any], version: int = 1) -> Any:
    """Return ``compute()``, loading it from the cache when an artifact for these settings exists.

    ``compute`` must return something ``torch.save`` can store (tensors, state dicts, dicts of
    numbers). With ``settings.use_cache`` false the artifact is recomputed and overwritten.
    """
    path = cache_path(name, settings, version)
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
