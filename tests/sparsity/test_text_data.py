import torch

from mlsysrepro.core import fetch
from mlsysrepro.sparsity.text_data import EOS, batchify, bptt_windows, load_conll2003, load_iwslt15, load_ptb, pad_ids


def test_ptb_has_mikolovs_vocabulary_and_token_counts():
    corpus = load_ptb()
    assert len(corpus.vocab) == 10_000 and EOS in corpus.vocab and "<unk>" in corpus.vocab
    # words plus one <eos> per line (887,521 + 42,068 for train, from the files)
    assert (corpus.train.numel(), corpus.valid.numel(), corpus.test.numel()) == (929_589, 73_760, 82_430)


def test_conll2003_has_the_standard_sentence_counts_without_docstart():
    data = load_conll2003()
    assert {k: len(v.words) for k, v in data.items()} == {"train": 14_041, "dev": 3_250, "test": 3_453}
    assert all(len(w) == len(t) for w, t in zip(data["test"].words, data["test"].tags))
    assert not any("-DOCSTART-" in s for s in data["test"].words)
    assert sum(t.count("B-PER") for t in data["train"].tags) == 6_592


def test_bptt_windows_shift_targets_by_one_token():
    data = batchify(torch.arange(23), 2)  # 11 steps x 2 columns
    assert data.shape == (11, 2) and data[:, 1].tolist() == list(range(11, 22))
    windows = list(bptt_windows(data, 4))
    assert [w[0].shape[0] for w in windows] == [4, 4, 2]
    assert all(torch.equal(x[1:], y[:-1]) for x, y in windows)


def test_iwslt15_test_sets_pair_every_line_and_drop_the_byte_order_mark():
    data = load_iwslt15(fetch("iwslt15_en_vi_test"), splits=("tst2012", "tst2013"))
    assert [len(data[s].source) for s in ("tst2012", "tst2013")] == [1553, 1268]
    assert all(len(data[s].target) == len(data[s].source) for s in data)
    assert data["tst2013"].target[0][0][0] != "\ufeff"
    assert data["tst2012"].source[1] == "This is not a finished story .".split()


def test_pad_ids_pads_with_zero_and_keeps_lengths():
    ids, lengths = pad_ids([[5, 6, 7], [8]])
    assert ids.t().tolist() == [[5, 6, 7], [8, 0, 0]] and lengths.tolist() == [3, 1]
