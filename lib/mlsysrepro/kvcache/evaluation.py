"""Quality under a cache: perplexity of decoded text and exact-match retrieval, token by token.

Both follow the long-context protocol: a prompt is prefilled at once (batched), the cache compresses it, and
every later token is decoded one at a time through the cache, which evicts as it goes (the protocol of
StreamingLLM's ``eval_long_ppl``). ``make_cache`` builds a fresh cache per batch of sequences, so every method
sees the same prompts and the same decoding.

:func:`decode_speed` times decoding through several caches (tokens per second and the speed-up over the full
cache), interleaved round by round (:func:`mlsysrepro.core.timing.interleaved`).

Public entry points: :func:`decode_nll`, :func:`perplexity`, :func:`answers_correct`, :func:`decode_speed`.
"""

from __future__ import annotations

import copy
from typing import Callable

import pandas as pd
import torch
import torch.nn.functional as F

from ..core.timing import interleaved, ratios
from ..transformer.llama import Llama
from ..transformer.retrieval import VALUE_DIGITS


@torch.no_grad()
def decode_nll(model: Llama, tokens: torch.Tensor, prefill: int, make_cache: Callable, batch: int = 16
               ) -> torch.Tensor:
    """(N, T - prefill): the negative log-likelihood of every token after the first ``prefill`` ones, each
    predicted from the cache after decoding all tokens before it."""
    n, t = tokens.shape
    if not 1 <= prefill < t:
        raise ValueError(f"prefill ({prefill}) must be in [1, {t - 1}] for sequences of {t} tokens")
    out = torch.empty(n, t - prefill)
    for first in range(0, n, batch):
        x = tokens[first:first + batch]
        cache = make_cache()
        logits = model(x[:, :prefill], cache=cache)[:, -1]
        for step in range(prefill, t):
            out[first:first + batch, step - prefill] = F.cross_entropy(logits, x[:, step], reduction="none")
            if step + 1 < t:
                position = torch.full((x.shape[0], 1), step)
                logits = model(x[:, step:step + 1], positions=position, cache=cache)[:, -1]
    return out


def perplexity(model: Llama, tokens: torch.Tensor, prefill: int, make_cache: Callable, batch: int = 16) -> float:
    return float(decode_nll(model, tokens, prefill, make_cache, batch).mean().exp())


@torch.no_grad()
def answers_correct(model: Llama, tokens: torch.Tensor, answer_start: int, make_cache: Callable, batch: int = 64
                    ) -> torch.Tensor:
    """(N,) bool: whether greedy decoding after the context ``tokens[:, :answer_start]`` reproduces the value of
    ``VALUE_DIGITS`` digits that follows. The true digits are fed back, so the first wrong digit decides, as in
    greedy decoding."""
    a = answer_start
    correct = []
    for first in range(0, tokens.shape[0], batch):
        x = tokens[first:first + batch]
        cache = make_cache()
        logits = model(x[:, :a], cache=cache)[:, -1]
        ok = logits.argmax(-1) == x[:, a]
        for j in range(1, VALUE_DIGITS):
            position = torch.full((x.shape[0], 1), a + j - 1)
            logits = model(x[:, a + j - 1:a + j], positions=position, cache=cache)[:, -1]
            ok &= logits.argmax(-1) == x[:, a + j]
        correct.append(ok)
    return torch.cat(correct)


@torch.no_grad()
def decode_speed(model: Llama, caches: dict[str, Callable], context: int, tokens: int, repeats: int = 5,
                 batch: int = 1) -> pd.DataFrame:
    """Decode ``tokens`` tokens after a ``context``-token prefill through each cache of ``caches`` (name -> a
    function making one; ``"full"`` must be among them). Each cache is prefilled once; every round decodes from a
    fresh copy of each, in turn (:func:`mlsysrepro.core.timing.interleaved`), so the machine's drift hits all
    alike. Per cache: median tokens per second, the median of the per-round ratios to the full cache's time with
    its 95 % interval, and the held and allocated bytes at the end."""
    if "full" not in caches:
        raise ValueError(f"caches must include 'full' (the baseline), got {sorted(caches)}")
    torch.manual_seed(0)
    prompt = torch.randint(0, model.cfg.vocab, (batch, context + tokens))
    prefilled = {}
    for name, make_cache in caches.items():
        prefilled[name] = make_cache()
        model(prompt[:, :context], cache=prefilled[name])
    decoded = {}

    def fresh_copy(name):
        decoded[name] = copy.deepcopy(prefilled[name])
        return decoded[name]

    def decode(cache):
        for t in range(context, context + tokens):
            model(prompt[:, t:t + 1], torch.full((batch, 1), t), cache)

    timings = interleaved({name: decode for name in caches}, repeats, warmup=0, setup=fresh_copy)
    speedups = ratios(timings, "full")
    return pd.DataFrame([dict(cache=name, tokens_per_s=batch * tokens / timings[name].median,
                              speedup_vs_full=speedups[name].median, speedup_low=speedups[name].interval[0],
                              speedup_high=speedups[name].interval[1], held_bytes=cache.held_bytes(),
                              allocated_bytes=cache.allocated_bytes())
                         for name, cache in decoded.items()])
