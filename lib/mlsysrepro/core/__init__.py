"""The shared ground of every notebook; it knows no paper.

Public entry points:

- :func:`resolve_notebook` / :func:`resolve` (``settings``): scale presets and parameter validation;
- :func:`fetch` (``data``): registered datasets, verified by sha256, from ``data/``, a mirror or the web;
- :class:`Report` and the rules :func:`at_most`, :func:`at_least`, :func:`within`, ... (``claims``);
- :func:`style` and :func:`savefig` (``plots``): one figure style, byte-identical files;
- :func:`cached` (``cache``): artifacts keyed by the settings that produced them;
- :func:`seed_everything` (``seed``) and :func:`progress` (``progress``);
- :func:`dist.launch` (``dist``): a torch.distributed job on local processes, fail-fast, no orphans;
- :class:`parallel.RunPool` (``parallel``): independent runs on worker processes, one thread each.
"""

from .cache import cached
from .claims import Report, above, at_least, at_most, below, is_true, within
from .data import ChecksumError, DatasetError, fetch
from .plots import savefig, style
from .progress import progress
from .seed import seed_everything
from .settings import Settings, resolve, resolve_notebook

__all__ = [
    "ChecksumError",
    "DatasetError",
    "Report",
    "Settings",
    "above",
    "at_least",
    "at_most",
    "below",
    "cached",
    "fetch",
    "is_true",
    "progress",
    "resolve",
    "resolve_notebook",
    "savefig",
    "seed_everything",
    "style",
    "within",
]
