"""The experiments of the BaKlaVa notebook (Gulhan et al., arXiv 2502.13176): presets, the trained tiny LM, the
profiles, the budget search, the quality grid, the needle test and the memory / speed measurement.

1. :func:`prepare` trains the Llama-style LM on the corpora mixed with retrieval sequences (cached in
   ``data/cache/baklava`` by the training knobs alone) and builds the fixed evaluation data: text windows and
   retrieval sequences of the calibration and test splits (:class:`Lab`).
2. :func:`profiles` runs BaKlaVa's one-time profiling on several prompt sets; :func:`ablation` measures the ground
   truth (each cache shrunk to ``ablation_budget`` alone, Δ perplexity and Δ retrieval accuracy).
3. :func:`search_baklava` picks, per compression and policy, the budget family's parameters with the lowest
   calibration perplexity (the paper's cheap proxy), never looking at the test split.
4. :func:`quality_grid` evaluates every allocator × policy × compression on the test split;
   :func:`needle_grid` the needle heatmap; :func:`decode_speed` memory and tokens per second.

Every evaluation is one task run on a :class:`mlsysrepro.core.tasks.TaskRunner` (one thread each), so the numbers
do not depend on how many workers run them; each experiment's outputs are cached by :data:`EVALUATION_KNOBS`
(``use_cache=False`` recomputes them), so a rerun only re-measures decoding speed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

from ..core.cache import cached
from ..core.claims import (CONSISTENCY, Claim, Measurement, Precondition, across, at_least, at_most, proportion_gap,
                           proportion_ratio)
from ..core.tasks import TaskRunner
from ..kvcache import allocators
from ..kvcache.cache import FullCache
from ..kvcache.evaluation import answers_correct, decode_nll, decode_speed
from ..kvcache.policies import make_policy
from ..kvcache.profiling import HeadProfile, cache_importance, profile_heads
from ..transformer.llama import Llama, LlamaConfig
from ..transformer.retrieval import TASK_ALPHABET, RetrievalBatch, load_splits, retrieval_batch, text_windows
from ..transformer.tokenizer import BPETokenizer, CharTokenizer
from ..transformer.training import mixed_sampler, train

#: The knobs the trained model depends on (its cache key).
TRAINING_KNOBS = ("corpora", "tokenizer", "bpe_vocab", "layers", "dim", "heads", "kv_heads", "ffn", "length",
                  "batch", "steps", "lr", "retrieval_fraction", "max_records", "max_queries")

_COMMON = dict(corpora=["tinyshakespeare", "ptb"], tokenizer="char", bpe_vocab=512, retrieval_fraction=0.5,
               search_data="mixed",
               policies=["streamingllm", "h2o", "snapkv"], primary_policy="snapkv", floor=4, duo_stream=16,
               pyramid_beta=20.0, adakv_alpha=0.2, layer_exponents=[0.0, 1.0], decode_workers=2)

PRESETS = {
    "smoke": dict(_COMMON, layers=2, dim=64, heads=4, kv_heads=2, ffn=176, length=96, batch=8, steps=150, lr=3e-3,
                  max_records=4, max_queries=4, policies=["streamingllm", "snapkv"], compressions=[0.5, 0.85],
                  gammas=[0.0, 1.0, 2.0], layer_exponents=[0.0], test_windows=4, calib_windows=2, retrieval_n=16,
                  retrieval_records=2, profile_prompts=4, ablation_budget=4, needle_lengths=[64, 96],
                  needle_depths=[0.0, 0.5, 1.0], needle_n=8, needle_compressions=[0.5, 0.85], speed_context=256,
                  speed_tokens=16),
    "default": dict(_COMMON, layers=4, dim=128, heads=8, kv_heads=4, ffn=352, length=128, batch=32, steps=800,
                    lr=3e-3, max_records=6, max_queries=6, compressions=[0.1, 0.3, 0.5, 0.7, 0.85, 0.9],
                    gammas=[0.0, 0.5, 1.0, 2.0, 4.0], test_windows=32, calib_windows=16, retrieval_n=128,
                    retrieval_records=4, profile_prompts=16, ablation_budget=4, needle_lengths=[32, 64, 96, 128],
                    needle_depths=[0.0, 0.25, 0.5, 0.75, 1.0], needle_n=64, needle_compressions=[0.7, 0.85],
                    speed_context=4096, speed_tokens=64),
    "paper": dict(_COMMON, layers=6, dim=256, heads=8, kv_heads=4, ffn=704, length=1024, batch=16, steps=20_000,
                  lr=1e-3, max_records=16, max_queries=16, compressions=[0.1, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95],
                  gammas=[0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0], test_windows=64, calib_windows=16, retrieval_n=512,
                  retrieval_records=8, profile_prompts=64, ablation_budget=8, needle_lengths=[128, 256, 512, 1024],
                  needle_depths=[0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0], needle_n=64,
                  needle_compressions=[0.7, 0.85, 0.9], speed_context=4096, speed_tokens=128),
}

#: Each knob's inclusive bounds (None: unbounded), checked by ``resolve``.
RANGES = {
    "bpe_vocab": (2, None), "retrieval_fraction": (0, 1), "floor": (0, None), "duo_stream": (0, None),
    "pyramid_beta": (0, None), "adakv_alpha": (0, 1), "decode_workers": (0, None), "layers": (1, None),
    "dim": (1, None), "heads": (1, None), "kv_heads": (1, None), "ffn": (1, None), "length": (2, None), "batch": (1, None),
    "steps": (1, None), "lr": (0, None), "max_records": (1, None), "max_queries": (1, None), "compressions": (0, 0.999),
    "gammas": (0, None), "test_windows": (1, None), "calib_windows": (1, None), "retrieval_n": (1, None),
    "retrieval_records": (1, None), "profile_prompts": (1, None), "ablation_budget": (1, None),
    "needle_lengths": (1, None), "needle_depths": (0, 1), "needle_n": (1, None), "needle_compressions": (0, 0.999),
    "speed_context": (1, None), "speed_tokens": (1, None),
}


#: "Baseline performance": within 5 % of the full cache's perplexity, or 5 points of its retrieval accuracy.
PPL_TOLERANCE = 0.05
ACCURACY_TOLERANCE = 0.05

#: The power checks: an allocator can stand out only where compression costs quality. Uniform budgets must lose at
#: least twice the claims' tolerance, in perplexity at the highest compression measured, in retrieval at 70 %.
COSTS_PERPLEXITY = Precondition(
    "compression_costs", "compression costs measurable perplexity: uniform budgets at the highest compression of "
    "`compressions` raise test perplexity by at least twice the 5 % tolerance (uniform / full - 1)",
    at_least(2 * PPL_TOLERANCE))
COSTS_RETRIEVAL = Precondition(
    "compression_costs_retrieval", "compression costs retrieval: uniform budgets at 70 % lose at least twice the "
    "5-point tolerance of the full cache's retrieval accuracy (full - uniform, 95 % interval over the queries)",
    at_least(2 * ACCURACY_TOLERANCE))

CLAIMS = (
    Claim("C1", "BaKlaVa compresses the KV cache by up to 70 % at baseline perplexity, where uniform budgets do not",
          where="Abstract", paper_value=0.7, unit="highest compression whose test perplexity is within 5 % of the "
          "full cache's", rule=at_least(0.7), over="`compressions` under `primary_policy`; uniform budgets must "
          "fail the same rule", near=0.25, preconditions=(COSTS_PERPLEXITY,)),
    Claim("C2", "At 70 % compression BaKlaVa keeps baseline retrieval accuracy, where uniform budgets do not",
          where="Abstract", paper_value=0.0, unit="full cache minus BaKlaVa retrieval accuracy at 70 % (95 % "
          "interval over the queries)", rule=at_most(ACCURACY_TOLERANCE),
          over="`retrieval_n` queries under `primary_policy`; uniform budgets must fail the same rule",
          preconditions=(COSTS_RETRIEVAL,)),
    Claim("C3", "At high compression BaKlaVa beats uniform budgets on retrieval by up to an order of magnitude",
          where="Abstract", paper_value=10.0, unit="BaKlaVa / uniform retrieval accuracy (95 % Katz interval), the "
          "compression >= 85 % where it is largest", rule=at_least(2.0),
          over="the compressions of `compressions` at 85 % or more, `primary_policy`", near=0.5),
    Claim("C4", "The heads' importance ranking is consistent across prompts", where="Sec. 3 (profiling)",
          paper_value="consistent", unit="Spearman rho of cache importance, the smallest over prompt sets",
          rule=at_least(0.8), over="a disjoint text prompt set, the other corpus and retrieval prompts"),
    Claim("C5", "BaKlaVa is at least as good as PyramidKV and AdaKV at matched compression under the same policy",
          where="Sec. 5 (comparison with non-uniform allocators)", paper_value="at least as good",
          unit="BaKlaVa's margin over the better rival: rival / BaKlaVa perplexity - 1, and retrieval accuracy "
          "difference", rule=at_least(0.0), over="every (policy, compression) cell, perplexity and retrieval",
          min_share=2 / 3, preconditions=(COSTS_PERPLEXITY, COSTS_RETRIEVAL)),
    Claim("K1", "Decoding with the compressed cache is no slower than with the full cache", where="this "
          "reproduction (the paper's custom KV-cache object)", paper_value=1.0, unit="decode speed-up over the full "
          "cache, the slowest BaKlaVa budget (95 % interval of the per-round ratios)", rule=at_least(1.0),
          over="BaKlaVa budgets at `speed_context` tokens", kind=CONSISTENCY, timing=True, reruns=3),
)

#: The knobs an evaluation's result depends on: every knob but the decode-speed measurement's and the worker count.
EVALUATION_KNOBS = tuple(k for k in PRESETS["default"] if k not in ("speed_context", "speed_tokens", "decode_workers"))


@dataclass
class Lab:
    """The trained model and the fixed evaluation data of one notebook run."""

    model: Llama
    tokenizer: CharTokenizer | BPETokenizer
    ids: dict[str, dict[str, torch.Tensor]]  # corpus -> split -> token ids
    losses: list[float]
    train_seconds: float
    test_windows: torch.Tensor  # (N, length) windows of the main corpus's test split
    calib_windows: torch.Tensor
    test_retrieval: RetrievalBatch  # ``retrieval_records`` records, one asked for
    calib_retrieval: RetrievalBatch
    runner: TaskRunner  # the evaluation workers, kept for the whole run

    @property
    def calib_mixed(self) -> torch.Tensor:
        """Calibration text windows and as many calibration retrieval sequences: the search's mixed data."""
        return torch.cat([self.calib_windows, self.calib_retrieval.tokens[:len(self.calib_windows)]])

    @property
    def cfg(self) -> LlamaConfig:
        return self.model.cfg

    @property
    def shape(self) -> tuple[int, int]:
        return self.cfg.layers, self.cfg.kv_heads


