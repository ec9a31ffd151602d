"""KV caches for BaKlaVa (per-head KV-cache budgets); later AsymVLM's text-token eviction.

Public entry points:

- :class:`.cache.FullCache` — keeps every key and value: the reference that compressed caches are compared with.

Status (issue 5): the eviction policies (StreamingLLM, H2O, SnapKV), the per-(layer, KV head) budgeted cache and
the allocators (uniform, PyramidKV, AdaKV, DuoAttention-like, BaKlaVa) are not built yet.
"""
