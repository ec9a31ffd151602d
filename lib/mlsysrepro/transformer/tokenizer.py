"""Two tokenizers for the tiny LMs: characters, and a byte-pair encoding trained here (Sennrich et al. 2016).

Both map text to a 1-D ``torch.long`` tensor and back. The BPE merges only inside a word (a run of letters with
its leading space), so digits and the record brackets of the retrieval task (:mod:`.retrieval`) stay single
tokens under either tokenizer: a key or a value is read digit by digit, as the task intends.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import chain

import numpy as np
import torch

_WORD = re.compile(r" ?[A-Za-z]+|.", re.DOTALL)


class CharTokenizer:
    """One token per character of ``alphabet``; any other character is an error naming it."""

    def __init__(self, alphabet: str):
        self.alphabet = "".join(sorted(set(alphabet)))
        self._index = np.full(0x110000, -1, dtype=np.int64)
        self._index[[ord(c) for c in self.alphabet]] = np.arange(len(self.alphabet))

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet)

    def encode(self, text: str) -> torch.Tensor:
        ids = self._index[np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)]
        if (ids < 0).any():
            unknown = sorted({c for c, i in zip(text, ids) if i < 0})
            raise ValueError(f"characters {unknown!r} are not in the tokenizer's alphabet")
        return torch.from_numpy(ids)

    def decode(self, ids) -> str:
        return "".join(self.alphabet[i] for i in torch.as_tensor(ids).tolist())


class BPETokenizer:
    """Byte-pair encoding over characters: start from :class:`CharTokenizer`'s alphabet and merge, ``merges``
    times, the most frequent adjacent pair of tokens inside words (ties broken by the pair's first occurrence)."""

    def __init__(self, alphabet: str, merges: list[tuple[str, str]]):
        self.chars = CharTokenizer(alphabet)
        self.merges = list(merges)
        self.tokens = list(self.chars.alphabet) + [a + b for a, b in self.merges]
        self._id = {t: i for i, t in enumerate(self.tokens)}
        self._rank = {pair: r for r, pair in enumerate(self.merges)}
        self._memo: dict[str, list[int]] = {}

    @classmethod
    def train(cls, text: str, vocab_size: int, alphabet: str = "") -> "BPETokenizer":
        """Learn merges on ``text`` until the vocabulary has ``vocab_size`` tokens (or no pair repeats)."""
        base = "".join(sorted(set(text) | set(alphabet)))
        if vocab_size < len(base):
            raise ValueError(f"vocab_size ({vocab_size}) must be at least the alphabet's size ({len(base)})")
        return cls(base, _learn_merges(Counter(_WORD.findall(text)), vocab_size - len(base)))

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def _encode_word(self, word: str) -> list[int]:
        if word not in self._memo:
            p = list(word)
            while len(p) > 1:
                ranked = [(self._rank.get(pair, len(self._rank)), pair) for pair in zip(p, p[1:])]
                rank, pair = min(ranked)
                if rank == len(self._rank):
                    break
                p = _merge(p, pair)
            self.chars.encode(word)  # raises on characters outside the alphabet
            self._memo[word] = [self._id[t] for t in p]
        return self._memo[word]

    def encode(self, text: str) -> torch.Tensor:
        words = _WORD.findall(text)
        for word in set(words).difference(self._memo):  # each distinct word segmented once
            self._encode_word(word)
        return torch.tensor(list(chain.from_iterable(map(self._memo.__getitem__, words))), dtype=torch.long)

    def decode(self, ids) -> str:
        return "".join(self.tokens[i] for i in torch.as_tensor(ids).tolist())


def _pairs(pieces: list[str]) -> Counter:
    """How often each adjacent pair occurs in one word's pieces."""
    return Counter(zip(pieces, pieces[1:]))


def _learn_merges(words: Counter, budget: int) -> list[tuple[str, str]]:
    """Up to ``budget`` merges, each of the most frequent adjacent pair over ``words`` (word -> count), ties broken
    by the pair's first occurrence (the first word, in ``words``' order, that holds it, then its place there),
    stopping when no pair occurs twice.

    The pair counts are kept up to date rather than recounted: a merge changes only the words that hold the merged
    pair, so only their pairs are subtracted and added back, found through an index from each pair to the words
    holding it (the incremental statistics of subword-nmt's ``learn_bpe.py``, ``update_pair_statistics``). The
    merges are those of recounting every pair before each merge, in the same order."""
    pieces = [list(word) for word in words]
    counts = list(words.values())
    frequency: Counter = Counter()
    holders: dict[tuple[str, str], set[int]] = {}
    for index, (piece, count) in enumerate(zip(pieces, counts)):
        for pair, times in _pairs(piece).items():
            frequency[pair] += times * count
            holders.setdefault(pair, set()).add(index)

    def first_occurrence(pair: tuple[str, str]) -> tuple[int, int]:
        index = min(holders[pair])
        piece = pieces[index]
        return index, next(i for i in range(len(piece) - 1) if (piece[i], piece[i + 1]) == pair)

    merges: list[tuple[str, str]] = []
    while len(merges) < budget and frequency:
        top = max(frequency.values())
        if top < 2:
            break
        best = min((pair for pair, f in frequency.items() if f == top), key=first_occurrence)
        merges.append(best)
        for index in sorted(holders[best]):
            before = _pairs(pieces[index])
            pieces[index] = _merge(pieces[index], best)
            after = _pairs(pieces[index])
            for pair in before.keys() | after.keys():
                frequency[pair] += (after[pair] - before[pair]) * counts[index]
                if not frequency[pair]:
                    del frequency[pair]
                if pair in after:
                    holders.setdefault(pair, set()).add(index)
                else:
                    holders[pair].discard(index)
    return merges


def _merge(pieces: list[str], pair: tuple[str, str]) -> list[str]:
    out, i = [], 0
    while i < len(pieces):
        if i + 1 < len(pieces) and (pieces[i], pieces[i + 1]) == pair:
            out.append(pieces[i] + pieces[i + 1])
            i += 2
        else:
            out.append(pieces[i])
            i += 1
    return out
