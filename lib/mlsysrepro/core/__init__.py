"""The shared ground of every notebook; it knows no paper.

Public entry points:

- :func:`resolve_notebook` / :func:`resolve` (``settings``): scale presets and parameter validation;
  :func:`beside_paper`, a run's setting beside the paper's;
- :func:`fetch` (``data``): registered datasets, verified by sha256, from ``data/``, a mirror or the web;
- :class:`Claim` (declared in a paper module), :class:`Report`, the rules :func:`at_most`, :func:`at_least`, ...
  and the measurements :func:`across`, :func:`across_seeds`, :func:`from_samples`, :func:`not_testable` (``claims``);
- :func:`style` and :func:`savefig` (``plots``): one figure style, byte-identical files;
- :func:`cached` (``cache``): artifacts keyed by the seed and an explicit list of the knobs they depend on;
- :class:`TaskRunner` (``tasks``): independent tasks in this process, on local processes or on Ray, cached maps;
- :func:`interleaved`, :func:`ratios` (``timing``): timing in alternating rounds, medians with intervals;
- :func:`seed_everything` (``seed``) and :func:`progress` (``progress``);
- :func:`dist.launch` (``dist``): a torch.distributed job on local processes, fail-fast, no orphans.

The names load on first use (PEP 562): a process that imports one module of core, a worker that runs
``core.tasks`` or ``core.dist``, does not pay the seconds ``plots`` takes to load matplotlib and seaborn. The
imports under ``TYPE_CHECKING`` name where each comes from, for readers, type checkers and the cache's code hash
(:func:`mlsysrepro.core.cache.source_hash` reads them, so a module that imports ``from ..core import cached`` is
keyed by the code of ``core.cache`` and the rest of core, as before).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# ``progress`` is imported now: it is also the name of its module, which Python binds over the function on this
# package whenever any code imports ``core.progress`` (light: tqdm alone)
from .progress import progress

if TYPE_CHECKING:
    from .cache import cached
    from .claims import (ANALOGUE, CONSISTENCY, FINDING, Assumption, Claim, Measurement, Precondition, Report, above,
                         across, across_seeds, at_least, at_most, below, from_samples, is_true, not_testable, within)
    from .data import ChecksumError, DatasetError, fetch
    from .plots import savefig, style
    from .seed import seed_everything
    from .settings import Settings, beside_paper, resolve, resolve_notebook
    from .tasks import TaskRunner
    from .timing import interleaved, ratios

#: Each public name and the module of core that defines it.
_SOURCES = {
    "cache": ("cached",),
    "claims": ("ANALOGUE", "CONSISTENCY", "FINDING", "Assumption", "Claim", "Measurement", "Precondition", "Report",
               "above", "across", "across_seeds", "at_least", "at_most", "below", "from_samples", "is_true",
               "not_testable", "within"),
    "data": ("ChecksumError", "DatasetError", "fetch"),
    "plots": ("savefig", "style"),
    "seed": ("seed_everything",),
    "settings": ("Settings", "beside_paper", "resolve", "resolve_notebook"),
    "tasks": ("TaskRunner",),
    "timing": ("interleaved", "ratios"),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}
__all__ = sorted([*_MODULE_OF, "progress"])


def __getattr__(name: str):
    """A public name of core, imported from its module the first time it is asked for."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_MODULE_OF[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
