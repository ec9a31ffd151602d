"""mlsysrepro: reproductions of ML-systems papers, one parameterized notebook per paper.

Layout (see docs/ARCHITECTURE.md):

- ``mlsysrepro.core``: knows no paper. Paths, seeding, scale presets and parameter
  validation, the data registry, claims and results.json, figure saving, caching, progress.
- ``mlsysrepro.catalog``: the eleven papers (and the template) with their notebooks,
  declared claims and figures.
- ``mlsysrepro.reproduction``: REPRODUCTION.md and the README's paper table, from results.json.
- ``mlsysrepro.runner``: executes notebooks through papermill (what ``run_all.sh`` calls).
- ``mlsysrepro.template``: the template notebook's one tiny experiment.
- one subpackage per theme, added by the paper issues (``gnn``, ``kvcache``, ``cluster``, ...).
"""

__version__ = "0.1.0"
