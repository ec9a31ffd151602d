import math

import pytest
import torch

from mlsysrepro.text.baselines import most_frequent_tag, most_frequent_tag_f1, unigram_perplexity
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
