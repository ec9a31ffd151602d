"""Which ensemble answers each request, and whether it answered right: schedules and replayed accuracy.

Request ``i`` of constraint class ``c`` is the test image ``order[c][i mod n]`` (``order``: a fixed permutation of
the zoo's ``n`` test images per class), so a day of requests cycles through real images, and every answer is the
weighted vote (:func:`~.ensemble.weighted_vote`) of the serving ensemble's real predictions on its image.

- :func:`schedule` — per sampling window and class, the members serving it: the policy's selection for the class,
  pruned where the policy prunes (:func:`~.ensemble.prune_once`) at the end of each window from the right answers
  of that window's requests, as Cocktail's artifact reads them (its frontend checks each answer against the ground
  truth, ``modules/frontend.py`` lines 48-61); a dropped member stays dropped;
- :func:`correct_counts` — per second and class, how many admitted requests were answered right: a cumulative sum
  over each ensemble's correctness in request order, so a cohort of any size costs two look-ups.
"""

from __future__ import annotations

import math

import numpy as np

from .ensemble import PRUNE_MARGIN, Selection, Voter, prune_once


def request_orders(test_images: int, classes: int, seed: int) -> np.ndarray:
    """(classes x images): the order in which each class's requests cycle through the test images."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(test_images) for _ in range(classes)])


def _right_before(table: np.ndarray, k):
    """Right answers among a class's requests ``[0, k)``, from ``table``, the cumulative count over one cycle of its
    test images (last axis: images + 1 entries): whole cycles, then the part of the next."""
    images = table.shape[-1] - 1
    return (k // images) * table[..., -1] + table[..., k % images]


def schedule(selections: list[Selection], arrivals: np.ndarray, window: int, models: int, voter: Voter,
             test_predictions: np.ndarray, test_labels: np.ndarray, orders: np.ndarray, targets: np.ndarray,
             pruning: bool, margin: float = PRUNE_MARGIN) -> np.ndarray:
    """(windows x classes x models) bool: the members of each class in each ``window``-second window. With
    ``pruning``, class ``c``'s ensemble enters each window as :func:`~.ensemble.prune_once` left it after the window
    before, judged on that window's arrived requests against ``targets[c]`` plus ``margin``."""
    seconds, classes = arrivals.shape
    windows = math.ceil(seconds / window)
    members = np.zeros((windows, classes, models), dtype=bool)
    first_request = np.vstack([np.zeros((1, classes), dtype=np.int64), np.cumsum(arrivals, 0)])
    own_right = (test_predictions == test_labels).astype(np.int64)  # models x images
    for c, selection in enumerate(selections):
        kept = tuple(selection.members)
        if not pruning or len(kept) == 1:
            members[:, c, list(kept)] = True
            continue
        cycle = np.zeros((models, orders.shape[1] + 1), dtype=np.int64)
        cycle[:, 1:] = np.cumsum(own_right[:, orders[c]], axis=1)
        ensembles: dict[tuple, np.ndarray] = {}
        members[0, c, list(kept)] = True
        for w in range(1, windows):
            begin, end = first_request[(w - 1) * window, c], first_request[min(w * window, seconds), c]
            if len(kept) > 1 and end > begin:
                if kept not in ensembles:
                    right = (voter.vote(test_predictions, kept) == test_labels)[orders[c]]
                    ensembles[kept] = np.concatenate([[0], np.cumsum(right)])
                table = ensembles[kept]
                kept = prune_once(kept, _right_before(cycle, end) - _right_before(cycle, begin),
                                  int(_right_before(table, end) - _right_before(table, begin)), int(end - begin),
                                  float(targets[c]), voter.priority, margin)
            members[w, c, list(kept)] = True
    return members


def correct_counts(admitted: np.ndarray, arrivals: np.ndarray, members: np.ndarray, window: int, voter: Voter,
                   test_predictions: np.ndarray, test_labels: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """(seconds x classes): the admitted requests answered right. A second's admitted requests are its first
    ``admitted`` ones (a cohort is admitted or dropped whole)."""
    seconds, classes = arrivals.shape
    first_request = np.vstack([np.zeros((1, classes), dtype=np.int64), np.cumsum(arrivals, 0)[:-1]])
    window_of = np.arange(seconds) // window
    correct = np.zeros((seconds, classes), dtype=np.int64)
    cumulative: dict[tuple, np.ndarray] = {}
    for c in range(classes):
        sets = members[:, c]
        keys, inverse = np.unique(sets, axis=0, return_inverse=True)
        for index, key in enumerate(keys):
            ensemble = tuple(np.flatnonzero(key))
            if (ensemble, c) not in cumulative:
                right = voter.vote(test_predictions, ensemble) == test_labels
                cumulative[ensemble, c] = np.concatenate([[0], np.cumsum(right[orders[c]])])
            table = cumulative[ensemble, c]
            rows = np.flatnonzero(inverse.ravel()[window_of] == index)
            start = first_request[rows, c]
            correct[rows, c] = _right_before(table, start + admitted[rows, c]) - _right_before(table, start)
    return correct
