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


def _ngram_counts(stream: torch.Tensor, order: int, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct ``order``-grams of ``stream`` as sorted keys ``sum_i w_i V^(order-1-i)`` and their counts."""
    key = torch.zeros(stream.numel() - order + 1, dtype=torch.long)
    for i in range(order):
        key = key * vocab_size + stream[i: stream.numel() - order + 1 + i]
    return torch.unique(key, return_counts=True)


def _lookup(keys: torch.Tensor, values: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """``values`` at ``query`` in the sorted ``keys``, 0 where a query is absent."""
    where = torch.searchsorted(keys, query).clamp(max=keys.numel() - 1)
    return torch.where(keys[where] == query, values[where], torch.zeros_like(values[where]))


def _discount(counts: torch.Tensor) -> float:
    """Ney's absolute discount ``D = n1 / (n1 + 2 n2)`` (n_k: how many n-grams occur k times)."""
    n1, n2 = int((counts == 1).sum()), int((counts == 2).sum())
    return n1 / (n1 + 2 * n2) if n1 + n2 else 0.5


class KneserNey:
    """An interpolated Kneser-Ney n-gram model (Chen & Goodman, 1999, Eq. 26; one discount per order, Ney's
    estimate), the classic count-based language model a neural one must beat.

    The highest order uses counts, every lower order continuation counts (how many distinct words precede a
    n-gram), and the unigram interpolates with the uniform distribution over ``vocab_size``::

        P(w | h) = max(c(h w) - D, 0) / c(h .) + D N1+(h .) / c(h .) P(w | h')      (h' = h without its first word)

    with ``P(w | h) = P(w | h')`` where the history ``h`` was never seen. :meth:`log_prob` scores every position of a
    token stream at once (no loop over tokens: sorted n-gram keys and ``searchsorted``).
    """

    def __init__(self, train: torch.Tensor, order: int, vocab_size: int):
        if order < 1:
            raise ValueError(f"order must be >= 1, got {order}")
        if vocab_size < 1 or train.numel() < order:
            raise ValueError(f"KneserNey needs a vocabulary and at least `order` ({order}) training tokens")
        self.order, self.vocab_size = order, vocab_size
        train = train.flatten().long()
        self.levels = []  # per order n = 1..order: (n-gram keys, their (continuation) counts, discount)
        counts = {n: _ngram_counts(train, n, vocab_size) for n in range(1, order + 1)}
        for n in range(1, order + 1):
            keys, count = counts[n]
            if n < order:  # continuation counts: distinct words before the n-gram, from the (n+1)-gram types
                longer = counts[n + 1][0]
                keys, count = torch.unique(longer % vocab_size ** n, return_counts=True)
            self.levels.append(self._level(keys, count, n))

    def _level(self, keys: torch.Tensor, count: torch.Tensor, n: int) -> dict:
        """One order's tables: the n-grams, their counts, and per history its total and number of distinct next words."""
        history = keys // self.vocab_size
        histories, inverse = torch.unique(history, return_inverse=True)
        totals = torch.zeros(histories.numel(), dtype=torch.long).index_add_(0, inverse, count)
        types = torch.bincount(inverse, minlength=histories.numel())
        return {"keys": keys, "count": count, "discount": _discount(count), "histories": histories,
                "totals": totals, "types": types, "n": n}

    def log_prob(self, stream: torch.Tensor) -> torch.Tensor:
        """``log P(w_t | w_{t-order+1} .. w_{t-1})`` for every position ``t >= order - 1`` of ``stream``."""
        stream = stream.flatten().long()
        targets = stream[self.order - 1:]
        prob = torch.full(targets.shape, 1.0 / self.vocab_size, dtype=torch.float64)
        for level in self.levels:
            n = level["n"]
            key = torch.zeros_like(targets)
            for i in range(n):
                key = key * self.vocab_size + stream[self.order - n + i: stream.numel() - n + 1 + i]
            history = key // self.vocab_size
            total = _lookup(level["histories"], level["totals"], history).double()
            types = _lookup(level["histories"], level["types"], history).double()
            count = _lookup(level["keys"], level["count"], key).double()
            seen = total > 0
            discount = level["discount"]
            mixed = ((count - discount).clamp(min=0) + discount * types * prob) / total.clamp(min=1)
            prob = torch.where(seen, mixed, prob)
        return prob.log()

    def perplexity(self, stream: torch.Tensor) -> float:
        """``exp(-mean log P)`` over the positions :meth:`log_prob` scores."""
        return float(torch.exp(-self.log_prob(stream).mean()))
