import math

import pytest

from mlsysrepro.text.bleu import corpus_bleu


def test_a_perfect_translation_scores_100():
    ref = "the cat sat on the mat".split()
    assert corpus_bleu([ref], [ref])["bleu"] == pytest.approx(100.0)


def test_clipped_precisions_and_brevity_penalty_by_hand():
    """Papineni's example: 'the the the the the the the' against 'the cat is on the mat' has a clipped unigram
    precision of 2/7; here with a hand-checked bigram-level case."""
    hyp, ref = "the cat the cat on the mat".split(), "the cat is on the mat".split()
    result = corpus_bleu([hyp], [ref])
    # unigrams: the x3 (ref has 2) -> 2, cat x2 (ref 1) -> 1, on 1, mat 1: 5 of 7
    # bigrams: the-cat x2 (ref 1) -> 1, cat-the 0, cat-on 0, on-the 1, the-mat 1: 3 of 6
    # trigrams: on-the-mat 1 of 5; 4-grams: 0 of 4 -> BLEU 0
    assert result["precisions"][:3] == pytest.approx([500 / 7, 50.0, 20.0])
    assert result["bleu"] == 0.0 and result["brevity_penalty"] == 1.0
    short = corpus_bleu(["on the mat".split()], [ref])
    assert short["brevity_penalty"] == pytest.approx(math.exp(1 - 6 / 3))


def test_counts_pool_over_the_corpus_not_per_sentence():
    hyps = ["a b c d".split(), "x y z w".split()]
    refs = ["a b c d".split(), "p q r s".split()]
    result = corpus_bleu(hyps, refs)
    assert result["precisions"] == pytest.approx([50.0, 50.0, 50.0, 50.0])
    assert result["bleu"] == pytest.approx(50.0)


def test_mismatched_lengths_are_rejected():
    with pytest.raises(ValueError, match="hypotheses"):
        corpus_bleu([["a"]], [])
