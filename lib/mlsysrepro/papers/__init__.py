"""One module per paper, named as in :mod:`mlsysrepro.catalog`: the paper's ``PRESETS``, its experiment functions
(one per figure or table, each caching what it computes), and the summaries its claims read.

A paper module may import the themes (``gnn``, ``kvcache``, ``transformer``, ``cluster``, ``ddl``, ``sparsity``,
``recurrent``, ``text``, ``vision``) and ``core``. Nothing imports a paper module but its notebook, its tests and
the catalog (docs/ARCHITECTURE.md).

- :mod:`.template` — the template notebook's convention check (mini-batch gradient noise falls as 1/B);
- :mod:`.llcg`, :mod:`.mvs_gnn` — graph learning;
- :mod:`.baklava` — transformer inference;
- :mod:`.structured_dropout` — training efficiency;
- :mod:`.ddl_stalls`, :mod:`.dally` — cloud and clusters.
"""
