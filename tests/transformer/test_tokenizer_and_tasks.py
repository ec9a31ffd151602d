"""Tokenizers round-trip and merge what they should; retrieval sequences hold the records their queries ask for;
the training loss weights answers."""

from collections import Counter

import pytest
import torch

from mlsysrepro.transformer.retrieval import (KEY_DIGITS, RECORD_LEN, TASK_ALPHABET, VALUE_DIGITS, retrieval_batch,
                                              text_windows)
from mlsysrepro.transformer.tokenizer import _WORD, BPETokenizer, CharTokenizer, _merge

TEXT = "the cat sat on the mat. the hat? that cat!\n" * 20


def test_char_tokenizer_round_trips_and_names_unknown_characters():
    tok = CharTokenizer(TEXT + TASK_ALPHABET)
    ids = tok.encode("the {123:4567} cat")
    assert tok.decode(ids) == "the {123:4567} cat" and ids.dtype == torch.long
    with pytest.raises(ValueError, match="'Z'"):
        tok.encode("Zebra")


def test_bpe_merges_the_most_frequent_pair_first_and_never_merges_digits():
    tok = BPETokenizer.train(TEXT + "1234 1234 1234", vocab_size=40, alphabet=TASK_ALPHABET)
    assert tok.merges[0] in {(" ", "t"), ("t", "h"), ("a", "t")}
    counts = {pair: TEXT.count("".join(pair)) for pair in [(" ", "t"), ("t", "h"), ("a", "t")]}
    assert counts[tok.merges[0]] == max(counts.values())
    assert all(not any(c.isdigit() for c in a + b) for a, b in tok.merges)
    sample = "the cat {321:9876} sat that hat"
    ids = tok.encode(sample)
    assert tok.decode(ids) == sample
    assert len(ids) < len(sample)  # merges shorten text
    digits = tok.encode("{321:9876}")
    assert len(digits) == RECORD_LEN


def merges_by_recounting(text, vocab_size):
    """BPE by its definition: recount every adjacent pair inside words before each merge; ties go to the pair seen
    first in that count (the first word holding it, then its place there)."""
    words = Counter(_WORD.findall(text))
    pieces = {word: list(word) for word in words}
    merges, budget = [], vocab_size - len(set(text))
    while len(merges) < budget:
        pairs = Counter()
        for word, count in words.items():
            for pair in zip(pieces[word], pieces[word][1:]):
                pairs[pair] += count
        if not pairs or max(pairs.values()) < 2:
            break
        merges.append(max(pairs, key=pairs.get))  # the first pair of the highest count, in insertion order
        pieces = {word: _merge(p, merges[-1]) for word, p in pieces.items()}
    return merges


@pytest.mark.parametrize("text, vocab_size", [
    (TEXT, 60),  # runs until no pair repeats
    ("aaaa bbbb abab baba aabb bbaa " * 3 + "ab ba", 40),  # a word that holds a pair twice; many ties
    ("the then there thereof other another " * 2 + "x" * 7, 50),
])
def test_bpe_keeps_its_pair_counts_up_to_date_and_merges_as_if_it_recounted(text, vocab_size):
    assert BPETokenizer.train(text, vocab_size).merges == merges_by_recounting(text, vocab_size)


def test_bpe_encodes_a_text_as_its_words_segmented_one_by_one():
    tok = BPETokenizer.train(TEXT, vocab_size=50)
    text = "the cat that sat. the mat hat?"
    one_by_one = [i for word in _WORD.findall(text) for i in tok.encode(word).tolist()]
    assert tok.encode(text).tolist() == one_by_one and tok.decode(tok.encode(text)) == text


def test_bpe_vocab_smaller_than_the_alphabet_is_rejected():
    with pytest.raises(ValueError, match="vocab_size"):
        BPETokenizer.train(TEXT, vocab_size=3)


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer(TEXT + TASK_ALPHABET)


def test_queries_ask_for_records_that_hold_their_values(tok):
    haystack = tok.encode(TEXT * 3)
    b = retrieval_batch(haystack, tok, n=16, length=120, n_records=4, n_queries=2,
                        generator=torch.Generator().manual_seed(0))
    assert b.tokens.shape == (16, 120)
    for row, start in zip(b.tokens, b.record_start):
        text = tok.decode(row)
        records = [text[i:i + RECORD_LEN] for i in range(len(text)) if text[i] == "{"]
        assert len(records) == 4 and len({r[1:1 + KEY_DIGITS] for r in records}) == 4  # distinct keys
        queries = text[120 - 2 * RECORD_LEN:]
        for j in range(2):
            q = queries[j * RECORD_LEN:(j + 1) * RECORD_LEN]
            assert "{" + q[1:-1] + "}" in records
        assert text[start:start + RECORD_LEN] == "{" + queries[1:RECORD_LEN - 1] + "}"
        a = 120 - 2 * RECORD_LEN + KEY_DIGITS + 2
        assert text[a:a + VALUE_DIGITS] == queries[KEY_DIGITS + 2:KEY_DIGITS + 2 + VALUE_DIGITS]
    assert b.answer_start == 120 - 2 * RECORD_LEN + KEY_DIGITS + 2
    assert int(b.answer_mask.sum()) == 16 * 2 * VALUE_DIGITS


def test_a_needle_sits_at_the_requested_depth(tok):
    haystack = tok.encode(TEXT * 3)
    for depth, where in ((0.0, 0), (1.0, 100 - 2 * RECORD_LEN)):
        b = retrieval_batch(haystack, tok, n=2, length=100, depth=depth)
        assert (b.record_start == where).all()
        assert tok.decode(b.tokens[0, where:where + 1]) == "{"
    with pytest.raises(ValueError, match="depth"):
        retrieval_batch(haystack, tok, n=2, length=100, n_records=2, depth=0.5)


def test_evaluation_windows_are_fixed_and_training_windows_random():
    ids = torch.arange(1000)
    fixed = text_windows(ids, 10, 5)
    assert torch.equal(fixed, text_windows(ids, 10, 5)) and fixed[0, 0] == 0 and fixed[-1, -1] == 998
    a = text_windows(ids, 10, 5, torch.Generator().manual_seed(1))
    assert torch.equal(a[:, 1:] - a[:, :-1], torch.ones(5, 9, dtype=torch.long))
