"""Text corpora and the synthetic key-value retrieval task that gives a tiny LM retrieval heads.

A tiny LM trained on text alone attends locally in every head, and then every per-head budget is as good as any
other. So a share of the training sequences hide *records* ``{KKK:VVVV}`` (a 3-digit key, a 4-digit value) in a
haystack of real text and end with *queries* ``[KKK:VVVV]`` for some of them: predicting a query's value means
finding its record, however far back, which only some heads learn to do (induction / retrieval heads; Olsson et
al. 2022). The evaluation asks one query and scores the value's 4 digits (the needle / passkey test of the
long-context literature, e.g. Mohtashami & Jaggi 2023, with a procedural needle because a tiny model cannot
answer natural-language needle questions).

Public entry points: :func:`load_splits` (train / calibration / test text of a registered corpus),
:func:`text_windows`, :func:`retrieval_batch`, :data:`TASK_ALPHABET`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..text.corpora import ptb_text, tinyshakespeare_text, wikitext2_text

KEY_DIGITS, VALUE_DIGITS = 3, 4
RECORD_LEN = KEY_DIGITS + VALUE_DIGITS + 3  # "{", ":", "}" (or "[", ":", "]")
TASK_ALPHABET = "{}[]:0123456789"
CORPORA = ("wikitext2", "ptb", "tinyshakespeare")


def load_splits(corpus: str) -> dict[str, str]:
    """``train`` / ``calib`` / ``test`` text. WikiText-2 and PTB use their own train / valid / test files (valid is
    the calibration split); tinyshakespeare, one file, is cut 90 / 5 / 5 % by characters."""
    if corpus == "tinyshakespeare":
        text = tinyshakespeare_text()
        a, b = int(0.9 * len(text)), int(0.95 * len(text))
        return {"train": text[:a], "calib": text[a:b], "test": text[b:]}
    if corpus in ("ptb", "wikitext2"):
        text = ptb_text() if corpus == "ptb" else wikitext2_text()
        return {"train": text["train"], "calib": text["valid"], "test": text["test"]}
    raise ValueError(f"corpus must be one of {CORPORA}, got {corpus!r}")


def text_windows(ids: torch.Tensor, length: int, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """(n, length) windows of the token stream ``ids``: at random starts with a ``generator``, else evenly spaced
    (the evaluation's fixed windows)."""
    if ids.numel() < length + 1:
        raise ValueError(f"length ({length}) must be shorter than the token stream ({ids.numel()} tokens)")
    if generator is None:
        starts = torch.linspace(0, ids.numel() - length - 1, n).long()
    else:
        starts = torch.randint(0, ids.numel() - length, (n,), generator=generator)
    return ids[starts[:, None] + torch.arange(length)]


@dataclass(frozen=True)
class RetrievalBatch:
    tokens: torch.Tensor  # (N, length): haystack, records, queries and their answers
    answer_start: int  # index of the first answer digit of the first query
    record_start: torch.Tensor  # (N,) where the first query's record begins
    answer_mask: torch.Tensor  # (N, length) True on every query's answer digits

    @property
    def query_start(self) -> int:
        """Where the queries begin: ``tokens[:, :query_start]`` is the haystack with its records, the context a
        cache compresses before the question is asked."""
        return self.answer_start - KEY_DIGITS - 2


def _digits(n: int, count: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 10, (n, count), generator=generator)


def retrieval_batch(haystack: torch.Tensor, tokenizer, n: int, length: int, n_records: int = 1, n_queries: int = 1,
                    depth: float | None = None, generator: torch.Generator | None = None) -> RetrievalBatch:
    """``n`` sequences of ``length`` tokens: text windows of ``haystack`` with ``n_records`` records written over
    them at random places (or, with one record, at ``depth`` ∈ [0, 1] of the text), then ``n_queries`` queries
    of distinct records. Record ``j`` is the one the ``j``-th query asks for."""
    generator = generator or torch.Generator().manual_seed(0)
    if not 1 <= n_queries <= n_records:
        raise ValueError(f"n_queries ({n_queries}) must be between 1 and n_records ({n_records})")
    if depth is not None and (n_records != 1 or not 0.0 <= depth <= 1.0):
        raise ValueError(f"depth ({depth}) needs n_records=1 and a value in [0, 1]")
    body = length - n_queries * RECORD_LEN
    slots = body // RECORD_LEN
    if slots < n_records:
        raise ValueError(f"length ({length}) leaves room for {slots} records, fewer than n_records ({n_records})")
    sym = {c: int(tokenizer.encode(c)[0]) for c in TASK_ALPHABET}
    digit_ids = torch.tensor([sym[str(d)] for d in range(10)])
    tokens = text_windows(haystack, length, n, generator).clone()

    # distinct keys per sequence: a random permutation of the key space, first n_records of it
    keys = torch.rand(n, 10 ** KEY_DIGITS, generator=generator).argsort(1)[:, :n_records]
    key_digits = torch.stack([keys // 10 ** (KEY_DIGITS - 1 - i) % 10 for i in range(KEY_DIGITS)], -1)
    values = _digits(n * n_records, VALUE_DIGITS, generator).view(n, n_records, VALUE_DIGITS)
    record = torch.cat([torch.full((n, n_records, 1), sym["{"]), digit_ids[key_digits],
                        torch.full((n, n_records, 1), sym[":"]), digit_ids[values],
                        torch.full((n, n_records, 1), sym["}"])], -1)  # (n, n_records, RECORD_LEN)
    if depth is not None:
        starts = torch.full((n, 1), round(depth * (body - RECORD_LEN)))
    else:
        starts = torch.rand(n, slots, generator=generator).argsort(1)[:, :n_records] * RECORD_LEN
        starts = starts + torch.randint(0, body - slots * RECORD_LEN + 1, (n, 1), generator=generator)
    offsets = starts[:, :, None] + torch.arange(RECORD_LEN)  # (n, n_records, RECORD_LEN)
    tokens.scatter_(1, offsets.flatten(1), record.flatten(1))
    query = record[:, :n_queries].clone()
    query[:, :, 0], query[:, :, -1] = sym["["], sym["]"]
    tokens[:, body:] = query.flatten(1)
    answer_start = body + KEY_DIGITS + 2
    answer_mask = torch.zeros_like(tokens, dtype=torch.bool)
    for j in range(n_queries):
        first = answer_start + j * RECORD_LEN
        answer_mask[:, first:first + VALUE_DIGITS] = True
    return RetrievalBatch(tokens, answer_start, starts[:, 0], answer_mask)
