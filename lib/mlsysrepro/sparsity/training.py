"""Training and evaluation loops for :mod:`.models`: truncated BPTT for the language model, mini-batches of
sentences for the tagger. Each returns one row per epoch (the validation metric and the wall time), which
the notebook draws as convergence curves."""

from __future__ import annotations

import math
import time

import torch
from torch.nn import functional as F

from ..core import progress
from .models import Tagger, WordLM
from .span_f1 import span_f1
from .text_data import bptt_windows, pad_batch


OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}


def detach(state):
    return [(h.detach(), c.detach()) for h, c in state]


@torch.no_grad()
def perplexity(model: WordLM, data: torch.Tensor, bptt: int) -> float:
    """exp of the mean cross-entropy over every target token of ``data`` (steps, batch)."""
    model.eval()
    total, count, state = 0.0, 0, None
    for x, y in bptt_windows(data, bptt):
        logits, state = model(x, state)
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum"))
        count += y.numel()
    model.train()
    return math.exp(total / count)


def train_lm(model: WordLM, train: torch.Tensor, valid: torch.Tensor, epochs: int, generator: torch.Generator,
             lr: float = 1.0, clip: float = 5.0, bptt: int = 35, decay: float = 1.2, decay_after: int = 6,
             optimizer: str = "sgd", desc: str = "PTB") -> list[dict]:
    """Zaremba et al.'s recipe: SGD at ``lr``, gradient norm clipped at ``clip``, the hidden state carried
    (detached) across windows, ``lr / decay`` every epoch after ``decay_after``. ``optimizer="adam"``
    swaps SGD for Adam (learns faster in the few hundred steps a reduced run can afford)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}")
    optimizer = OPTIMIZERS[optimizer](model.parameters(), lr=lr)
    rows = []
    for epoch in range(1, epochs + 1):
        model.train()
        state, start = None, time.perf_counter()
        for x, y in progress(list(bptt_windows(train, bptt)), f"{desc} epoch {epoch}"):
            logits, state = model(x, state, generator)
            state = detach(state)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
        seconds = time.perf_counter() - start
        rows.append({"epoch": epoch, "valid_ppl": perplexity(model, valid, bptt), "seconds": seconds})
        if epoch >= decay_after:
            for group in optimizer.param_groups:
                group["lr"] /= decay
    return rows


@torch.no_grad()
def tag(model: Tagger, sentences: list[list[str]], index: dict[str, int], tags: list[str],
        batch_size: int = 256) -> list[list[str]]:
    """Predicted tags per sentence (argmax per token)."""
    model.eval()
    out = []
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start:start + batch_size]
        ids, lengths = pad_batch(chunk, index)
        best = model(ids, lengths).argmax(2)
        out += [[tags[i] for i in best[: len(s), j].tolist()] for j, s in enumerate(chunk)]
    model.train()
    return out


def train_tagger(model: Tagger, train, dev, index: dict[str, int], tags: list[str], epochs: int,
                 generator: torch.Generator, batch_size: int = 32, lr: float = 2e-3, desc: str = "CoNLL") -> list[dict]:
    """Adam on shuffled mini-batches of sentences; the loss skips padding. One row per epoch with dev span F1."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    tag_id = {t: i for i, t in enumerate(tags)}
    rows = []
    for epoch in range(1, epochs + 1):
        model.train()
        order = torch.randperm(len(train.words), generator=generator).tolist()
        start = time.perf_counter()
        for b in progress(range(0, len(order), batch_size), f"{desc} epoch {epoch}"):
            picked = order[b:b + batch_size]
            ids, lengths = pad_batch([train.words[i] for i in picked], index)
            target = torch.full_like(ids, -100)
            for j, i in enumerate(picked):
                target[: lengths[j], j] = torch.tensor([tag_id[t] for t in train.tags[i]])
            logits = model(ids, lengths, generator)
            loss = F.cross_entropy(logits.reshape(-1, len(tags)), target.reshape(-1), ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        seconds = time.perf_counter() - start
        rows.append({"epoch": epoch, "dev_f1": span_f1(dev.tags, tag(model, dev.words, index, tags))["f1"],
                     "seconds": seconds})
    return rows
