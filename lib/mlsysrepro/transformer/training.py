"""Training the tiny LM: batches mixing real text and retrieval sequences, AdamW with warmup and cosine decay.

The loss is next-token cross-entropy over every position plus, as a second term of equal weight, the mean over
the queries' answer digits (:attr:`.retrieval.RetrievalBatch.answer_mask`): without it the few answer digits of a
512-token sequence would be a negligible part of the gradient and retrieval heads would form far later.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

from ..core.progress import progress
from .llama import Llama
from .retrieval import retrieval_batch, text_windows

Batch = tuple[torch.Tensor, torch.Tensor]  # tokens (B, L), answer mask (B, L)


def mixed_sampler(streams: list[torch.Tensor], tokenizer, batch: int, length: int, retrieval_fraction: float,
                  max_records: int, max_queries: int) -> Callable[[torch.Generator], Batch]:
    """A function drawing one training batch: ``round(retrieval_fraction * batch)`` retrieval sequences (haystack
    from the token ``streams`` in turn, 1 to ``max_records`` records, up to ``max_queries`` queries), the rest
    plain windows of the streams in turn."""
    if not 0.0 <= retrieval_fraction <= 1.0:
        raise ValueError(f"retrieval_fraction must be in [0, 1], got {retrieval_fraction}")
    n_retrieval = round(retrieval_fraction * batch)

    def split(total: int) -> list[int]:
        return [total // len(streams) + (i < total % len(streams)) for i in range(len(streams))]

    def sample(generator: torch.Generator) -> Batch:
        rows, masks = [], []
        for stream, n in zip(streams, split(batch - n_retrieval)):
            if n:
                rows.append(text_windows(stream, length, n, generator))
                masks.append(torch.zeros(n, length, dtype=torch.bool))
        for stream, n in zip(streams, split(n_retrieval)):
            if n:
                records = int(torch.randint(1, max_records + 1, (1,), generator=generator))
                b = retrieval_batch(stream, tokenizer, n, length, records, min(records, max_queries),
                                    generator=generator)
                rows.append(b.tokens)
                masks.append(b.answer_mask)
        return torch.cat(rows), torch.cat(masks)

    return sample


def lm_loss(model: Llama, tokens: torch.Tensor, answer_mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy, plus the mean over answer digits when the batch has any."""
    logits = model(tokens[:, :-1])
    nll = F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
    answers = answer_mask[:, 1:].flatten()
    loss = nll.mean()
    if answers.any():
        loss = loss + nll[answers].mean()
    return loss


def train(model: torch.nn.Module, sample: Callable[[torch.Generator], tuple], steps: int, lr: float,
          generator: torch.Generator, warmup: int = 100, weight_decay: float = 0.1,
          loss: Callable[..., torch.Tensor] = lm_loss, desc: str = "training the LM") -> list[float]:
    """``steps`` AdamW steps (betas 0.9, 0.95) on ``loss(model, *sample(generator))``, with linear warmup then
    cosine decay to ``lr / 10``, gradients clipped at 1; returns the loss of every step. The default loss is the
    LM's (:func:`lm_loss`); the VLM passes :func:`.vlm.vlm_loss`."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    model.train()
    losses = []
    for _ in progress(range(steps), desc):
        value = loss(model, *sample(generator))
        opt.zero_grad(set_to_none=True)
        value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(value.item())
    model.eval()
    return losses
