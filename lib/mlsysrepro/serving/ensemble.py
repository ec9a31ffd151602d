"""Ensembles: weighted majority voting, Cocktail's model selection, and its mode-based pruning.

Cocktail (Gunasekaran et al., NSDI'22, Sec. 4.1) answers a query with an ensemble chosen for the query's
(latency, accuracy) constraint:

- **Weighted majority voting** (:func:`weighted_vote`): each member votes for its predicted class with a weight
  for that class (:func:`class_weights`: how often the member is right when it predicts that class, on the
  validation split); the answer is the class with the largest summed weight. **Tie rule**: among the classes tied
  for the largest sum, the one voted for by the most accurate member that voted for any of them.
- **Selection** (:func:`select_greedy`): the models whose latency meets the SLO, taken in order of accuracy, are
  added one at a time until the ensemble's accuracy (measured here on real validation predictions, where
  Cocktail's code draws Bernoulli correctness vectors) reaches the target.
- **Pruning** (:func:`prune_by_mode`): over a sampling interval, a member whose vote never changes the ensemble's
  answer (the weighted mode) on the requests of that interval is dropped, least accurate first.
- **InFaaS' selection** (:func:`select_single`), the paper's single-model baseline: the cheapest model meeting
  both targets, else the most accurate model meeting the latency SLO.

Members are given as index arrays into the zoo's models; predictions as (models x images) integer arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def class_weights(predictions: np.ndarray, labels: np.ndarray, classes: int) -> np.ndarray:
    """(models x classes) per-class weights: the share of a model's votes for class c that are right, with one
    right and one wrong pseudo-vote (Laplace), so a class the model never predicts weighs 0.5."""
    predictions = np.asarray(predictions)
    if predictions.ndim != 2 or predictions.shape[1] != len(labels):
        raise ValueError(f"predictions must be (models, {len(labels)} images), got shape {predictions.shape}")
    votes = np.zeros((len(predictions), classes))
    right = np.zeros((len(predictions), classes))
    rows = np.repeat(np.arange(len(predictions)), predictions.shape[1])
    np.add.at(votes, (rows, predictions.ravel()), 1.0)
    np.add.at(right, (rows, predictions.ravel()), (predictions == labels).ravel().astype(float))
    return (right + 1.0) / (votes + 2.0)


def weighted_vote(predictions: np.ndarray, weights: np.ndarray, priority: np.ndarray) -> np.ndarray:
    """The ensemble's answer per image: the class with the largest summed per-class weight of the members voting
    for it; ties go to the class of the highest-``priority`` member voting for a tied class.

    ``predictions`` (members x images), ``weights`` (members x classes), ``priority`` (members; the models'
    validation accuracy)."""
    predictions = np.asarray(predictions)
    members, images = predictions.shape
    if members == 0:
        raise ValueError("weighted_vote needs at least one member")
    if len(weights) != members or len(priority) != members:
        raise ValueError(f"weights and priority need one row per member ({members}), got {len(weights)} and "
                         f"{len(priority)}")
    scores = np.zeros((images, weights.shape[1]))
    columns = np.arange(images)
    for member in range(members):  # a member votes once per image, so plain fancy-index addition is exact
        scores[columns, predictions[member]] += weights[member, predictions[member]]
    best = scores.max(1, keepdims=True)
    tied = scores >= best - 1e-12  # (images, classes)
    order = np.argsort(-np.asarray(priority), kind="stable")
    voted_tied = tied[np.arange(images)[None, :], predictions[order]]  # (members by priority, images)
    first = voted_tied.argmax(0)  # the first member in priority order whose class is tied for the largest sum
    return predictions[order][first, np.arange(images)]


@dataclass(frozen=True)
class Voter:
    """What voting needs from a zoo: per-model class weights and priorities (validation accuracy)."""

    weights: np.ndarray
    priority: np.ndarray

    @classmethod
    def fit(cls, val_predictions: np.ndarray, val_labels: np.ndarray, classes: int = 10) -> "Voter":
        return cls(class_weights(val_predictions, val_labels, classes), (val_predictions == val_labels).mean(1))

    def vote(self, predictions: np.ndarray, members) -> np.ndarray:
        """The answers of the ensemble ``members`` (model indices) from all models' ``predictions``."""
        members = np.asarray(members)
        return weighted_vote(predictions[members], self.weights[members], self.priority[members])

    def accuracy(self, predictions: np.ndarray, labels: np.ndarray, members) -> float:
        return float((self.vote(predictions, members) == labels).mean())


@dataclass(frozen=True)
class Selection:
    """An ensemble chosen for one constraint: its members, its validation accuracy, and whether it met the
    accuracy target."""

    members: tuple[int, ...]
    accuracy: float
    met: bool


def eligible(latency_ms: np.ndarray, slo_ms: float) -> np.ndarray:
    """The models whose service latency meets the SLO."""
    return np.flatnonzero(np.asarray(latency_ms) <= slo_ms)


def select_greedy(voter: Voter, val_predictions: np.ndarray, val_labels: np.ndarray, latency_ms: np.ndarray,
                  slo_ms: float, target: float) -> Selection:
    """Cocktail's selection: the models meeting the latency SLO, most accurate first, added one at a time until
    the weighted vote's validation accuracy reaches ``target``; when it never does, the prefix with the best
    accuracy (``met`` false). No model meets the SLO: ``ValueError``."""
    candidates = eligible(latency_ms, slo_ms)
    if candidates.size == 0:
        raise ValueError(f"no model meets the latency SLO of {slo_ms} ms (fastest: {np.min(latency_ms):.3g} ms)")
    ranked = candidates[np.argsort(-voter.priority[candidates], kind="stable")]
    best = None
    for size in range(1, len(ranked) + 1):
        accuracy = voter.accuracy(val_predictions, val_labels, ranked[:size])
        if best is None or accuracy > best.accuracy:
            best = Selection(tuple(int(m) for m in ranked[:size]), accuracy, accuracy >= target)
        if accuracy >= target:
            return best
    return best


def select_single(voter: Voter, cost: np.ndarray, latency_ms: np.ndarray, slo_ms: float,
                  target: float) -> Selection:
    """InFaaS' selection: the cheapest single model (``cost`` per request) meeting the SLO and the accuracy target;
    when none reaches the target, the most accurate model meeting the SLO (``met`` false)."""
    candidates = eligible(latency_ms, slo_ms)
    if candidates.size == 0:
        raise ValueError(f"no model meets the latency SLO of {slo_ms} ms (fastest: {np.min(latency_ms):.3g} ms)")
    accurate = candidates[voter.priority[candidates] >= target]
    if accurate.size:
        pick = int(accurate[np.argmin(np.asarray(cost)[accurate])])
        return Selection((pick,), float(voter.priority[pick]), True)
    pick = int(candidates[np.argmax(voter.priority[candidates])])
    return Selection((pick,), float(voter.priority[pick]), False)


def prune_by_mode(voter: Voter, window_predictions: np.ndarray, members) -> tuple[int, ...]:
    """Cocktail's pruning over one sampling interval: drop, least accurate first, each member whose removal leaves
    the ensemble's answer unchanged on every request of the window (``window_predictions``: all models x the
    window's images); at least one member stays."""
    kept = list(members)
    if not kept or window_predictions.shape[1] == 0:
        return tuple(kept)
    answers = voter.vote(window_predictions, kept)
    for member in sorted(kept, key=lambda m: voter.priority[m]):
        if len(kept) == 1:
            break
        without = [m for m in kept if m != member]
        if np.array_equal(voter.vote(window_predictions, without), answers):
            kept = without
    return tuple(kept)