def make_tokenizer(settings, texts: dict[str, dict[str, str]]):
    alphabet = "".join(split for splits in texts.values() for split in splits.values()) + TASK_ALPHABET
    if settings.tokenizer == "char":
        return CharTokenizer(alphabet)
    if settings.tokenizer == "bpe":  # merges learnt on the first 200k characters of each training split
        sample = "".join(splits["train"][:200_000] for splits in texts.values())
        return BPETokenizer.train(sample, settings.bpe_vocab, alphabet=alphabet)
    raise ValueError(f"tokenizer must be 'char' or 'bpe', got {settings.tokenizer!r}")


def prepare(settings) -> Lab:
    texts = {corpus: load_splits(corpus) for corpus in settings.corpora}
    tokenizer = make_tokenizer(settings, texts)
    ids = {c: {s: tokenizer.encode(t) for s, t in splits.items()} for c, splits in texts.items()}
    cfg = LlamaConfig(vocab=tokenizer.vocab_size, dim=settings.dim, layers=settings.layers, heads=settings.heads,
                      kv_heads=settings.kv_heads, ffn=settings.ffn)

    def compute():
        torch.manual_seed(settings.seed)
        model = Llama(cfg)
        sample = mixed_sampler([ids[c]["train"] for c in settings.corpora], tokenizer, settings.batch,
                               settings.length, settings.retrieval_fraction, settings.max_records,
                               settings.max_queries)
        start = time.perf_counter()
        losses = train(model, sample, settings.steps, settings.lr, torch.Generator().manual_seed(settings.seed))
        return {"state": model.state_dict(), "losses": losses, "seconds": time.perf_counter() - start}

    trained = cached("lm", settings, compute, knobs=TRAINING_KNOBS)
    model = Llama(cfg)
    model.load_state_dict(trained["state"])
    model.eval()
    main = ids[settings.corpora[0]]
    g = torch.Generator().manual_seed(settings.seed + 1)
    length, records = settings.length, settings.retrieval_records
    return Lab(model, tokenizer, ids, trained["losses"], trained["seconds"],
               text_windows(main["test"], length, settings.test_windows),
               text_windows(main["calib"], length, settings.calib_windows),
               retrieval_batch(main["test"], tokenizer, settings.retrieval_n, length, records, generator=g),
               retrieval_batch(main["calib"], tokenizer, settings.retrieval_n // 2, length, records, generator=g),
               TaskRunner(settings.decode_workers))


# --------------------------------------------------------------------------------------------- profiling

def profiles(lab: Lab, settings) -> dict[str, HeadProfile]:
    """BaKlaVa's profile on four prompt sets: two disjoint sets of calibration text of the main corpus (``A``,
    ``B``), the second corpus's calibration text, and retrieval prompts. ``A`` is the one the budgets use."""
    n, length = settings.profile_prompts, settings.length
    main, other = settings.corpora[0], settings.corpora[-1]
    calib = text_windows(lab.ids[main]["calib"], length, 2 * n)
    sets = {"A": calib[0::2], "B": calib[1::2], other: text_windows(lab.ids[other]["calib"], length, n),
            "retrieval": lab.calib_retrieval.tokens[:n]}
    return {name: profile_heads(lab.model, prompts) for name, prompts in sets.items()}


def consistency(profiles_: dict[str, HeadProfile], kv_heads: int, layer_exponent: float = 1.0) -> pd.DataFrame:
    """Spearman rank correlation of the per-cache importance between every pair of prompt sets."""
    imp = {k: cache_importance(p, kv_heads, layer_exponent).flatten().numpy() for k, p in profiles_.items()}
    names = list(imp)
    return pd.DataFrame([[spearmanr(imp[a], imp[b]).statistic for b in names] for a in names], index=names,
                        columns=names)


# --------------------------------------------------------------------------------------------- evaluation tasks

@dataclass(frozen=True)
class EvalTask:
    """One evaluation: the model, the data, and a cache (``allocation`` None: the full cache)."""

    cfg: LlamaConfig
    state: dict
    kind: str  # "ppl" (tokens are windows, prefill half) or "retrieval"
    tokens: torch.Tensor
    answer_start: int = 0
    allocation: allocators.Allocation | None = None
    policy: str = "snapkv"


def _run(task: EvalTask):
    model = Llama(task.cfg)
    model.load_state_dict(task.state)
    model.eval()
    policy = make_policy(task.policy)
    make_cache = FullCache if task.allocation is None else (lambda: task.allocation.cache(policy))
    if task.kind == "ppl":
        return float(decode_nll(model, task.tokens, task.tokens.shape[1] // 2, make_cache).mean().exp())
    return answers_correct(model, task.tokens, task.answer_start, make_cache)


def _evaluations(name: str, lab: Lab, settings, specs: list[dict], desc: str) -> list:
    """Run ``specs`` (``kind``, ``split``, ``allocation``, ``policy``) on the lab's runner, cached as ``name`` by
    :data:`EVALUATION_KNOBS`; a perplexity or the per-sequence correctness per spec."""
    state = lab.model.state_dict()
    tasks = []
    for s in specs:
        kind, split = s["kind"], s.get("split", "test")
        if kind == "ppl":
            tokens, start = {"test": lab.test_windows, "calib": lab.calib_windows,
                             "calib_mixed": lab.calib_mixed}[split], 0
        else:
            task = s.get("task") or (lab.test_retrieval if split == "test" else lab.calib_retrieval)
            tokens, start = task.tokens, task.answer_start
        tasks.append(EvalTask(lab.cfg, state, kind, tokens, start, s.get("allocation"), s.get("policy", "snapkv")))
    return lab.runner.cached_map(name, settings, _run, tasks, knobs=EVALUATION_KNOBS, desc=desc)


def allocate(name: str, lab: Lab, settings, compression: float, full: int, importance=None, gamma: float = 0.0,
             retrieval=None, policy: str = "snapkv") -> allocators.Allocation:
    """The ``name`` allocator's budgets at ``compression`` for sequences of ``full`` tokens, under ``policy`` (whose
    observation window PyramidKV keeps in every layer)."""
    shape = lab.shape
    caches = shape[0] * shape[1]
    total = allocators.total_budget(compression, caches, full)
    floor = min(settings.floor, total // caches)
    if name == "uniform":
        return allocators.uniform(shape, total, floor, full)
    if name == "pyramid":
        window = getattr(make_policy(policy), "window", 0)
        return allocators.pyramid(shape, total, floor, full, settings.pyramid_beta, window)
    if name == "adakv":
        return allocators.adakv(shape, total, floor, full, settings.adakv_alpha)
    if name == "duo":
        return allocators.duo(shape, total, min(settings.duo_stream, total // caches), full, retrieval)
    if name == "baklava":
        return allocators.baklava(shape, total, floor, full, importance, gamma)
    raise ValueError(f"allocator must be one of {allocators.ALLOCATORS}, got {name!r}")


def pairs(settings):
    """(policy, allocator) pairs that are defined: AdaKV pools scores across heads, and StreamingLLM has none."""
    return [(p, a) for p in settings.policies for a in allocators.ALLOCATORS
            if not (a == "adakv" and p == "streamingllm")]


# --------------------------------------------------------------------------------------------- experiments

def ablation(lab: Lab, settings, importance: torch.Tensor) -> pd.DataFrame:
    """Ground truth: each cache alone shrunk to ``ablation_budget`` (StreamingLLM: sinks and recent), the others
    full; Δ calibration perplexity and Δ calibration retrieval accuracy against the full cache."""
    full = settings.length
    layers, heads = lab.shape
    specs = []
    for kind in ("ppl", "retrieval"):
        specs.append(dict(kind=kind, split="calib"))
        for layer in range(layers):
            for head in range(heads):
                budgets = torch.full(lab.shape, full)
                budgets[layer, head] = settings.ablation_budget
                specs.append(dict(kind=kind, split="calib", allocation=allocators.Allocation(budgets),
                                  policy="streamingllm"))
    out = _evaluations("ablation", lab, settings, specs, "ablating each cache")
    n = layers * heads
    ppl, acc = out[1:n + 1], [float(c.float().mean()) for c in out[n + 2:]]
    base_ppl, base_acc = out[0], float(out[n + 1].float().mean())
    return pd.DataFrame({"layer": np.repeat(np.arange(layers), heads), "kv_head": np.tile(np.arange(heads), layers),
                         "importance": importance.flatten().numpy(),
                         "delta_ppl": np.array(ppl) - base_ppl, "delta_retrieval": base_acc - np.array(acc)})


def search_baklava(lab: Lab, settings, profile: HeadProfile) -> pd.DataFrame:
    """Calibration perplexity of every (gamma, layer exponent) of the budget family, per compression and policy,
    on the calibration text (``search_data="text"``) or on text and retrieval sequences (``"mixed"``)."""
    if settings.search_data not in ("text", "mixed"):
        raise ValueError(f"search_data must be 'text' or 'mixed', got {settings.search_data!r}")
    split = "calib" if settings.search_data == "text" else "calib_mixed"
    grid = [(c, p, g, e) for c in settings.compressions for p in settings.policies for g in settings.gammas
            for e in settings.layer_exponents]
    specs = [dict(kind="ppl", split=split, policy=p,
                  allocation=allocate("baklava", lab, settings, c, settings.length,
                                      cache_importance(profile, lab.cfg.kv_heads, e), g))
             for c, p, g, e in grid]
    ppl = _evaluations("search", lab, settings, specs, "searching BaKlaVa's budgets")
    return pd.DataFrame(grid, columns=["compression", "policy", "gamma", "layer_exponent"]).assign(calib_ppl=ppl)


def chosen(search: pd.DataFrame) -> pd.DataFrame:
    """The searched parameters: the lowest calibration perplexity per (compression, policy), ties to the first
    grid point (gamma 0, uniform, comes first)."""
    best = search.loc[search.groupby(["compression", "policy"], sort=False)["calib_ppl"].idxmin()]
    return best.set_index(["compression", "policy"])


def allocations(lab: Lab, settings, profile: HeadProfile, best: pd.DataFrame, retrieval, compression: float,
                policy: str, full: int, names: list[str] | None = None) -> dict[str, allocators.Allocation]:
    """Every allocator's budgets at one compression, BaKlaVa with the parameters searched for it (or for the
    nearest searched compression)."""
    names = names or [a for p, a in pairs(settings) if p == policy]
    searched = best.index.get_level_values("compression")
    nearest = float(searched[np.abs(searched - compression).argmin()])
    g, e = best.loc[(nearest, policy), ["gamma", "layer_exponent"]]
    importance = cache_importance(profile, lab.cfg.kv_heads, float(e))
    return {a: allocate(a, lab, settings, compression, full, importance, float(g), retrieval, policy) for a in names}


def quality_grid(lab: Lab, settings, profile, best, retrieval) -> pd.DataFrame:
    """Test perplexity and retrieval accuracy of every allocator × policy × compression, and the full cache."""
    rows, specs = [], []
    for c in settings.compressions:
        for p in settings.policies:
            for a, allocation in allocations(lab, settings, profile, best, retrieval, c, p, settings.length).items():
                rows.append((c, p, a))
                specs += [dict(kind="ppl", allocation=allocation, policy=p),
                          dict(kind="retrieval", allocation=allocation, policy=p)]
    out = _evaluations("quality_grid", lab, settings, [dict(kind="ppl"), dict(kind="retrieval")] + specs, "quality grid")
    frame = pd.DataFrame(rows, columns=["compression", "policy", "allocator"])
    frame["ppl"] = out[2::2]
    frame["retrieval"] = [float(c.float().mean()) for c in out[3::2]]
    full = pd.DataFrame([dict(compression=0.0, policy="full", allocator="full", ppl=out[0],
                              retrieval=float(out[1].float().mean()))])
    return pd.concat([full, frame], ignore_index=True)


def needle_grid(lab: Lab, settings, profile, best, retrieval) -> pd.DataFrame:
    """Retrieval accuracy of one needle at each depth and context length, uniform vs BaKlaVa vs the full cache,
    under the primary policy; budgets scale with each context's length."""
    test = lab.ids[settings.corpora[0]]["test"]
    rows, specs = [], []
    for length in settings.needle_lengths:
        for depth in settings.needle_depths:
            task = retrieval_batch(test, lab.tokenizer, settings.needle_n, length, depth=depth,
                                   generator=torch.Generator().manual_seed(settings.seed + length))
            rows.append((length, depth, "full", 0.0))
            specs.append(dict(kind="retrieval", task=task))
            for c in settings.needle_compressions:
                allocs = allocations(lab, settings, profile, best, retrieval, c, settings.primary_policy, length,
                                     ["uniform", "baklava"])
                for a in ("uniform", "baklava"):
                    rows.append((length, depth, a, c))
                    specs.append(dict(kind="retrieval", task=task, allocation=allocs[a],
                                      policy=settings.primary_policy))
    out = _evaluations("needle_grid", lab, settings, specs, "needle grid")
    return pd.DataFrame(rows, columns=["length", "depth", "allocator", "compression"]).assign(
        accuracy=[float(c.float().mean()) for c in out])


def speed_table(lab: Lab, settings, profile, best, compressions=(0.5, 0.7, 0.9), repeats: int = 5) -> pd.DataFrame:
    """Full vs uniform vs BaKlaVa caches (primary policy) at ``speed_context``: memory and decode speed over
    ``repeats`` timing rounds."""
    full_len = settings.speed_context + settings.speed_tokens
    policy = make_policy(settings.primary_policy)
    caches = {"full": FullCache}
    for c in compressions:
        allocs = allocations(lab, settings, profile, best, None, c, settings.primary_policy, full_len,
                             ["uniform", "baklava"])
        for a in ("uniform", "baklava"):
            caches[f"{a} {c:.0%}"] = (lambda alloc: lambda: alloc.cache(policy))(allocs[a])
    return decode_speed(lab.model, caches, settings.speed_context, settings.speed_tokens, repeats=repeats)


@torch.no_grad()
def held_after_prefill(lab: Lab, allocation: allocators.Allocation, policy: str) -> torch.Tensor:
    """(layers, kv_heads): entries each cache holds once the calibration windows are prefilled and compressed,
    mean over the windows (for AdaKV, whose per-head budgets are decided at run time)."""
    cache = allocation.cache(make_policy(policy))
    lab.model(lab.calib_windows, cache=cache)
    return cache.held().double().mean(1)


# ---- the claims' measurements -------------------------------------------------------------------------

def highest_compression(grid: pd.DataFrame, full_ppl: float, allocator: str) -> float:
    """The highest compression of ``grid`` (one policy's rows of :func:`quality_grid`) at which ``allocator``'s
    test perplexity stays within :data:`PPL_TOLERANCE` of the full cache's, and at every lower compression
    (0 when even the lowest does not)."""
    rows = grid[grid.allocator == allocator].sort_values("compression")
    within = (rows.ppl <= full_ppl * (1 + PPL_TOLERANCE)).to_numpy()
    kept = rows.compression.to_numpy()[np.cumprod(within).astype(bool)]
    return float(kept.max()) if kept.size else 0.0


def perplexity_cost(grid: pd.DataFrame, full_ppl: float, allocator: str = "uniform") -> Measurement:
    """Power check ``compression_costs``: ``allocator``'s test perplexity at the highest compression of ``grid`` (one
    policy's rows of :func:`quality_grid`) over the full cache's, minus 1."""
    top = grid[grid.allocator == allocator].sort_values("compression").iloc[-1]
    return Measurement(float(top.ppl) / full_ppl - 1,
                       note=f"{allocator} {top.ppl:.3g} at {top.compression:.0%} against the full cache's "
                            f"{full_ppl:.3g}")


def retrieval_cost(grid: pd.DataFrame, full_accuracy: float, compression: float, queries: int,
                   allocator: str = "uniform") -> Measurement:
    """Power check ``compression_costs_retrieval``: the full cache's retrieval accuracy minus ``allocator``'s at
    ``compression``, with its 95 % interval over ``queries`` items."""
    at = float(grid[(grid.compression == compression) & (grid.allocator == allocator)].retrieval.iloc[0])
    return proportion_gap(full_accuracy, at, queries,
                          note=f"full {full_accuracy:.3f}, {allocator} {at:.3f} at {compression:.0%}")


def compression_at_baseline(grid: pd.DataFrame, full_ppl: float) -> Measurement:
    """Claim C1: BaKlaVa's :func:`highest_compression`, with uniform budgets' as the baseline."""
    uniform = highest_compression(grid, full_ppl, "uniform")
    return Measurement(highest_compression(grid, full_ppl, "baklava"), baseline=Measurement(uniform),
                       note=", ".join(f"{a} {highest_compression(grid, full_ppl, a):.0%}"
                                      for a in sorted(grid.allocator.unique())))


def retrieval_at(grid: pd.DataFrame, full_accuracy: float, compression: float, queries: int) -> Measurement:
    """Claim C2: the full cache's retrieval accuracy minus BaKlaVa's at ``compression`` over ``queries`` items,
    with uniform budgets' gap as the baseline."""
    at = grid[grid.compression == compression].set_index("allocator").retrieval
    uniform = proportion_gap(full_accuracy, float(at["uniform"]), queries)
    return replace(proportion_gap(full_accuracy, float(at["baklava"]), queries), baseline=uniform,
                   note=f"full {full_accuracy:.3f}; " + ", ".join(f"{a} {r:.3f}" for a, r in at.items()))


def high_compression_gain(grid: pd.DataFrame, queries: int, lowest: float = 0.85) -> Measurement:
    """Claim C3: BaKlaVa's retrieval accuracy over uniform budgets' at the compression >= ``lowest`` where the
    ratio is largest, with its Katz interval (a few hits more out of ``queries`` is no gain)."""
    high = grid[grid.compression >= lowest].pivot(index="compression", columns="allocator", values="retrieval")
    gains = {c: proportion_ratio(float(r.baklava), float(r.uniform), queries) for c, r in high.iterrows()}
    best = max(gains, key=lambda c: gains[c].value)
    return Measurement(gains[best].value, gains[best].interval,
                       note="; ".join(f"{c:.0%}: {r.baklava:.3f} vs uniform {r.uniform:.3f}"
                                      for c, r in high.iterrows()) + f" ({queries} queries)")


def ranking_consistency(agreement: pd.DataFrame, reference: str = "A") -> Measurement:
    """Claim C4: the smallest Spearman rho between the ``reference`` prompt set's importance ranking and every
    other prompt set's (a :func:`consistency` frame)."""
    others = agreement.loc[reference].drop(reference)
    return Measurement(float(others.min()), note=", ".join(f"vs {k} {v:.2f}" for k, v in others.items()))


def margin_over_rivals(grid: pd.DataFrame, rivals=("pyramid", "adakv")) -> Measurement:
    """Claim C5: per (policy, compression) cell, BaKlaVa's margin over the better of ``rivals`` (strict: no
    tolerance): ``rival / BaKlaVa - 1`` in perplexity and the difference in retrieval accuracy."""
    ppl = grid.pivot_table(index=["policy", "compression"], columns="allocator", values="ppl")
    retrieval = grid.pivot_table(index=["policy", "compression"], columns="allocator", values="retrieval")
    present = [r for r in rivals if r in ppl]
    margins = {}
    for (policy, compression), row in ppl.iterrows():
        best_rival = row[present].min(skipna=True)
        if np.isnan(best_rival):
            continue
        margins[f"{policy} {compression:.0%} ppl"] = best_rival / row["baklava"] - 1
        margins[f"{policy} {compression:.0%} retrieval"] = (retrieval.loc[(policy, compression), "baklava"]
                                                            - retrieval.loc[(policy, compression), present].max())
    lost = [k for k, v in margins.items() if v < 0]
    return across(margins, note="behind the better rival in: " + (", ".join(lost) or "none"))


def slowest_decode(speed: pd.DataFrame, prefix: str = "baklava") -> Measurement:
    """Check K1: the slowest ``prefix`` cache's decode speed-up over the full cache (a :func:`speed_table`)."""
    rows = speed[speed.cache.str.startswith(prefix)]
    slowest = rows.loc[rows.speedup_vs_full.idxmin()]
    return Measurement(float(slowest.speedup_vs_full), (float(slowest.speedup_low), float(slowest.speedup_high)),
                       note=f"{slowest.cache}; every cache: " + ", ".join(
                           f"{r.cache} {r.speedup_vs_full:.2f}x" for r in speed.itertuples()))
