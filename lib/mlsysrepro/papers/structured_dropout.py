"""The experiments of the structured-dropout notebook (Sarma et al., NeurIPS 2021): presets and one function per figure.

- :func:`mask_cases` — Fig. 1: the four mask cases, drawn from real masks;
- :func:`accuracy_runs` — the accuracy table and the convergence curves: PTB perplexity and CoNLL-2003
  span F1 per dropout mode and seed, trained on a pool of worker processes (cached under ``data/cache``);
- :func:`speed_table` — seconds per training step and per epoch of the full-size models, per dropout
  rate, for standard dropout, case III under each exact kernel (:data:`mlsysrepro.sparsity.compaction.KERNELS`), the
  CPU variants with a longer mask period, case IV, and ``torch.nn.LSTM``;
- :func:`stage_breakdown` — forward, backward-data and backward-weight of the LM's GEMMs that read a
  dropped state, in every form (dense, per-draw, batched), beside the ideal speed-up ``1 / (1 - p)``;
- :func:`translation_runs` — IWSLT'14 De-En and IWSLT'15 En-Vi BLEU per dropout mode, when ``translation`` is
  on and the training sets are registered (``scale=paper``);
- :data:`CLAIMS`, declared before the run, and their measurements: :func:`gpu_claim` (C1-C3, judged on the GPU
  check's measurement, :func:`gpu_speed`), :func:`rate_trend` (C4), :func:`parity_claim` (C5, C6, with their
  power check :func:`learned` against :func:`floor_baseline`) and :func:`cpu_finding` (C7, this reproduction's
  CPU finding).

Two sizes on purpose: the accuracy rows train reduced models on a subset of the data (two CPU cores
cannot train PTB "medium" for 39 epochs); the speed rows time the paper's full-size models, one
training step at a time, and an epoch is that step time multiplied by the epoch's steps.

At ``default`` the LM makes 12 passes over the first quarter of PTB's training text rather than 3 over all of it:
the same arithmetic (3,984 SGD steps a run), but on text the model sees twelve times, so the model without dropout
overfits and ends worse than the dropout models, and the parity claim C5 has a control that can fail it (the
notebook's ``control_overfits`` precondition and control row say by how much). Over all of PTB in 3 epochs the
control overfitted too little for dropout to pay (it ended the best of the three models), and C5 was not testable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
from torch.nn import functional as F

from ..core import gpu_results
from ..core.claims import (FINDING, Claim, Measurement, Precondition, above, across, at_least, at_most, below,
                           from_samples, not_testable)
from ..core.data import DatasetError, fetch, load_registry
from ..core.settings import Above
from ..core.tasks import TaskRunner
from ..core.timing import interleaved, ratios
from ..recurrent.models import Tagger, Translator, WordLM
from ..recurrent.reference import TorchTagger, TorchWordLM
from ..recurrent.training import (OPTIMIZERS, SCHEDULES, TAGGER_SCHEDULES, perplexity, tag, train_lm, train_tagger,
                                  train_translator, translate)
from ..text.baselines import KneserNey, most_frequent_tag_f1, unigram_perplexity
from ..sparsity.compaction import KERNELS
from ..sparsity.gemm_timing import time_stages, tuned_shapes
from ..sparsity.masks import dropout_mask, kept_count
from ..text.bleu import corpus_bleu
from ..text.corpora import (IWSLT, UNK, Tagged, batchify, build_vocab, load_conll2003, load_parallel, load_ptb,
                            pad_batch)
from ..text.span_f1 import span_f1

#: The dropout modes of the accuracy table (the paper's case III beside I, II and IV).
ACCURACY_MODES = ("standard", "locked", "structured", "fixed")
#: The modes trained: the control without dropout (p = 0) shows whether dropout matters at this training length.
TRAINED_MODES = ("none",) + ACCURACY_MODES
LABELS = {"none": "no dropout (control)", "standard": "standard (I)", "locked": "locked (II)",
          "structured": "structured (III)", "fixed": "fixed (IV)"}
#: One colour per mode in every figure (seaborn's colour-blind palette).
PALETTE = {"no dropout (control)": "#949494", "standard (I)": "#0173b2", "locked (II)": "#de8f05",
           "structured (III)": "#029e73",
           "fixed (IV)": "#cc78bc", "torch.nn.LSTM": "#555555"}

PRESETS = {
    "smoke": dict(
        seeds=2, modes=["none", "standard", "structured"], p=0.5, ptb_p=0.3, ptb_hidden=16, ptb_layers=2, ptb_batch=20,
        bptt=35, ptb_fraction=0.005, ptb_epochs=1, ptb_cutoffs=[2046, 6000], ptb_optimizer="sgd", ptb_lr=1.0,
        ptb_clip=5.0, ptb_schedule="linear", ptb_decay_after=6, ptb_valid_tokens=2_000, ptb_test_tokens=2_000,
        conll_seeds=2, conll_fraction=0.01,
        conll_embedding=16, conll_hidden=16, conll_batch=32, conll_epochs=1, conll_lr=0.005, conll_eval_sentences=200,
        conll_pool=20, conll_schedule="linear", conll_cased=True, conll_min_count=2,
        speed_ps=[0.5, 0.65], speed_batches=[4, 8], speed_hidden=32, speed_tagger_hidden=16, speed_periods=[4],
        speed_repeats=1, translation=False, mt_pairs=["de-en", "en-vi"],
        mt_hidden=32, mt_epochs=1, mt_batch=64, device="cpu",
    ),
    "default": dict(
        seeds=5, modes=["none", "standard", "structured"], p=0.5, ptb_p=0.5, ptb_hidden=200, ptb_layers=2, ptb_batch=20,
        bptt=35, ptb_fraction=0.25, ptb_epochs=12, ptb_cutoffs=[2046, 6000], ptb_optimizer="sgd", ptb_lr=1.0,
        ptb_clip=5.0, ptb_schedule="linear", ptb_decay_after=6, ptb_valid_tokens=0, ptb_test_tokens=0,
        conll_seeds=32, conll_fraction=0.2, conll_embedding=100, conll_hidden=100, conll_batch=32, conll_epochs=15,
        conll_lr=0.01,
        conll_eval_sentences=0, conll_pool=20, conll_schedule="linear", conll_cased=True,
        conll_min_count=2,
        speed_ps=[0.2, 0.35, 0.5, 0.65], speed_batches=[20, 64], speed_hidden=650, speed_tagger_hidden=100,
        speed_periods=[5], speed_repeats=7, translation=False,
        mt_pairs=["de-en", "en-vi"], mt_hidden=256, mt_epochs=12, mt_batch=64, device="cpu",
    ),
    "paper": dict(
        seeds=5, modes=["none", "standard", "locked", "structured", "fixed"], p=0.5, ptb_p=0.5, ptb_hidden=650,
        ptb_layers=2, ptb_batch=20, bptt=35, ptb_fraction=1.0, ptb_epochs=39, ptb_cutoffs=[], ptb_optimizer="sgd",
        ptb_lr=1.0, ptb_clip=5.0, ptb_schedule="step", ptb_decay_after=6, ptb_valid_tokens=0, ptb_test_tokens=0,
        conll_seeds=5, conll_fraction=1.0, conll_embedding=100, conll_hidden=100, conll_batch=32, conll_epochs=30,
        conll_lr=0.002, conll_eval_sentences=0, conll_pool=1, conll_schedule="constant", conll_cased=True,
        conll_min_count=2,
        speed_ps=[0.2, 0.35, 0.5, 0.65], speed_batches=[20, 64], speed_hidden=650, speed_tagger_hidden=100,
        speed_periods=[5], speed_repeats=10, translation=True,
        mt_pairs=["de-en", "en-vi"], mt_hidden=512, mt_epochs=12, mt_batch=64, device="cuda",
    ),
}

#: Each knob's inclusive bounds (None: unbounded), checked by ``resolve``.
RANGES = {
    "seeds": (1, None), "p": (0, 0.99), "ptb_p": (0, 0.99), "ptb_hidden": (1, None), "ptb_layers": (1, None),
    "ptb_batch": (1, None),
    "bptt": (1, None), "ptb_fraction": (0.001, 1), "ptb_epochs": (1, None), "ptb_cutoffs": (1, 9_999),
    "ptb_lr": (Above(0), None),
    "ptb_clip": (0, None), "ptb_decay_after": (1, None),
    "ptb_valid_tokens": (0, None), "ptb_test_tokens": (0, None), "conll_seeds": (1, None),
    "conll_fraction": (0.001, 1),
    "conll_embedding": (1, None), "conll_hidden": (1, None), "conll_batch": (1, None), "conll_epochs": (1, None),
    "conll_lr": (Above(0), None), "conll_eval_sentences": (0, None), "conll_pool": (1, None),
    "conll_min_count": (1, None),
    "speed_ps": (0, 0.99),
    "speed_batches": (1, None),
    "speed_hidden": (1, None), "speed_tagger_hidden": (1, None), "speed_periods": (1, None), "speed_repeats": (1, None),
    "mt_hidden": (1, None), "mt_epochs": (1, None), "mt_batch": (1, None),
}


#: "No loss": the paper's tables put structured dropout within about 2 % perplexity and half an F1 point of
#: standard dropout; a difference inside these is "comparable".
PPL_TOLERANCE = 0.02
F1_TOLERANCE = 0.5
#: "Overfits measurably": the control's validation perplexity at least 10 % above its perplexity on text it trained
#: on. Train and validation text come from one distribution, so a model that has not overfitted scores both alike
#: (within the ~1 % noise of scoring 74k tokens); a gap of a tenth is past that noise, and a gap dropout can close.
OVERFIT_GAP = 0.10


SPEEDUP = "step-time speed-up over standard dropout (the paper: 1.23x - 1.64x)"

#: Where the paper measured its speed-ups: C1-C4 are judged on a GPU measurement (:func:`gpu_speed`) when one is
#: committed, and are not testable on this CPU otherwise.
GPU_ONLY = ("the paper's speed-ups are GPU measurements (cuDNN / cuBLAS), and no GPU measurement is committed "
            "(benchmarks/gpu_check.sh writes one on a machine with CUDA)")

#: The negative control of the GPU speed-up claims: an A/A run, standard dropout timed against itself, which must show
#: no speed-up; and why those claims have no power check here.
AA_CONTROL = "an A/A run: standard dropout timed against itself, which must not show a speed-up"
NO_GPU = ("not measured here: no GPU measurement is committed (benchmarks/gpu_check.sh); a run there times the A/A "
          "control beside the claim")

CLAIMS = (
    Claim("C1", "Structured dropout trains faster than standard dropout (PTB LM)", where="Abstract, Sec. 5",
          paper_value=1.23, unit=SPEEDUP, rule=at_least(1.23),
          over="PTB medium (2 x `speed_hidden`), the first of `speed_batches`, p = `p`, on a GPU", near=0.25,
          timing=True, control=AA_CONTROL, no_power_check=NO_GPU),
    Claim("C2", "... and at a larger batch", where="Sec. 5", paper_value=1.23, unit=SPEEDUP, rule=at_least(1.23),
          over="PTB medium, the last of `speed_batches`, p = `p`, on a GPU", near=0.25, timing=True,
          control=AA_CONTROL, no_power_check=NO_GPU),
    Claim("C3", "Structured dropout trains faster than standard dropout (CoNLL-2003 tagger)", where="Abstract, Sec. 5",
          paper_value=1.23, unit=SPEEDUP, rule=at_least(1.23),
          over="the BiLSTM tagger, `conll_batch`, p = `p`, on a GPU", near=0.25, timing=True,
          control=AA_CONTROL, no_power_check=NO_GPU),
    Claim("C4", "The speed-up grows with the dropout rate", where="Sec. 5 (rate sweep)",
          paper_value="larger p, larger speed-up", unit="least-squares slope of the speed-up against the ideal "
          "speed-up 1/(1-p), over the rates where it is a speed-up (> 1x)", rule=above(0.0),
          over="every p of `speed_ps`, PTB, the first batch, on a GPU", timing=True,
          control="an A/A sweep: standard dropout against itself at every p, whose slope must not be positive",
          no_power_check=NO_GPU),
    Claim("C5", "No loss in perplexity (PTB)", where="Table (PTB)", paper_value=0.0,
          unit="test perplexity, structured / standard - 1, mean over seeds (95 % t-interval)",
          rule=at_most(PPL_TOLERANCE), threshold_why="\"no loss\" as the paper's table shows it: within about "
          "2 % of standard dropout's perplexity", over="`seeds` seeds, reduced model at p = `ptb_p`, `ptb_epochs` passes over the first `ptb_fraction` of PTB's training text; the control "
          "without dropout must fail the same rule", parity=True,
          preconditions=(Precondition("learned", "both dropout models beat every count-based model of the same "
                                      "training text, add-one unigram and Kneser-Ney bigram and trigram (the "
                                      "strongest one's test perplexity / the worst model's)", above(1.0)),
                         Precondition("control_overfits", "without dropout the model overfits measurably: its "
                                      "validation perplexity over its perplexity on held-in training text, minus 1",
                                      above(OVERFIT_GAP)))),
    Claim("C6", "No loss in F1 (CoNLL-2003 NER)", where="Table (NER)", paper_value=0.0,
          unit="test span F1, standard - structured (points), mean over seeds (95 % t-interval)",
          rule=at_most(F1_TOLERANCE), threshold_why="\"no loss\" as the paper's table shows it: within about "
          "half an F1 point of standard dropout", over="`conll_seeds` seeds, reduced model and data; the control without dropout "
          "must fail the same rule", parity=True,
          preconditions=(Precondition("learned", "both dropout taggers beat CoNLL's most-frequent-tag baseline "
                                      "trained on the same sentences (worst tagger minus baseline, F1 points)",
                                      above(0.0)),)),
    Claim("C7", "This reproduction's finding, not the paper's: on 2 CPU cores exact case III does not reach the "
          "paper's speed-up, whichever exact kernel computes it", where="against the paper's smallest speed-up "
          "(Sec. 5)", paper_value=1.23, unit="step-time speed-up over standard dropout of case III's fastest "
          "kernel (sparsity.compaction.KERNELS), per setting", rule=below(1.23),
          over="PTB medium at every batch of `speed_batches` and the tagger, p = `p`, on this CPU", min_share=1.0,
          timing=True, kind=FINDING),
)

#: The knobs the accuracy runs depend on (the speed measurements' knobs start with ``speed_``).
ACCURACY_KNOBS = tuple(name for name in PRESETS["default"] if not name.startswith(("speed_", "mt_", "translation")))
#: The knobs of the translation rows.
TRANSLATION_KNOBS = ("seeds", "p", "mt_pairs", "mt_hidden", "mt_epochs", "mt_batch", "device")
DEVICES = ("cpu", "cuda")


def check_device(device: str) -> torch.device:
    """The torch device of the ``device`` knob, or a ValueError naming the allowed values."""
    if device not in DEVICES:
        raise ValueError(f"parameter 'device' must be one of {list(DEVICES)}, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("parameter 'device' is 'cuda' but torch sees no GPU here; run with -p device cpu")
    return torch.device(device)


def mask_cases(steps: int = 6, batch: int = 4, hidden: int = 10, p: float = 0.5, seed: int = 0) -> dict:
    """Fig. 1: one real (steps, batch, hidden) mask per case, 1 where a neuron is kept."""
    return {LABELS[mode]: (dropout_mask(mode, steps, batch, hidden, p, torch.Generator().manual_seed(seed))
                           .expand(steps, batch, hidden) > 0).int()
            for mode in ACCURACY_MODES}


def head(ids: torch.Tensor, tokens: int) -> torch.Tensor:
    """The first ``tokens`` of a token stream (all of it when ``tokens`` is 0)."""
    return ids if tokens == 0 else ids[:tokens]


@dataclass(frozen=True)
class Task:
    """One accuracy run: which task, dropout mode and seed, with the settings it needs."""

    task: str  # "ptb", "conll", or an IWSLT pair ("de-en", "en-vi")
    mode: str
    seed: int
    knobs: dict


def _dropout(t: Task, knobs: dict) -> tuple[float, str]:
    """(p, mode) of a run: the control ``none`` is standard dropout at p = 0; the PTB model drops at ``ptb_p`` (its
    rate goes with its size, as Zaremba's: 0 at 2 x 200, 0.5 at 2 x 650), the others at ``p``."""
    if t.mode == "none":
        return 0.0, "standard"
    return knobs["ptb_p"] if t.task == "ptb" else knobs["p"], t.mode


def _train_ptb(t: Task, corpus) -> dict:
    """One LM run: validation perplexity per epoch; at the end, test perplexity and the perplexity of a held-in slice
    of the training text (as long as the validation text scored, from the start of the training stream)."""
    k = t.knobs
    torch.manual_seed(t.seed)
    train = batchify(corpus.train[: int(k["ptb_fraction"] * corpus.train.numel())], k["ptb_batch"])
    scored = head(corpus.valid, k["ptb_valid_tokens"])
    valid, held_in = batchify(scored, 10), batchify(corpus.train[: scored.numel()], 10)
    model = WordLM(len(corpus.vocab), k["ptb_hidden"], k["ptb_layers"], *_dropout(t, k), kernel="dense",
                   cutoffs=tuple(k["ptb_cutoffs"]), fused=True).to(k["device"])
    rows = train_lm(model, train, valid, k["ptb_epochs"], torch.Generator().manual_seed(t.seed), lr=k["ptb_lr"],
                    clip=k["ptb_clip"], bptt=k["bptt"], decay_after=k["ptb_decay_after"], optimizer=k["ptb_optimizer"],
                    held_in=held_in, schedule=k["ptb_schedule"])
    curve = [{"epoch": r["epoch"], "metric": r["valid_ppl"]} for r in rows]
    return {"curve": curve, "valid": rows[-1]["valid_ppl"], "held_in": rows[-1]["train_ppl"],
            "test": perplexity(model, batchify(head(corpus.test, k["ptb_test_tokens"]), 10), k["bptt"])}


def _train_conll(t: Task, data) -> dict:
    k = t.knobs
    torch.manual_seed(t.seed)
    train = data["train"]
    n = int(k["conll_fraction"] * len(train.words))
    train = type(train)(train.words[:n], train.tags[:n])
    lower = not k["conll_cased"]
    vocab = build_vocab(train.words, min_count=k["conll_min_count"], lower=lower)
    index = {w: i for i, w in enumerate(vocab)}
    tags = sorted({tg for s in data["train"].tags for tg in s})
    m = k["conll_eval_sentences"] or None
    dev, test = (type(train)(data[s].words[:m], data[s].tags[:m]) for s in ("dev", "test"))
    model = Tagger(len(vocab), len(tags), k["conll_embedding"], k["conll_hidden"], *_dropout(t, k), kernel="dense",
                   fused=True).to(k["device"])
    rows = train_tagger(model, train, dev, index, tags, k["conll_epochs"], torch.Generator().manual_seed(t.seed),
                        batch_size=k["conll_batch"], lr=k["conll_lr"], pool=k["conll_pool"],
                        schedule=k["conll_schedule"], lower=lower)
    curve = [{"epoch": r["epoch"], "metric": r["dev_f1"]} for r in rows]
    return {"curve": curve, "valid": rows[-1]["dev_f1"], "held_in": float("nan"),
            "test": span_f1(test.tags, tag(model, test.words, index, tags, lower=lower))["f1"]}


#: The modes every accuracy run needs: the two C5 and C6 compare, and the control their verdicts need.
REQUIRED_MODES = ("none", "standard", "structured")


def check_modes(modes: list[str]) -> None:
    """Raise a ValueError naming the parameter unless ``modes`` are distinct modes of :data:`TRAINED_MODES` that
    include :data:`REQUIRED_MODES`."""
    unknown = [m for m in modes if m not in TRAINED_MODES]
    missing = [m for m in REQUIRED_MODES if m not in modes]
    if unknown or missing or len(set(modes)) != len(modes):
        raise ValueError(f"parameter 'modes' must be distinct modes of {list(TRAINED_MODES)} including "
                         f"{list(REQUIRED_MODES)}, got {modes!r}")


def check_recipe(settings) -> None:
    """Raise a ValueError naming the parameter unless the optimizer and schedules are ones the loops know."""
    for name, allowed in (("ptb_optimizer", sorted(OPTIMIZERS)), ("ptb_schedule", list(SCHEDULES)),
                          ("conll_schedule", list(TAGGER_SCHEDULES))):
        if getattr(settings, name) not in allowed:
            raise ValueError(f"parameter {name!r} must be one of {allowed}, got {getattr(settings, name)!r}")


def _run_one(t: Task) -> dict:
    """One accuracy run in a worker process (one thread)."""
    if t.task == "ptb":
        return _train_ptb(t, load_ptb())
    return _train_conll(t, load_conll2003())


def accuracy_runs(settings, workers: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train every (task, mode, seed) of the accuracy table; returns (results, curves).

    ``results`` has one row per run: task, mode, seed, the final validation metric, the test metric
    (perplexity for PTB, span F1 in % for CoNLL-2003) and, for PTB, the final perplexity on a held-in slice of
    the training text (``held_in``); ``curves`` the validation metric per epoch (``metric``). The modes are
    ``settings.modes`` (:func:`check_modes`): the control without dropout and the dropout modes. Cached under
    ``data/cache/structured_dropout``, keyed by the seed and the knobs in :data:`ACCURACY_KNOBS`
    """
    check_device(settings.device)
    check_modes(settings.modes)
    check_recipe(settings)
    knobs = {name: getattr(settings, name) for name in ACCURACY_KNOBS}
    seeds = {"ptb": settings.seeds, "conll": settings.conll_seeds}
    tasks = [Task(task, mode, settings.seed + s, knobs) for task in ("ptb", "conll") for mode in settings.modes
             for s in range(seeds[task])]
    return _cached_training("accuracy_runs", settings, ACCURACY_KNOBS, tasks, _run_one,
                            lambda: (load_ptb(), load_conll2003()), workers, "training runs")


def _cached_training(name: str, settings, knobs: tuple[str, ...], tasks: list[Task], train, prefetch,
                     workers: int | None, desc: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``train`` over ``tasks`` on a :class:`mlsysrepro.core.tasks.TaskRunner`, cached under ``name`` by the seed
    and ``knobs`` alone (the speed knobs do not change a trained model); ``prefetch`` first fetches the data in
    this process, so that the workers never copy it at once. Returns (results, curves) frames."""
    with TaskRunner(workers) as runner:
        outputs = runner.cached_map(name, settings, train, tasks, knobs=knobs, desc=desc, prepare=prefetch)
    results = pd.DataFrame([{"task": t.task, "mode": LABELS[t.mode], "seed": t.seed, "valid": o["valid"],
                             "test": o["test"], "held_in": o.get("held_in", float("nan"))}
                            for t, o in zip(tasks, outputs)])
    curves = pd.DataFrame([{"task": t.task, "mode": LABELS[t.mode], "seed": t.seed, **row}
                           for t, o in zip(tasks, outputs) for row in o["curve"]])
    return results, curves


def accuracy_table(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over seeds of the validation and test metric, per task and mode."""
    table = results.groupby(["task", "mode"], sort=False)[["valid", "test"]].agg(["mean", "std"])
    table.columns = [f"{metric} {stat}" for metric, stat in table.columns]
    return table.reset_index()


# -- translation --------------------------------------------------------------------------------------------

BOS, EOS = "<s>", "</s>"


def _indexed(sentences: list[list[str]], vocab: list[str]) -> list[list[int]]:
    index = {w: i for i, w in enumerate(vocab)}
    unk = index[UNK]
    return [[index.get(w, unk) for w in s] for s in sentences]


def _train_translation(t: Task) -> dict:
    """One run on the IWSLT release ``t.task`` (:data:`mlsysrepro.text.corpora.IWSLT`): train on its training split,
    dev BLEU per epoch, test BLEU at the end."""
    k, release = t.knobs, IWSLT[t.task]
    train, dev, test = release.splits
    data = load_parallel(fetch(release.dataset), release)
    src_vocab = build_vocab(data[train].source, min_count=2, lower=False)
    tgt_vocab = build_vocab(data[train].target, min_count=2, lower=False) + [BOS, EOS]
    bos, eos = len(tgt_vocab) - 2, len(tgt_vocab) - 1
    pairs = {split: list(zip(_indexed(d.source, src_vocab), _indexed(d.target, tgt_vocab)))
             for split, d in data.items()}
    torch.manual_seed(t.seed)
    model = Translator(len(src_vocab), len(tgt_vocab), k["mt_hidden"], 2, k["p"], t.mode).to(k["device"])
    rows = train_translator(model, pairs[train], pairs[dev], k["mt_epochs"],
                            torch.Generator().manual_seed(t.seed), bos, eos, batch_size=k["mt_batch"])
    hypotheses = translate(model, [s for s, _ in pairs[test]], bos, eos)
    words = [[tgt_vocab[i] for i in h] for h in hypotheses]
    return {"curve": [{"epoch": r["epoch"], "metric": r["dev_bleu"]} for r in rows], "valid": rows[-1]["dev_bleu"],
            "test": corpus_bleu(words, data[test].target)["bleu"]}


def translation_runs(settings, workers: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The paper's translation rows: for every pair in ``mt_pairs`` (:data:`mlsysrepro.text.corpora.IWSLT`:
    IWSLT'14 De-En, IWSLT'15 En-Vi), test BLEU per dropout mode and seed, and dev BLEU per epoch; None when
    ``settings.translation`` is off.

    Needs each pair's training set in the registry (neither is obtainable here); raises a :class:`DatasetError`
    that says where the files come from otherwise. The test sets alone are too small to train a translator that
    reaches a meaningful BLEU, so there is no reduced setting.
    """
    unknown = [pair for pair in settings.mt_pairs if pair not in IWSLT]
    if unknown or not settings.mt_pairs:
        raise ValueError(f"parameter 'mt_pairs' must be a non-empty list of {list(IWSLT)}, got {settings.mt_pairs!r}")
    if not settings.translation:
        return None
    registry = load_registry()
    missing = [IWSLT[pair] for pair in settings.mt_pairs if IWSLT[pair].dataset not in registry]
    if missing:
        raise DatasetError(
            "the translation rows need the IWSLT training sets, registered in lib/mlsysrepro/core/datasets.json with "
            "the sha256 and URL of every split's files (<split>.<language>): "
            + "; ".join(f"{r.dataset!r}, splits {', '.join(r.splits)}, from {r.origin}" for r in missing)
            + "; set translation=False to skip them, or mt_pairs to the registered pairs")
    check_device(settings.device)
    knobs = {name: getattr(settings, name) for name in TRANSLATION_KNOBS}
    tasks = [Task(pair, mode, settings.seed + s, knobs) for pair in settings.mt_pairs
             for mode in ("standard", "locked", "structured") for s in range(settings.seeds)]
    return _cached_training("translation_runs", settings, TRANSLATION_KNOBS, tasks, _train_translation,
                            lambda: [fetch(IWSLT[pair].dataset) for pair in settings.mt_pairs], workers,
                            "translation runs")


# -- speed --------------------------------------------------------------------------------------------------

def _lm_step(model, ids: torch.Tensor, generator):
    """One LM training step (forward, backward, SGD update) on a window, as a callable to time."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        logits, _ = model(ids, None, generator)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def _tagger_step(model, ids: torch.Tensor, lengths: torch.Tensor, target: torch.Tensor, generator):
    """One tagger training step (forward, backward, Adam update) on a batch, as a callable to time."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        logits = model(ids, lengths, generator)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def kernel_label(kernel: str) -> str:
    """Case III computed by ``kernel`` (a name of :data:`mlsysrepro.sparsity.compaction.KERNELS`); the per-draw
    kernel, the paper's design, is plain "structured (III)"."""
    return LABELS["structured"] if kernel == "per-draw" else f"{LABELS['structured']}, {kernel}"


def variants(periods: list[int], kernels: bool) -> list[tuple[str, str, int, str]]:
    """(label, mode, period, kernel) of every implementation timed: ours with each dropout (case III with every
    kernel of :data:`mlsysrepro.sparsity.compaction.KERNELS` when ``kernels``, with the per-draw and the dense one
    otherwise), and torch.nn.LSTM."""
    names = list(KERNELS) if kernels else ["per-draw", "dense"]
    return ([(LABELS["standard"], "standard", 1, "")]
            + [(kernel_label(kernel), "structured", 1, kernel) for kernel in names]
            + [(period_label(s), "structured", s, "per-draw") for s in periods]
            + [(LABELS["fixed"], "fixed", 1, "per-draw"), ("torch.nn.LSTM", "torch", 1, "")])


def period_label(period: int) -> str:
    return f"{LABELS['structured']}, period {period}"


def palette(labels) -> dict:
    """:data:`PALETTE`'s colour for each label; case III's other kernels and periods in lighter greens and blue."""
    extra = {kernel_label("dense"): "#8de5a1"}
    return {label: PALETTE.get(label, extra.get(label, "#56b4e9")) for label in labels}


def _timed_rows(steps: dict, repeats: int, device) -> dict[str, dict]:
    """Time the variants ``steps`` (label: a training step) together (:func:`mlsysrepro.core.timing.interleaved`):
    per label, the median step time with its 95 % interval (``step_s``, ``step_low``, ``step_high``) and the
    speed-up over standard dropout as the median of the per-round ratios, with its interval (``speedup_vs_standard``,
    ``speedup_low``, ``speedup_high``; :func:`mlsysrepro.core.timing.ratios`: a slow spell that hits a whole round
    cancels). The same ratios against ``torch.nn.LSTM`` (the peer a user would run) are ``vs_torch``, ``vs_torch_low``
    and ``vs_torch_high`` (> 1: faster than it)."""
    timed = interleaved(steps, repeats, device=device)
    ups, versus_torch = ratios(timed, LABELS["standard"]), ratios(timed, "torch.nn.LSTM")
    return {label: {"step_s": timing.median, "step_low": timing.interval[0], "step_high": timing.interval[1],
                    "speedup_vs_standard": ups[label].median, "speedup_low": ups[label].interval[0],
                    "speedup_high": ups[label].interval[1], "vs_torch": versus_torch[label].median,
                    "vs_torch_low": versus_torch[label].interval[0], "vs_torch_high": versus_torch[label].interval[1]}
            for label, timing in timed.items()}


def speed_table(settings, seed: int = 0) -> pd.DataFrame:
    """Median seconds of one training step (forward, backward, update) of the full-size models, and per epoch.

    Variants (:func:`variants`): standard dropout, case III with the per-draw kernel (the paper's) and the dense one
    at every rate, and with every kernel at ``p`` (``auto`` measures its forms in the untimed warm-up step); a longer
    mask period; case IV; torch.nn.LSTM.
    PTB: :class:`mlsysrepro.recurrent.models.WordLM`, 2 x ``speed_hidden``, 10,000 words, one BPTT window, for every
    p of ``speed_ps`` at the first of ``speed_batches``, and at ``p`` for the other batches. CoNLL-2003: the BiLSTM
    tagger at ``speed_tagger_hidden``, batch ``conll_batch``, on the real training mini-batch whose padded
    length is the median one. ``epoch_s`` multiplies by the steps of one epoch of the full training set.
    The variants of one (task, batch, p) are timed in turn, round after round, in alternating order
    (:func:`_timed_rows`): ``step_s`` is the median with its 95 % interval (``step_low``, ``step_high``), and
    ``speedup_vs_standard`` the median per-round speed-up over standard dropout with its interval (``speedup_low``,
    ``speedup_high``). Run it when nothing else runs.
    """
    corpus, conll = load_ptb(), load_conll2003()
    device = check_device(settings.device)
    rows = []
    gen = torch.Generator().manual_seed(seed)
    vocab = len(corpus.vocab)
    for n, batch in enumerate(settings.speed_batches):
        ids = torch.randint(vocab, (settings.bptt, batch), generator=gen).to(device)
        windows = math.ceil((corpus.train.numel() // batch - 1) / settings.bptt)
        for p in sorted({*settings.speed_ps, settings.p}) if n == 0 else [settings.p]:
            steps, kernels = {}, {}
            for label, mode, period, kernel in variants(settings.speed_periods, p == settings.p):
                torch.manual_seed(seed)
                model = (TorchWordLM(vocab, settings.speed_hidden, 2, p) if mode == "torch"
                         else WordLM(vocab, settings.speed_hidden, 2, p, mode, kernel=kernel or "per-draw",
                                     period=period))
                steps[label] = _lm_step(model.to(device), ids, torch.Generator().manual_seed(seed))
                kernels[label] = kernel
            for label, timed in _timed_rows(steps, settings.speed_repeats, device).items():
                rows.append({"task": "ptb", "batch": batch, "p": p, "variant": label, "kernel": kernels[label],
                             **timed, "epoch_s": timed["step_s"] * windows})
    train = conll["train"]
    vocab_list = build_vocab(train.words)
    index = {w: i for i, w in enumerate(vocab_list)}
    tags = sorted({t for s in train.tags for t in s})
    b = settings.conll_batch
    padded = [max(len(s) for s in train.words[i:i + b]) for i in range(0, len(train.words), b)]
    typical = sorted(range(len(padded)), key=lambda i: (abs(padded[i] - sorted(padded)[len(padded) // 2]), i))[0]
    sentences, sentence_tags = train.words[typical * b:(typical + 1) * b], train.tags[typical * b:(typical + 1) * b]
    ids, lengths = pad_batch(sentences, index)
    target = torch.full_like(ids, -100)
    for j, row in enumerate(sentence_tags):
        target[: len(row), j] = torch.tensor([tags.index(t) for t in row])
    h = settings.speed_tagger_hidden
    for p in sorted({*settings.speed_ps, settings.p}):
        steps, kernels = {}, {}
        for label, mode, period, kernel in variants(settings.speed_periods, p == settings.p):
            torch.manual_seed(seed)
            model = (TorchTagger(len(vocab_list), len(tags), settings.conll_embedding, h, p) if mode == "torch"
                     else Tagger(len(vocab_list), len(tags), settings.conll_embedding, h, p, mode,
                                 kernel=kernel or "per-draw", period=period))
            steps[label] = _tagger_step(model.to(device), ids.to(device), lengths, target.to(device),
                                        torch.Generator().manual_seed(seed))
            kernels[label] = kernel
        for label, timed in _timed_rows(steps, settings.speed_repeats, device).items():
            rows.append({"task": "conll", "batch": b, "p": p, "variant": label, "kernel": kernels[label],
                         **timed, "epoch_s": timed["step_s"] * len(padded)})
    frame = pd.DataFrame(rows)
    hidden_of = {"ptb": settings.speed_hidden, "conll": settings.speed_tagger_hidden}
    compacted = frame.variant.str.startswith((LABELS["structured"], LABELS["fixed"])) & (frame.kernel != "dense")
    frame["ideal_speedup"] = [hidden_of[t] / kept_count(hidden_of[t], p) if c else 1.0
                              for t, p, c in zip(frame.task, frame.p, compacted)]
    return frame


def auto_forms(settings) -> pd.DataFrame:
    """The forms the ``auto`` kernel picked in this process (:func:`mlsysrepro.sparsity.gemm_timing.tuned_shapes`)
    for case III at ``p``: one row per projection shape, named (T x B x H -> N), with the form of each stage."""
    shapes = pd.DataFrame(tuned_shapes(), columns=["steps", "batch", "width", "out_dim", "kept", "period", "dtype",
                                                   "device", "forward", "backward-data", "backward-weight"])
    shapes = shapes[(shapes.period == 1) & (shapes.kept == [kept_count(w, settings.p) for w in shapes.width])]
    projection = [f"{t}x{b}x{w} -> {n}" for t, b, w, n in zip(shapes.steps, shapes.batch, shapes.width, shapes.out_dim)]
    return shapes.assign(projection=projection)[["projection", "forward", "backward-data", "backward-weight"]]


def stage_breakdown_ideal(settings) -> float:
    """The ideal speed-up of a compacted GEMM at ``p``: ``H / k``."""
    return settings.speed_hidden / kept_count(settings.speed_hidden, settings.p)


def stage_breakdown(settings) -> pd.DataFrame:
    """:func:`mlsysrepro.sparsity.gemm_timing.time_stages` for the LM's input projection (H -> 4H) and decoder
    (H -> 10,000), every form of every stage, with the paper's per-step mask (period 1) at ``p``, at every batch of
    ``speed_batches``, on the CPU."""
    rows = []
    for batch in settings.speed_batches:
        for name, out_dim in (("input projection", 4 * settings.speed_hidden), ("decoder", 10_000)):
            rows += [{"gemm": name, **r} for r in time_stages(settings.bptt, batch, settings.speed_hidden, out_dim,
                                                              settings.p, repeats=settings.speed_repeats)]
    return pd.DataFrame(rows)


#: The paper's settings, set beside this run's (:func:`describe`) by :func:`mlsysrepro.core.settings.beside_paper`.
PAPER_SETTINGS = {
    "PTB model": "2 x 650 LSTM (Zaremba medium), BPTT 35, batch 20, 39 epochs",
    "CoNLL-2003 model": "BiLSTM tagger, full training set",
    "translation": "LSTM encoder-decoder on IWSLT De-En and En-Vi (BLEU)",
    "dropout rates": "0.2 - 0.65",
    "hardware": "NVIDIA GPU (cuDNN / cuBLAS)",
}


def speedup(speed: pd.DataFrame, task: str, mode: str, p: float, batch: int | None = None) -> float:
    """The speed-up over standard dropout of ``mode`` (a mode of :data:`LABELS` or a variant's label) in
    :func:`speed_table`'s frame, for ``task`` at ``batch`` (the task's first batch by default) and ``p``."""
    variant = LABELS.get(mode, mode)
    rows = speed[(speed.task == task) & (speed.variant == variant) & (speed.p == p)]
    if rows.empty:
        raise ValueError(f"no speed row for task {task!r}, variant {variant!r}, p {p}; "
                         f"variants: {sorted(speed.variant.unique())}, rates: {sorted(speed.p.unique())}")
    return float(rows[rows.batch == (batch or rows.batch.iloc[0])].speedup_vs_standard.iloc[0])


def describe(settings) -> dict[str, str]:
    """This run's models, data and hardware, in the rows of :data:`PAPER_SETTINGS`."""
    s = settings
    return {
        "PTB model": f"{s.ptb_layers} x {s.ptb_hidden}, BPTT {s.bptt}, batch {s.ptb_batch}, {s.ptb_epochs} epoch(s) on "
                     f"{s.ptb_fraction:.0%} of the training stream, "
                     + (f"adaptive softmax (head {s.ptb_cutoffs[0]} words)" if s.ptb_cutoffs else "full softmax")
                     + f", {s.ptb_optimizer}, {s.ptb_schedule} schedule (speed: 2 x {s.speed_hidden}, full size, "
                     "full softmax)",
        "CoNLL-2003 model": f"BiLSTM {s.conll_embedding} / {s.conll_hidden}, {s.conll_epochs} epochs on "
                            f"{s.conll_fraction:.0%} of the training sentences",
        "translation": (f"LSTM encoder-decoder, 2 x {s.mt_hidden}, {s.mt_epochs} epochs on IWSLT "
                        + " and ".join(s.mt_pairs)
                        if s.translation else "not run (no IWSLT training set offline)"),
        "dropout rates": ", ".join(map(str, s.speed_ps)) + f" (speed); {s.ptb_p} (PTB accuracy); {s.p} (CoNLL-2003"
                         " accuracy)",
        "hardware": (torch.cuda.get_device_name() if s.device == "cuda" and torch.cuda.is_available()
                     else f"CPU, {torch.get_num_threads()} threads"),
    }


# ---- the claims' measurements -------------------------------------------------------------------------

def _speed_row(speed: pd.DataFrame, task: str, variant: str, p: float, batch: int | None):
    rows = speed[(speed.task == task) & (speed.variant == variant) & (speed.p == p)]
    if rows.empty:
        raise ValueError(f"no speed row for task {task!r}, variant {variant!r}, p {p}; "
                         f"variants: {sorted(speed.variant.unique())}, rates: {sorted(speed.p.unique())}")
    return rows[rows.batch == (batch or rows.batch.iloc[0])].iloc[0]


def speedup_claim(speed: pd.DataFrame, task: str, p: float, batch: int | None = None, variant: str | None = None,
                  note: str = "") -> Measurement:
    """``variant``'s speed-up over standard dropout in :func:`speed_table`'s frame (case III's fastest kernel by
    default, :func:`fastest_kernel`): the median per-round ratio with its 95 % interval."""
    variant = variant or fastest_kernel(speed, task, p, batch)
    ours = _speed_row(speed, task, variant, p, batch)
    return Measurement(float(ours.speedup_vs_standard), (float(ours.speedup_low), float(ours.speedup_high)),
                       note=note or variant)


def fastest_kernel(speed: pd.DataFrame, task: str, p: float, batch: int | None = None) -> str:
    """The label of case III's fastest kernel (the largest median speed-up over standard dropout) for ``task`` at
    ``batch`` and ``p``."""
    rows = speed[(speed.task == task) & (speed.p == p) & speed.variant.isin([kernel_label(k) for k in KERNELS])]
    rows = rows[rows.batch == (batch or rows.batch.iloc[0])] if not rows.empty else rows
    if rows.empty:
        raise ValueError(f"no case III kernel timed for task {task!r} at p {p}; rates: {sorted(speed.p.unique())}")
    return str(rows.assign(slowness=-rows.speedup_vs_standard).sort_values(["slowness", "variant"]).variant.iloc[0])


def speed_settings(speed: pd.DataFrame, p: float) -> list[tuple[str, str, int]]:
    """(name, task, batch) of every setting the speed claims run over: PTB at each batch, then the tagger."""
    return [(f"{task} batch {batch}", task, int(batch)) for task in ("ptb", "conll")
            for batch in sorted(speed[(speed.task == task) & (speed.p == p)].batch.unique())]


def gpu_speed() -> pd.DataFrame | None:
    """:func:`speed_table`'s frame as the GPU check measured it on CUDA (``benchmarks/gpu_check.sh``), or None."""
    rows = gpu_results.section("structured_dropout_speed")
    return None if rows is None else pd.DataFrame(rows)


def gpu_claim(gpu: pd.DataFrame | None, task: str, p: float, batch: int | None, cpu: pd.DataFrame) -> Measurement:
    """Claims C1-C3, where the paper made them: :func:`speedup_claim` on the GPU measurement, or not testable here
    with this CPU's speed-up (its fastest kernel) in the reason."""
    here = speedup_claim(cpu, task, p, batch)
    on_cpu = f"on this CPU the fastest exact kernel ({here.note}) gives {here.value:.2f}x (claim C7)"
    if gpu is None:
        return not_testable(f"{GPU_ONLY}; {on_cpu}")
    measured = speedup_claim(gpu, task, p, batch)
    return replace(measured, note=f"{gpu_results.provenance('structured_dropout_speed')}, {measured.note}; {on_cpu}")


def rate_trend(speed: pd.DataFrame | None, task: str, ps: list[float], batch: int | None = None) -> Measurement:
    """Claim C4: the slope of case III's speed-up (the per-draw kernel) against the ideal 1/(1-p), over the rates
    where it is a speed-up; not testable without a GPU measurement (``speed`` None), or where fewer than two rates
    give a speed-up (slow-downs that shrink are not a speed-up that grows)."""
    if speed is None:
        return not_testable(GPU_ONLY)
    ups = {p: speedup(speed, task, "structured", p, batch) for p in ps}
    faster = {p: s for p, s in ups.items() if s > 1.0}
    listed = ", ".join(f"p {p}: {s:.2f}x (ideal {1 / (1 - p):.2f}x)" for p, s in ups.items())
    if len(faster) < 2:
        return not_testable(f"structured dropout is a speed-up at {len(faster)} of {len(ups)} rates "
                            f"({listed}): there is no growing speed-up to measure")
    slope = float(np.polyfit([1 / (1 - p) for p in faster], list(faster.values()), 1)[0])
    return Measurement(slope, note=listed)


def cpu_finding(speed: pd.DataFrame, p: float) -> Measurement:
    """Claim C7: per setting (:func:`speed_settings`), the speed-up of case III's fastest kernel with its interval;
    the median over settings with a bootstrap interval (:func:`mlsysrepro.core.claims.across`)."""
    measured = {name: speedup_claim(speed, task, p, batch) for name, task, batch in speed_settings(speed, p)}
    overall = across({name: m.value for name, m in measured.items()},
                     note="; ".join(f"{name}: {m.note}" for name, m in measured.items()))
    return replace(overall, per_setting_interval={name: m.interval for name, m in measured.items()})


def floor_baseline(settings, task: str) -> dict[str, float]:
    """The floors a trained model must clear (C5 and C6's power check ``learned``), trained and scored on the text
    the runs train and test on. For ``ptb`` the test perplexity of the count-based language models
    (:mod:`mlsysrepro.text.baselines`): add-one unigram, interpolated Kneser-Ney bigram and trigram; for ``conll`` the
    most-frequent-tag baseline's span F1 in %."""
    if task == "ptb":
        corpus = load_ptb()
        train = corpus.train[: int(settings.ptb_fraction * corpus.train.numel())]
        test, vocab = head(corpus.test, settings.ptb_test_tokens), len(corpus.vocab)
        return {"add-one unigram": unigram_perplexity(train, test, vocab),
                **{f"Kneser-Ney {name}": KneserNey(train, order, vocab).perplexity(test)
                   for order, name in ((2, "bigram"), (3, "trigram"))}}
    data = load_conll2003()
    n, m = int(settings.conll_fraction * len(data["train"].words)), settings.conll_eval_sentences or None
    return {"most frequent tag": most_frequent_tag_f1(Tagged(data["train"].words[:n], data["train"].tags[:n]),
                                                      Tagged(data["test"].words[:m], data["test"].tags[:m]))}


def learned(results: pd.DataFrame, task: str, floors: dict[str, float]) -> Measurement:
    """C5 and C6's power check: how far the worse of the two compared models (standard and structured dropout, the
    worst seed) stands from the strongest floor (:func:`floor_baseline`): ``floor / perplexity`` for PTB (> 1: it
    beats every count-based model), ``F1 - floor`` for CoNLL (> 0: it beats the most-frequent-tag tagger)."""
    test = results[(results.task == task) & results["mode"].isin([LABELS["standard"], LABELS["structured"]])].test
    listed = ", ".join(f"{name} {value:.1f}" for name, value in floors.items())
    if task == "ptb":
        name = min(floors, key=floors.get)
        return Measurement(floors[name] / float(test.max()),
                           note=f"{listed}; the strongest, {name}, against the worst model's {test.max():.1f}")
    name = max(floors, key=floors.get)
    return Measurement(float(test.min()) - floors[name], note=f"{listed}; worst tagger {test.min():.1f}")


def overfit_gap(results: pd.DataFrame, mode: str = "none") -> Measurement:
    """C5's power check ``control_overfits``: validation perplexity over held-in training perplexity, minus 1, of
    ``mode``'s PTB runs at the end of training, mean over seeds with its 95 % t-interval (:func:`from_samples`)."""
    runs = results[(results.task == "ptb") & (results["mode"] == LABELS[mode])]
    gaps = (runs.valid / runs.held_in - 1).tolist()
    return from_samples(gaps, note=f"{LABELS[mode]}: validation {runs.valid.mean():.1f}, held-in training text "
                                   f"{runs.held_in.mean():.1f} ({len(gaps)} seeds)")


def parity_claim(results: pd.DataFrame, task: str) -> Measurement:
    """Claims C5 (``ptb``: relative perplexity change) and C6 (``conll``: F1 points lost): structured against
    standard dropout per seed (seeds pair the runs), with the same difference for the control without dropout
    as the baseline that must fail the rule."""
    test = results[results.task == task].pivot_table(index="seed", columns="mode", values="test")
    standard = test[LABELS["standard"]]

    def loss(mode: str) -> pd.Series:
        other = test[LABELS[mode]]
        return other / standard - 1 if task == "ptb" else standard - other

    means = test.mean()
    return replace(from_samples(loss("structured")), baseline=from_samples(loss("none")),
                   note=", ".join(f"{mode} {means[mode]:.2f}" for mode in test.columns) + f" ({len(test)} seeds)")
