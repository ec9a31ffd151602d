"""One call that makes a run repeatable: same seed, same numbers, same figures."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch, and ask torch for deterministic kernels.

    Returns a ``torch.Generator`` seeded with ``seed`` for code that prefers an explicit
    generator over the global one (samplers, data splits).
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    # warn_only: a few CPU ops have no deterministic variant; they warn instead of failing.
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.Generator().manual_seed(seed)
