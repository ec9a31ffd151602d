"""KV caches with a budget per (layer, KV head), for BaKlaVa (Gulhan et al. 2025), and the token scorers that
decide what a model keeps: KV eviction policies and AsymVLM's vision-token pruners.

Public entry points:

- :class:`.cache.FullCache` and :class:`.cache.BudgetedCache` — the reference cache and the budgeted one, both
  speaking :class:`mlsysrepro.transformer.llama.KVCache`;
- :mod:`.policies` — StreamingLLM, H2O, SnapKV and AsymVLM's temporal-threshold eviction inside a cache's budget
  (:func:`.policies.make_policy`);
- :mod:`.pruning`, :mod:`.pruners`, :mod:`.schedules` — vision-token pruning in a VLM's prefill through the same
  token-scorer contract, the pruners (FastV, PyramidDrop, SparseVLM-, VisionZip-, FitPrune-like, AsymVLM's learned
  scorer, ...) and their token counts at matched FLOPs;
- :mod:`.allocators` — compression defined once (:func:`.allocators.total_budget`) and the budgets of uniform,
  PyramidKV, AdaKV, a DuoAttention-like split and BaKlaVa;
- :mod:`.profiling` — BaKlaVa's one-time head-importance profile and a retrieval score;
- :mod:`.evaluation` — perplexity and retrieval decoded through a cache, and decoding speed against the full cache.

BaKlaVa's presets and experiments are :mod:`mlsysrepro.papers.baklava`; AsymVLM's :mod:`mlsysrepro.papers.asymvlm`.
"""
