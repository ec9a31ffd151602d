import math

import pytest
import torch

from mlsysrepro.text.baselines import KneserNey, most_frequent_tag, most_frequent_tag_f1, unigram_perplexity
from mlsysrepro.text.corpora import Tagged


def test_unigram_perplexity_is_the_add_one_model():
    train = torch.tensor([0, 0, 0, 1])  # counts 3, 1, 0 over a vocabulary of 3: p = 4/7, 2/7, 1/7
    assert unigram_perplexity(train, torch.tensor([0]), 3) == pytest.approx(7 / 4)
    assert unigram_perplexity(train, torch.tensor([0, 2]), 3) == pytest.approx(math.sqrt(7 / 4 * 7))
    uniform = unigram_perplexity(torch.arange(10), torch.arange(10), 10)
    assert uniform == pytest.approx(10.0)  # every word once: the uniform model, perplexity = V
    with pytest.raises(ValueError, match="non-empty"):
        unigram_perplexity(torch.tensor([], dtype=torch.long), train, 3)


def test_the_most_frequent_tag_baseline_tags_known_words_and_leaves_the_rest_out():
    train = Tagged([["Paris", "is", "in", "France"], ["paris", "Hilton"]],
                   [["B-LOC", "O", "O", "B-LOC"], ["B-PER", "I-PER"]])
    assert most_frequent_tag(train, [["Paris", "Berlin"]]) == [["B-LOC", "O"]]  # 'paris' once each: first seen
    assert most_frequent_tag(train, [["paris"]], lower=False) == [["B-PER"]]
    test = Tagged([["France", "is", "Berlin"]], [["B-LOC", "O", "B-LOC"]])
    assert most_frequent_tag_f1(train, test) == pytest.approx(2 * 1.0 * 0.5 / 1.5 * 100)  # P = 1, R = 1/2


def test_kneser_ney_is_a_distribution_over_the_vocabulary():
    train = torch.tensor([0, 1, 2, 0, 1, 3, 0, 2, 2, 1, 0, 1, 2, 4, 0])
    for order in (1, 2, 3):
        model = KneserNey(train, order, 6)
        for history in ([0, 1], [2, 2], [5, 5], [4, 0]):  # seen, seen, never seen, seen only at the lower order
            probs = torch.cat([model.log_prob(torch.tensor(history[2 - order + 1:] + [w] if order > 1 else [w]))
                               for w in range(6)]).exp()
            assert float(probs.sum()) == pytest.approx(1.0)
            assert bool((probs > 0).all())  # smoothing leaves no word impossible


def test_kneser_ney_uses_the_context_and_the_continuation_counts():
    repeated = torch.tensor([0, 1, 2, 3] * 50)
    bigram, unigram = KneserNey(repeated, 2, 4), KneserNey(repeated, 1, 4)
    assert bigram.perplexity(repeated) < 1.1 < 3.9 < unigram.perplexity(repeated)
    # "francisco" is frequent but follows only "san": its continuation count is 1, so after an unseen history it
    # gets the share of a word seen once, not of a frequent one
    stream = torch.tensor([0, 1] * 20 + [2, 3, 4, 3, 5, 3, 2, 4])  # 0 "san", 1 "francisco", 3 follows three words
    model = KneserNey(stream, 2, 7)  # word 6 never occurs: after it, the continuation counts decide
    francisco, follows_three = (float(model.log_prob(torch.tensor([6, w])).exp()) for w in (1, 3))
    assert francisco < follows_three
    assert int((stream == 1).sum()) > int((stream == 3).sum())  # while a raw unigram would rank them the other way


def test_kneser_ney_rejects_bad_input():
    with pytest.raises(ValueError, match="order"):
        KneserNey(torch.arange(5), 0, 5)
    with pytest.raises(ValueError, match="training tokens"):
        KneserNey(torch.arange(2), 3, 5)
