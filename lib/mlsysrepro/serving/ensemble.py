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
- **Pruning** (:func:`prune_once`), as Cocktail's artifact does it: at the end of each sampling interval, while the
  ensemble answered at least the target plus :data:`PRUNE_MARGIN` of the interval's requests right, the member with
  the fewest right answers is dropped, one per interval.
- **InFaaS' selection**, the paper's single-model baseline, in two readings: :func:`select_most_accurate`, the most
  accurate model meeting the latency SLO, as Cocktail's artifact implements InFaaS (the comparison's); and
  :func:`select_cheapest`, the cheapest model meeting both targets, as the INFaaS paper states it (a variant).

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


def select_most_accurate(voter: Voter, latency_ms: np.ndarray, slo_ms: float, target: float) -> Selection:
    """InFaaS as Cocktail's artifact runs it (jashwantraj92/cocktail, ``modules/naiveSchedule.py`` lines 192-203,
    ``infaas_select_model``): the single most accurate model whose latency meets the SLO, whatever its cost; ``met``
    says whether it reaches ``target``. (The artifact adds a 10 ms margin to the SLO, sized for 40-315 ms ImageNet
    models; our SLOs are set from our own latencies, so none is added.)"""
    candidates = eligible(latency_ms, slo_ms)
    if candidates.size == 0:
        raise ValueError(f"no model meets the latency SLO of {slo_ms} ms (fastest: {np.min(latency_ms):.3g} ms)")
    pick = int(candidates[np.argmax(voter.priority[candidates])])
    return Selection((pick,), float(voter.priority[pick]), bool(voter.priority[pick] >= target))


def select_cheapest(voter: Voter, cost: np.ndarray, latency_ms: np.ndarray, slo_ms: float,
                    target: float) -> Selection:
    """InFaaS as its paper states it (Romero et al., ATC'21, Sec. 4: the cheapest variant meeting the query's
    latency and accuracy): the cheapest single model (``cost`` per request) meeting the SLO and the accuracy target;
    when none reaches the target, the most accurate model meeting the SLO (``met`` false)."""
    candidates = eligible(latency_ms, slo_ms)
    if candidates.size == 0:
        raise ValueError(f"no model meets the latency SLO of {slo_ms} ms (fastest: {np.min(latency_ms):.3g} ms)")
    accurate = candidates[voter.priority[candidates] >= target]
    if accurate.size:
        pick = int(accurate[np.argmin(np.asarray(cost)[accurate])])
        return Selection((pick,), float(voter.priority[pick]), True)
    return select_most_accurate(voter, latency_ms, slo_ms, target)


#: The artifact's accuracy guard: a member is dropped only while the ensemble's accuracy over the interval is at least
#: the target plus 2 points (jashwantraj92/cocktail, ``modules/frontend.py`` line 85).
PRUNE_MARGIN = 0.02


def prune_once(members: tuple[int, ...], right: np.ndarray, ensemble_right: int, requests: int, target: float,
               priority: np.ndarray, margin: float = PRUNE_MARGIN) -> tuple[int, ...]:
    """Cocktail's pruning at the end of one sampling interval, as its artifact does it (``modules/frontend.py``
    lines 80-92, ``vote_based_scaling``): when the ensemble ``members`` answered at least ``target + margin`` of the
    interval's ``requests`` right (``ensemble_right`` of them) and has more than one member, the member with the
    fewest right answers of its own (``right``, one count per model) is dropped; ties drop the least accurate
    (``priority``). One member at most per interval; the artifact never adds one back (its adding branch is
    commented out), so neither does this. The artifact divides the interval's right answers by *every* request of
    the class so far (line 152), which stops pruning after the first interval; this divides by the interval's."""
    if len(members) < 2 or requests == 0 or ensemble_right < (target + margin) * requests:
        return tuple(members)
    drop = min(members, key=lambda m: (right[m], priority[m]))
    return tuple(m for m in members if m != drop)
