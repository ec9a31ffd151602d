"""A Llama-style causal language model in plain torch: serves BaKlaVa (per-head KV-cache budgets) and AsymVLM's
vision-language model.

Public entry points:

- :class:`.llama.LlamaConfig` and :class:`.llama.Llama` — RMSNorm, rotary positions (RoPE), grouped-query
  attention and a SwiGLU feed-forward; ``model(tokens, positions, cache)`` returns next-token logits;
- the KV-cache protocol the attention speaks (:class:`.llama.KVCache`): ``update(layer, k, v, positions)``
  returns every key, value and position the layer may attend to, ``query_weights(layer, queries)`` says which
  queries' attention the cache reads (None: none, and the layer runs the fused kernel only), ``observe(layer,
  paid)`` sees that attention afterwards, summed over the queries. Policies and budgets live in
  :mod:`mlsysrepro.kvcache`; the model knows only the protocol;
- :mod:`.vlm` — :class:`.vlm.TinyVLM`, a ViT with a [CLS] token, a projector and the decoder over
  ``[vision][question]``; :mod:`.vlm_training` trains it on the canvases of :mod:`mlsysrepro.vision.canvases`;
  :mod:`.flops` counts a (pruned) prefill's FLOPs, FastV's accounting;
- :mod:`.tokenizer` (characters, a byte-pair encoding trained here), :mod:`.retrieval` (corpora, text windows and
  the synthetic key-value retrieval / needle task) and :mod:`.training` (mixed batches, AdamW).
"""
