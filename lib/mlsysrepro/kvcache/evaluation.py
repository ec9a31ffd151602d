"""Quality under a cache: perplexity of a continuation and exact-match retrieval, read through a compressed context.

Both follow NVIDIA kvpress' protocol (``kvpress/pipeline.py`` at 8bb29b9, ``_forward``: the press compresses the
context while it is prefilled, then the question and the answer are read with no further compression): a context
is prefilled at once (batched) through a fresh cache, which compresses it to its budgets; what follows is read in
one pass over the compressed context, each token attending to the kept entries and to the tokens before it, and
nothing is evicted while it is read. ``make_cache`` builds a fresh cache per batch of sequences, so every method
sees the same contexts. :func:`continuation_nlls` and :func:`answers_correct_each` read the same sequences
through several caches: budgeted caches of one policy share one prefill (:meth:`.cache.BudgetedCache.load`), which
gives the same numbers as a prefill through each, at a fraction of the time.

:func:`decode_speed` times decoding through several caches (tokens per second and the speed-up over the full
cache), interleaved round by round (:func:`mlsysrepro.core.timing.interleaved`); :func:`decode_speed_in_processes`
repeats it in fresh processes, so that its interval carries what varies from one process to the next.

Public entry points: :func:`continuation_nll`, :func:`continuation_nlls`, :func:`perplexity`, :func:`answers_correct`,
:func:`answers_correct_each`, :func:`decode_speed`, :func:`decode_speed_in_processes`.
"""

from __future__ import annotations

import copy
from typing import Callable

import pandas as pd
import torch
import torch.nn.functional as F

from ..core.claims import from_samples
from ..core.tasks import in_fresh_processes
from ..core.timing import interleaved, ratios
from ..transformer.llama import Llama
from ..transformer.retrieval import VALUE_DIGITS
from .cache import BudgetedCache


def _prefilled(model: Llama, x: torch.Tensor, caches: list) -> list[torch.Tensor]:
    """Prefill ``x`` (B, context) into every cache of ``caches``; the logits (B, 1, vocab) after the last token, one
    per cache. Budgeted caches of one policy share a single prefill through a cache that keeps the whole context,
    then each loads and compresses it (:meth:`.cache.BudgetedCache.load`); any other list is prefilled cache by
    cache."""
    first = caches[0]
    if len(caches) > 1 and all(isinstance(c, BudgetedCache) and c.policy == first.policy for c in caches):
        keeper = BudgetedCache(torch.full_like(first.budgets, x.shape[1]), first.policy)
        last = model(x, cache=keeper)[:, -1:]
        for cache in caches:
            cache.load(keeper)
        return [last] * len(caches)
    return [model(x, cache=cache)[:, -1:] for cache in caches]


def _read_after(model: Llama, x: torch.Tensor, context: int, end: int, caches: list) -> list[torch.Tensor]:
    """Per cache of ``caches``, the logits (B, end - context, vocab) predicting tokens ``context .. end - 1`` of
    ``x``: the first ``context`` tokens prefilled through the cache (which compresses them, :func:`_prefilled`), the
    rest read in one pass."""
    out = []
    for cache, last in zip(caches, _prefilled(model, x[:, :context], caches)):
        logits = [last]
        if end - 1 > context:
            positions = torch.arange(context, end - 1).expand(x.shape[0], -1)
            logits.append(model(x[:, context:end - 1], positions=positions, cache=cache))
        out.append(torch.cat(logits, 1))
    return out


@torch.no_grad()
def continuation_nlls(model: Llama, tokens: torch.Tensor, context: int, make_caches: list[Callable],
                      batch: int = 16) -> list[torch.Tensor]:
    """Per cache maker of ``make_caches``, (N, T - context): the negative log-likelihood of every token after the
    first ``context`` ones, read through the cache that compressed those ``context`` tokens."""
    n, t = tokens.shape
    if not 1 <= context < t:
        raise ValueError(f"context ({context}) must be in [1, {t - 1}] for sequences of {t} tokens")
    out = [torch.empty(n, t - context) for _ in make_caches]
    for first in range(0, n, batch):
        x = tokens[first:first + batch]
        for nll, logits in zip(out, _read_after(model, x, context, t, [make() for make in make_caches])):
            nll[first:first + batch] = F.cross_entropy(logits.transpose(1, 2), x[:, context:], reduction="none")
    return out


