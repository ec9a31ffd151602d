import pytest
import torch

from mlsysrepro.core import fetch
from mlsysrepro.text.corpora import (EOS, IWSLT, batchify, bptt_windows, load_conll2003, load_parallel, load_ptb,
                                          pad_ids)


def test_ptb_has_mikolovs_vocabulary_and_token_counts():
    corpus = load_ptb()
    assert len(corpus.vocab) == 10_000 and EOS in corpus.vocab and "<unk>" in corpus.vocab
    # words plus one <eos> per line (887,521 + 42,068 for train, from the files)
    assert (corpus.train.numel(), corpus.valid.numel(), corpus.test.numel()) == (929_589, 73_760, 82_430)


def test_ptb_ids_run_from_the_most_frequent_word_as_an_adaptive_softmax_needs():
    corpus = load_ptb()
    counts = torch.bincount(corpus.train, minlength=len(corpus.vocab))
    assert bool((counts[:-1] >= counts[1:]).all()) and corpus.vocab[:3] == ["the", "<unk>", EOS]
    assert float((corpus.train < 2046).float().mean()) == pytest.approx(0.8715, abs=1e-4)


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
    data = load_parallel(fetch("iwslt15_en_vi_test"), IWSLT["en-vi"], splits=("tst2012", "tst2013"))
    assert [len(data[s].source) for s in ("tst2012", "tst2013")] == [1553, 1268]
    assert all(len(data[s].target) == len(data[s].source) for s in data)
    assert data["tst2013"].target[0][0][0] != "\ufeff"
    assert data["tst2012"].source[1] == "This is not a finished story .".split()


def test_a_de_en_release_reads_german_sources_and_english_targets_and_rejects_unpaired_lines(tmp_path):
    """IWSLT'14 De-En in the layout prepare-iwslt14.sh writes: train/valid/test, one .de and one .en per split."""
    release = IWSLT["de-en"]
    for split in release.splits:
        (tmp_path / f"{split}.de").write_text(f"das ist {split} .\nzwei\n", encoding="utf-8")
        (tmp_path / f"{split}.en").write_text(f"this is {split} .\ntwo\n", encoding="utf-8")
    data = load_parallel(tmp_path, release)
    assert list(data) == ["train", "valid", "test"]
    assert data["valid"].source[0] == ["das", "ist", "valid", "."] and data["valid"].target[1] == ["two"]
    (tmp_path / "test.en").write_text("one line only\n", encoding="utf-8")
    with pytest.raises(ValueError, match="test: 2 de lines but 1 en ones"):
        load_parallel(tmp_path, release)


def test_pad_ids_pads_with_zero_and_keeps_lengths():
    ids, lengths = pad_ids([[5, 6, 7], [8]])
    assert ids.t().tolist() == [[5, 6, 7], [8, 0, 0]] and lengths.tolist() == [3, 1]
