"""The text corpora of the collection, through the data registry: readers that any paper's models share.

- :func:`ptb_text`, :func:`wikitext2_text` and :func:`tinyshakespeare_text`: the raw text of a split (what
  character- or BPE-level language models read: BaKlaVa's);
- :func:`load_ptb`: Penn Treebank, word level (Mikolov's release: 10,000 words with ``<unk>``; an
  ``<eos>`` token ends every line), as id tensors per split, and :func:`batchify` / :func:`bptt_windows`
  for truncated back-propagation through time (Zaremba et al., 2014).
- :func:`load_conll2003`: CoNLL-2003 English NER (word, tag) sentences, ``-DOCSTART-`` lines dropped,
  and :func:`pad_batch` for a tagger.
- :func:`load_parallel`: the sentence pairs of an IWSLT release (:data:`IWSLT`: IWSLT'15 En-Vi, IWSLT'14
  De-En), and :func:`pad_ids` for a translator.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core import fetch

EOS, PAD, UNK = "<eos>", "<pad>", "<unk>"


@dataclass(frozen=True)
class Corpus:
    vocab: list[str]
    train: torch.Tensor  # (N,) token ids
    valid: torch.Tensor
    test: torch.Tensor


PTB_SPLITS = ("train", "valid", "test")


def ptb_text(root: Path | None = None) -> dict[str, str]:
    """``{"train", "valid", "test"}`` -> the raw text of Mikolov's PTB files ``ptb.<split>.txt``."""
    root = Path(root or fetch("ptb"))
    return {split: (root / f"ptb.{split}.txt").read_text() for split in PTB_SPLITS}


WIKITEXT_SPLITS = {"train": "wiki.train.tokens", "valid": "wiki.valid.tokens", "test": "wiki.test.tokens"}


def wikitext2_text(root: Path | None = None) -> dict[str, str]:
    """``{"train", "valid", "test"}`` -> the text of WikiText-2 (Merity et al. 2017, the tokenized v1 files: Wikipedia
    articles, rare words as ``<unk>``)."""
    root = Path(root or fetch("wikitext-2"))
    return {split: (root / name).read_text() for split, name in WIKITEXT_SPLITS.items()}


def tinyshakespeare_text() -> str:
    """Karpathy's tinyshakespeare, one file of characters."""
    return (fetch("tinyshakespeare") / "input.txt").read_text()


def _words(text: str) -> list[str]:
    words = []
    for line in text.splitlines():
        words += line.split() + [EOS]
    return words


def load_ptb(root: Path | None = None) -> Corpus:
    """The three PTB splits as token ids; the vocabulary is the training split's words, most frequent first (ties in
    order of first appearance). An adaptive softmax needs that order: ``torch.nn.AdaptiveLogSoftmaxWithLoss`` takes
    "labels sorted by their frequency", its head holding ids below the first cutoff (Grave et al., 2017, Sec. 4),
    and in order of appearance the head of the ``default`` preset (2,046 ids) would hold 80.1 % of PTB's training
    tokens, where its 2,046 most frequent words hold 87.2 %."""
    splits = {name: _words(text) for name, text in ptb_text(root).items()}
    counts = Counter(splits["train"])
    vocab = sorted(dict.fromkeys(splits["train"]), key=counts.__getitem__, reverse=True)  # a stable sort
    index = {w: i for i, w in enumerate(vocab)}
    ids = {name: torch.tensor([index[w] for w in words], dtype=torch.long) for name, words in splits.items()}
    return Corpus(vocab, ids["train"], ids["valid"], ids["test"])


def batchify(ids: torch.Tensor, batch_size: int) -> torch.Tensor:
    """(steps, batch): the token stream cut into ``batch_size`` contiguous columns (the remainder dropped)."""
    steps = ids.numel() // batch_size
    return ids[: steps * batch_size].view(batch_size, steps).t().contiguous()


def bptt_windows(data: torch.Tensor, bptt: int):
    """(input, target) windows of ``bptt`` steps; the target is the input shifted by one token."""
    for start in range(0, data.shape[0] - 1, bptt):
        length = min(bptt, data.shape[0] - 1 - start)
        yield data[start:start + length], data[start + 1:start + 1 + length]