def continuation_nll(model: Llama, tokens: torch.Tensor, context: int, make_cache: Callable, batch: int = 16
                     ) -> torch.Tensor:
    """(N, T - context): :func:`continuation_nlls` through one cache."""
    return continuation_nlls(model, tokens, context, [make_cache], batch)[0]


def perplexity(model: Llama, tokens: torch.Tensor, context: int, make_cache: Callable, batch: int = 16) -> float:
    return float(continuation_nll(model, tokens, context, make_cache, batch).mean().exp())


@torch.no_grad()
def answers_correct_each(model: Llama, tokens: torch.Tensor, context: int, answer_start: int,
                         make_caches: list[Callable], batch: int = 64) -> list[torch.Tensor]:
    """Per cache maker of ``make_caches``, (N,) bool: whether the ``VALUE_DIGITS`` digits from ``answer_start`` are
    each the model's greedy choice, the first ``context`` tokens (the haystack and its records, not the query)
    compressed by the cache and the query read after them, as kvpress asks a question about a compressed context.
    The true digits are read, so the first wrong digit decides, as in greedy decoding."""
    if not 1 <= context <= answer_start <= tokens.shape[1] - VALUE_DIGITS:
        raise ValueError(f"need 1 <= context ({context}) <= answer_start ({answer_start}) <= "
                         f"{tokens.shape[1] - VALUE_DIGITS}")
    end = answer_start + VALUE_DIGITS
    correct = [[] for _ in make_caches]
    for first in range(0, tokens.shape[0], batch):
        x = tokens[first:first + batch]
        for found, logits in zip(correct, _read_after(model, x, context, end, [make() for make in make_caches])):
            found.append((logits[:, answer_start - context:].argmax(-1) == x[:, answer_start:end]).all(-1))
    return [torch.cat(found) for found in correct]


def answers_correct(model: Llama, tokens: torch.Tensor, context: int, answer_start: int, make_cache: Callable,
                    batch: int = 64) -> torch.Tensor:
    """(N,) bool: :func:`answers_correct_each` through one cache."""
    return answers_correct_each(model, tokens, context, answer_start, [make_cache], batch)[0]


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


def _decode_speed_task(arguments: tuple) -> pd.DataFrame:
    return decode_speed(*arguments)


def decode_speed_in_processes(model: Llama, caches: dict[str, Callable], context: int, tokens: int,
                              repeats: int = 5, processes: int = 3, batch: int = 1) -> pd.DataFrame:
    """:func:`decode_speed` in ``processes`` fresh processes, one after another
    (:func:`mlsysrepro.core.tasks.in_fresh_processes`). Within one process the rounds' ratios agree closely, yet
    the process itself moves them: on a 2-core VM the BaKlaVa cache at 50 % compression decoded at 0.93x the full
    cache's speed, all rounds' interval [0.77, 0.95], in a notebook that had just trained the models, and at 1.08x
    [1.00, 1.34] in one that read them from the cache. Per cache: the median over the processes of each one's
    median tokens per second; the mean of their median speed-ups with its Student-t 95 % interval over the
    processes; the bytes (the same in every process). ``caches`` must pickle (classes, ``functools.partial``; no
    lambdas). ``processes=1`` is :func:`decode_speed` in this process, with the rounds' interval."""
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    if processes == 1:
        return decode_speed(model, caches, context, tokens, repeats, batch)
    tables = in_fresh_processes(_decode_speed_task, [(model, caches, context, tokens, repeats, batch)] * processes,
                                "decode timing, one process each")
    stacked = pd.concat(tables, keys=range(processes), names=["process", "row"]).reset_index(level="row", drop=True)
    rows = []
    for name, per_process in stacked.groupby("cache", sort=False):
        speedup = from_samples(per_process.speedup_vs_full.tolist())
        rows.append(dict(cache=name, tokens_per_s=float(per_process.tokens_per_s.median()),
                         speedup_vs_full=speedup.value, speedup_low=speedup.interval[0],
                         speedup_high=speedup.interval[1], held_bytes=int(per_process.held_bytes.iloc[0]),
                         allocated_bytes=int(per_process.allocated_bytes.iloc[0]), processes=processes))
    return pd.DataFrame(rows)
