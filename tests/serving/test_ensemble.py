"""Weighted voting on hand cases (ties included), class weights, Cocktail's and InFaaS' selection, pruning by mode."""

import numpy as np
import pytest

from mlsysrepro.serving.ensemble import (PRUNE_MARGIN, Voter, class_weights, prune_once, select_cheapest, select_greedy,
                                         select_most_accurate,
                                         weighted_vote)


def test_class_weights_are_laplace_smoothed_precision_per_predicted_class():
    predictions = np.array([[0, 0, 1, 1]])
    labels = np.array([0, 1, 1, 1])
    weights = class_weights(predictions, labels, 3)
    assert weights[0, 0] == pytest.approx((1 + 1) / (2 + 2))  # predicted 0 twice, right once
    assert weights[0, 1] == pytest.approx((2 + 1) / (2 + 2))
    assert weights[0, 2] == pytest.approx(0.5)  # never predicted


def test_weighted_vote_takes_the_largest_summed_weight_not_the_most_votes():
    predictions = np.array([[1], [1], [2]])
    weights = np.array([[0, 0.3, 0.3], [0, 0.3, 0.3], [0, 0.9, 0.9]])
    assert weighted_vote(predictions, weights, np.array([0.9, 0.8, 0.7])).tolist() == [2]


def test_a_tie_goes_to_the_class_of_the_most_accurate_member_voting_for_a_tied_class():
    predictions = np.array([[3, 3], [5, 5]])
    weights = np.full((2, 10), 0.5)
    assert weighted_vote(predictions, weights, np.array([0.6, 0.9])).tolist() == [5, 5]
    assert weighted_vote(predictions, weights, np.array([0.95, 0.9])).tolist() == [3, 3]
    # a three-way vote: 3 and 5 tie ahead of 7; the most accurate member voted 7, so the next one decides
    predictions = np.array([[7], [3], [5], [3], [5]])
    weights = np.full((5, 10), 0.5)
    assert weighted_vote(predictions, weights, np.array([0.99, 0.5, 0.8, 0.4, 0.3])).tolist() == [5]


def test_weighted_vote_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="one row per member"):
        weighted_vote(np.zeros((2, 3), dtype=int), np.ones((3, 10)), np.ones(2))
    with pytest.raises(ValueError, match="at least one member"):
        weighted_vote(np.zeros((0, 3), dtype=int), np.ones((0, 10)), np.ones(0))


def _zoo(rng, accuracies, n=3000, classes=10):
    labels = rng.integers(classes, size=n)
    predictions = np.stack([np.where(rng.random(n) < a, labels, rng.integers(classes, size=n)) for a in accuracies])
    return predictions, labels


def test_greedy_selection_meets_the_target_on_replayed_predictions_and_respects_the_slo():
    rng = np.random.default_rng(0)
    val, val_labels = _zoo(rng, [0.85, 0.8, 0.8, 0.75, 0.97])
    voter = Voter.fit(val, val_labels)
    latency = np.array([1.0, 1.0, 1.0, 1.0, 10.0])  # the most accurate model misses a 5 ms SLO
    chosen = select_greedy(voter, val, val_labels, latency, slo_ms=5.0, target=0.9)
    assert 4 not in chosen.members and len(chosen.members) > 1
    assert chosen.met and chosen.accuracy >= 0.9
    assert voter.accuracy(val, val_labels, chosen.members) == pytest.approx(chosen.accuracy)
    assert chosen.members[0] == 0, "the most accurate eligible model comes first"
    with pytest.raises(ValueError, match="no model meets the latency SLO"):
        select_greedy(voter, val, val_labels, latency, slo_ms=0.5, target=0.9)


def test_greedy_selection_reports_an_unmet_target_with_its_best_prefix():
    rng = np.random.default_rng(1)
    val, labels = _zoo(rng, [0.6, 0.55])
    voter = Voter.fit(val, labels)
    chosen = select_greedy(voter, val, labels, np.ones(2), 5.0, target=0.99)
    assert not chosen.met and chosen.accuracy < 0.99


def test_infaas_as_its_paper_states_it_picks_the_cheapest_model_meeting_both_targets():
    rng = np.random.default_rng(2)
    val, labels = _zoo(rng, [0.9, 0.95, 0.97])
    voter = Voter.fit(val, labels)
    cost, latency = np.array([1.0, 2.0, 5.0]), np.array([1.0, 2.0, 10.0])
    assert select_cheapest(voter, cost, latency, 20.0, 0.92).members == (1,)
    fallback = select_cheapest(voter, cost, latency, 5.0, 0.99)
    assert fallback.members == (1,) and not fallback.met


def test_infaas_as_cocktails_artifact_runs_it_picks_the_most_accurate_model_within_the_slo_whatever_its_cost():
    rng = np.random.default_rng(2)
    val, labels = _zoo(rng, [0.9, 0.95, 0.97])
    voter = Voter.fit(val, labels)
    latency = np.array([1.0, 2.0, 10.0])
    assert select_most_accurate(voter, latency, 20.0, 0.92).members == (2,), "the cheapest meeting 0.92 is model 1"
    within = select_most_accurate(voter, latency, 5.0, 0.99)
    assert within.members == (1,) and not within.met
    with pytest.raises(ValueError, match="no model meets the latency SLO"):
        select_most_accurate(voter, latency, 0.5, 0.9)


def test_pruning_drops_the_member_with_fewest_right_answers_only_while_the_ensemble_clears_the_guard():
    priority = np.array([0.9, 0.8, 0.7])
    right = np.array([95, 90, 90])
    # 96 of 100 right against a 0.93 target: 0.96 >= 0.93 + 0.02, so the member with fewest right answers goes; of
    # the two tied at 90, the less accurate (model 2)
    assert prune_once((0, 1, 2), right, 96, 100, 0.93, priority) == (0, 1)
    assert prune_once((0, 1, 2), right, 94, 100, 0.93, priority) == (0, 1, 2), "below target + margin: no drop"
    assert prune_once((0, 1, 2), right, 95, 100, 0.93, priority) == (0, 1), "exactly target + margin: a drop"
    assert PRUNE_MARGIN == 0.02
    assert prune_once((1,), right, 100, 100, 0.5, priority) == (1,), "a lone member stays"
    assert prune_once((0, 1), right, 0, 0, 0.5, priority) == (0, 1), "an empty interval prunes nothing"
