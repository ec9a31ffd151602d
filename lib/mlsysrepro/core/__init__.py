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
"""

from .cache import cached
from .claims import (ANALOGUE, CONSISTENCY, FINDING, Assumption, Claim, Measurement, Precondition, Report, above,
                     across, across_seeds, at_least, at_most, below, from_samples, is_true, not_testable, within)
from .data import ChecksumError, DatasetError, fetch
from .plots import savefig, style
from .progress import progress
from .seed import seed_everything
from .settings import Settings, beside_paper, resolve, resolve_notebook
from .tasks import TaskRunner
from .timing import interleaved, ratios

__all__ = [
    "ANALOGUE",
    "Assumption",
    "CONSISTENCY",
    "ChecksumError",
    "Claim",
    "FINDING",
    "Precondition",
    "DatasetError",
    "Measurement",
    "Report",
    "Settings",
    "TaskRunner",
    "above",
    "across",
    "across_seeds",
    "at_least",
    "at_most",
    "below",
    "beside_paper",
    "cached",
    "fetch",
    "from_samples",
    "interleaved",
    "is_true",
    "not_testable",
    "progress",
    "ratios",
    "resolve",
    "resolve_notebook",
    "savefig",
    "seed_everything",
    "style",
    "within",
]