@dataclass(frozen=True)
class Tagged:
    words: list[list[str]]
    tags: list[list[str]]


def _sentences(path: Path) -> Tagged:
    words, tags, sentence = [], [], []
    for line in path.read_text().splitlines() + [""]:
        parts = line.split()
        if parts and parts[0] == "-DOCSTART-":
            continue
        if parts:
            sentence.append((parts[0], parts[-1]))
        elif sentence:
            words.append([w for w, _ in sentence])
            tags.append([t for _, t in sentence])
            sentence = []
    return Tagged(words, tags)


def load_conll2003(root: Path | None = None) -> dict[str, Tagged]:
    """``{"train", "dev", "test"}`` -> sentences of words and BIO tags."""
    root = Path(root or fetch("conll2003"))
    return {name: _sentences(root / f"{name}.txt") for name in ("train", "dev", "test")}


def build_vocab(sentences: list[list[str]], min_count: int = 1, lower: bool = True) -> list[str]:
    """``<pad>``, ``<unk>``, then every word seen at least ``min_count`` times, most frequent first."""
    counts = Counter(w.lower() if lower else w for s in sentences for w in s)
    return [PAD, UNK] + [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_count]


def pad_batch(sentences: list[list[str]], index: dict[str, int],
              lower: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(steps, batch) ids padded with ``<pad>`` (id 0) and the (batch,) lengths."""
    lengths = torch.tensor([len(s) for s in sentences])
    ids = torch.zeros(int(lengths.max()), len(sentences), dtype=torch.long)
    unk = index[UNK]
    for j, s in enumerate(sentences):
        ids[: len(s), j] = torch.tensor([index.get(w.lower() if lower else w, unk) for w in s])
    return ids, lengths


@dataclass(frozen=True)
class Parallel:
    source: list[list[str]]
    target: list[list[str]]


@dataclass(frozen=True)
class Release:
    """A parallel corpus as it ships, one tokenised sentence per line in ``<split>.<language>``: its registry
    name, its language pair, its train / dev / test splits and where its files come from."""

    dataset: str
    source: str
    target: str
    splits: tuple[str, str, str]
    origin: str


#: The paper's two translation tasks, by the ``mt_pair`` knob. Neither training set is in the registry here.
IWSLT = {
    "de-en": Release("iwslt14_de_en", "de", "en", ("train", "valid", "test"),
                     "IWSLT'14 German-English as fairseq's examples/translation/prepare-iwslt14.sh leaves it in its "
                     "tmp/ folder (tokenised and lower-cased, before BPE)"),
    "en-vi": Release("iwslt15_en_vi", "en", "vi", ("train", "tst2012", "tst2013"),
                     "IWSLT'15 English-Vietnamese, Luong & Manning's Stanford NMT release "
                     "(nlp.stanford.edu/projects/nmt)"),
}


def load_parallel(root: Path, release: Release, splits: tuple[str, ...] | None = None) -> dict[str, Parallel]:
    """``{split: Parallel}`` of tokenised sentence pairs, read from ``<split>.<source>`` and ``<split>.<target>``
    under ``root`` (a leading byte-order mark is dropped); ``splits`` defaults to the release's three."""
    out = {}
    for split in splits or release.splits:
        lines = [(root / f"{split}.{lang}").read_text(encoding="utf-8-sig").splitlines()
                 for lang in (release.source, release.target)]
        if len(lines[0]) != len(lines[1]):
            raise ValueError(f"{split}: {len(lines[0])} {release.source} lines "
                             f"but {len(lines[1])} {release.target} ones")
        out[split] = Parallel([s.split() for s in lines[0]], [s.split() for s in lines[1]])
    return out


def pad_ids(sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(steps, batch) ids padded with 0 and the (batch,) lengths."""
    lengths = torch.tensor([len(s) for s in sequences])
    ids = torch.zeros(int(lengths.max()), len(sequences), dtype=torch.long)
    for j, s in enumerate(sequences):
        ids[: len(s), j] = torch.tensor(s, dtype=torch.long)
    return ids, lengths
