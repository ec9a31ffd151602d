"""Replayed accuracy from real predictions, and ensemble schedules with and without pruning."""

import numpy as np
import pytest

from mlsysrepro.serving.ensemble import Selection, Voter
from mlsysrepro.serving.replay import correct_counts, request_orders, schedule


def setup(seed=0, images=50, models=3):
    rng = np.random.default_rng(seed)
    labels = rng.integers(10, size=images)
    predictions = np.stack([np.where(rng.random(images) < a, labels, (labels + 1) % 10) for a in (0.9, 0.7, 0.6)])
    voter = Voter.fit(predictions, labels)
    return predictions, labels, voter


def test_one_model_replayed_over_whole_cycles_scores_its_test_accuracy():
    predictions, labels, voter = setup()
    arrivals = np.full((20, 1), 25)  # 500 requests: ten cycles through 50 images
    members = np.zeros((2, 1, 3), dtype=bool)
    members[:, 0, 0] = True
    orders = request_orders(50, 1, 0)
    correct = correct_counts(arrivals, arrivals, members, 10, voter, predictions, labels, orders)
    assert correct.sum() / arrivals.sum() == pytest.approx((predictions[0] == labels).mean())
    half = np.where(np.arange(20)[:, None] % 2 == 0, arrivals, 0)  # drop every other second
    assert correct_counts(half, arrivals, members, 10, voter, predictions, labels, orders).sum() < correct.sum()


def test_counts_match_a_request_by_request_replay():
    predictions, labels, voter = setup(1)
    rng = np.random.default_rng(2)
    arrivals = rng.integers(0, 40, size=(30, 1))
    admitted = np.where(rng.random((30, 1)) < 0.8, arrivals, 0)
    members = np.zeros((3, 1, 3), dtype=bool)
    members[0, 0, :] = True
    members[1, 0, [0, 2]] = True
    members[2, 0, [1]] = True
    orders = request_orders(50, 1, 3)
    fast = correct_counts(admitted, arrivals, members, 10, voter, predictions, labels, orders)
    slow, request = np.zeros_like(fast), 0
    for second in range(30):
        ensemble = np.flatnonzero(members[second // 10, 0])
        for k in range(arrivals[second, 0]):
            image = orders[0][(request + k) % 50]
            if k < admitted[second, 0]:
                slow[second, 0] += voter.vote(predictions[:, [image]], ensemble)[0] == labels[image]
        request += arrivals[second, 0]
    assert np.array_equal(fast, slow)


def test_schedules_keep_the_selection_without_pruning_and_prune_one_member_a_window_while_the_guard_allows():
    rng = np.random.default_rng(0)
    labels = rng.integers(10, size=50)
    # two models always right, a third guessing: the ensemble is right on every request, the guesser least often
    predictions = np.stack([labels, labels, rng.integers(10, size=50)])
    voter = Voter.fit(predictions, labels)
    arrivals = np.full((60, 1), 10)
    chosen = [Selection((0, 1, 2), 0.9, True)]
    orders = request_orders(50, 1, 0)
    targets = np.array([0.9])
    fixed = schedule(chosen, arrivals, 10, 3, voter, predictions, labels, orders, targets, pruning=False)
    assert fixed.shape == (6, 1, 3) and fixed.all()
    pruned = schedule(chosen, arrivals, 10, 3, voter, predictions, labels, orders, targets, pruning=True)
    assert pruned[0].all(), "the first window has no previous one to prune by"
    assert pruned[1, 0].tolist() == [True, True, False], "after one window the guesser goes"
    assert pruned[2:, 0].sum(1).tolist() == [1] * 4, "then a second member, and one always stays"
    assert np.all(pruned <= fixed)
    # a target the ensemble cannot clear by the 2-point margin: nothing is ever dropped
    strict = schedule(chosen, arrivals, 10, 3, voter, predictions, labels, orders, np.array([0.99]), pruning=True)
    assert strict.all()
