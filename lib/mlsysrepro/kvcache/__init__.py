"""KV caches with a budget per (layer, KV head), for BaKlaVa (Gulhan et al. 2025); later AsymVLM's text-token
eviction.

Public entry points:

- :class:`.cache.FullCache` and :class:`.cache.BudgetedCache` — the reference cache and the budgeted one, both
  speaking :class:`mlsysrepro.transformer.llama.KVCache`;
- :mod:`.policies` — StreamingLLM, H2O and SnapKV eviction inside a cache's budget (:func:`.policies.make_policy`);
- :mod:`.allocators` — compression defined once (:func:`.allocators.total_budget`) and the budgets of uniform,
  PyramidKV, AdaKV, a DuoAttention-like split and BaKlaVa;
- :mod:`.profiling` — BaKlaVa's one-time head-importance profile and a retrieval score;
- :mod:`.evaluation` — perplexity and retrieval decoded through a cache, and decoding speed against the full cache.

BaKlaVa's presets and experiments are :mod:`mlsysrepro.papers.baklava`.
"""
