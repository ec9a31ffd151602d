"""Where things live: the repository, fetched data, cached artifacts and each run's outputs.

``MLSYSREPRO_DATA_DIR`` moves ``data/``. Only ``default``-scale runs write into the committed
``figures/<paper>/``; every other scale writes under ``build/<scale>/figures/<paper>/`` so that tests and
smoke runs never touch what is committed. ``MLSYSREPRO_BUILD_DIR`` moves ``build/`` elsewhere (the tests point it at a
temporary folder).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The scale whose results are committed to ``figures/`` and ``REPRODUCTION.md``.
COMMITTED_SCALE = "default"

REPO_ROOT = Path(__file__).resolve().parents[3]


def data_dir() -> Path:
    """``data/``: verified copies of registered datasets (ignored by git but for its README)."""
    return Path(os.environ.get("MLSYSREPRO_DATA_DIR", REPO_ROOT / "data"))


def cache_dir() -> Path:
    """``data/cache/``: expensive artifacts keyed by the settings that produced them.

    ``MLSYSREPRO_CACHE_DIR`` moves it (the tests use a fresh one, so no stale artifact is read).
    """
    return Path(os.environ.get("MLSYSREPRO_CACHE_DIR", data_dir() / "cache"))


def build_dir() -> Path:
    """``build/``: everything a non-default run writes (executed notebooks, smoke figures)."""
    return Path(os.environ.get("MLSYSREPRO_BUILD_DIR", REPO_ROOT / "build"))


def figures_root(scale: str) -> Path:
    """The folder holding ``<paper>/`` result folders for runs at ``scale``."""
    if scale == COMMITTED_SCALE:
        return REPO_ROOT / "figures"
    return build_dir() / scale / "figures"


def output_dir(paper: str, scale: str) -> Path:
    """Where a run of ``paper`` at ``scale`` writes its figures and ``results.json``."""
    return figures_root(scale) / paper


def failure_marker(paper: str, scale: str) -> Path:
    """A file beside the output folder that says the notebook's last run at ``scale`` did not finish (and why): the
    notebook's :class:`mlsysrepro.core.claims.Report` writes it when the run starts, the runner adds the error when
    the notebook fails, and a successful :meth:`mlsysrepro.core.claims.Report.save` removes it (git ignores it)."""
    return figures_root(scale) / f".{paper}.failed"


def gpu_results_file() -> Path:
    """``benchmarks/gpu/gpu_check.json``: the numbers ``benchmarks/gpu_check.sh`` measured on a GPU, committed so that
    the notebooks can show them; ``MLSYSREPRO_GPU_RESULTS`` points elsewhere (the tests use a temporary file)."""
    return Path(os.environ.get("MLSYSREPRO_GPU_RESULTS", REPO_ROOT / "benchmarks" / "gpu" / "gpu_check.json"))
