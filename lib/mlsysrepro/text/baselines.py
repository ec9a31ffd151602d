"""The floors a trained text model must clear before a claim about it says anything: the positive controls of the
power preconditions (:class:`mlsysrepro.core.claims.Precondition`).

- :func:`unigram_perplexity`: an add-one (Laplace) unigram model of the training tokens, the weakest language model
  there is; a word LM that does not beat it has learned nothing a parity claim could be about.
- :func:`most_frequent_tag_f1`: CoNLL-2003's baseline tagger (each word gets the tag it had most often in training,
  unknown words ``O``), scored by span F1; a tagger below it has not learned to tag.
"""

from __future__ import annotations

import math
from collections import Counter

import torch

from .corpora import Tagged
from .span_f1 import span_f1


def unigram_perplexity(train: torch.Tensor, test: torch.Tensor, vocab_size: int) -> float:
    """Perplexity on ``test`` token ids of the add-one unigram model of ``train``:
    ``p(w) = (count(w) + 1) / (N + V)``, ``exp(-mean log p(w_t))``."""
    if vocab_size < 1 or train.numel() == 0 or test.numel() == 0:
        raise ValueError("unigram_perplexity needs a vocabulary and non-empty train and test token ids")
    counts = torch.bincount(train.flatten(), minlength=vocab_size).double() + 1
    log_p = counts.log() - math.log(train.numel() + vocab_size)
    return float(torch.exp(-log_p[test.flatten()].mean()))


def most_frequent_tag(train: Tagged, sentences: list[list[str]], lower: bool = True) -> list[list[str]]:
    """Each word's most frequent training tag (ties: the tag seen first), ``O`` for a word never seen."""
    norm = str.lower if lower else str
    counts: dict[str, Counter] = {}
    for words, tags in zip(train.words, train.tags):
        for word, tag in zip(words, tags):
            counts.setdefault(norm(word), Counter())[tag] += 1
    best = {word: tally.most_common(1)[0][0] for word, tally in counts.items()}
    return [[best.get(norm(word), "O") for word in words] for words in sentences]


def most_frequent_tag_f1(train: Tagged, test: Tagged, lower: bool = True) -> float:
    """Span F1 (%) of :func:`most_frequent_tag` trained on ``train`` over ``test``."""
    return span_f1(test.tags, most_frequent_tag(train, test.words, lower))["f1"]
