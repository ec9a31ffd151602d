"""Which ensemble answers each request, and whether it answered right: schedules and replayed accuracy.

Request ``i`` of constraint class ``c`` is the test image ``order[c][i mod n]`` (``order``: a fixed permutation of
the zoo's ``n`` test images per class), so a day of requests cycles through real images, and every answer is the
weighted vote (:func:`~.ensemble.weighted_vote`) of the serving ensemble's real predictions on its image.

- :func:`schedule` — per sampling window and class, the members serving it: the policy's selection for the class,
  pruned by mode (:func:`~.ensemble.prune_by_mode`) on the previous window's requests where the policy prunes. The
  pruning reads the selected members' predictions (never labels) on ``mode_samples`` requests of each second of the
  window, spread evenly over its requests;
- :func:`correct_counts` — per second and class, how many admitted requests were answered right: a cumulative sum
  over each ensemble's correctness in request order, so a cohort of any size costs two look-ups.
"""

from __future__ import annotations

import math

import numpy as np

from .ensemble import Selection, Voter, prune_by_mode


def request_orders(test_images: int, classes: int, seed: int) -> np.ndarray:
    """(classes x images): the order in which each class's requests cycle through the test images."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(test_images) for _ in range(classes)])


def schedule(selections: list[Selection], arrivals: np.ndarray, window: int, models: int, voter: Voter,
             test_predictions: np.ndarray, orders: np.ndarray, pruning: bool, mode_samples: int) -> np.ndarray:
    """(windows x classes x models) bool: the members of each class in each ``window``-second window."""
    seconds, classes = arrivals.shape
    windows = math.ceil(seconds / window)
    members = np.zeros((windows, classes, models), dtype=bool)
    first_request = np.vstack([np.zeros((1, classes), dtype=np.int64), np.cumsum(arrivals, 0)])
    for c, selection in enumerate(selections):
        members[:, c, list(selection.members)] = True
        if not pruning or len(selection.members) == 1:
            continue
        images = orders.shape[1]
        for w in range(1, windows):
            begin, end = first_request[(w - 1) * window, c], first_request[min(w * window, seconds), c]
            count = min(end - begin, mode_samples * window)
            if count == 0:
                continue
            picks = orders[c][(begin + np.linspace(0, end - begin - 1, count).astype(np.int64)) % images]
            kept = prune_by_mode(voter, test_predictions[:, picks], selection.members)
            members[w, c] = False
            members[w, c, list(kept)] = True
    return members


def correct_counts(admitted: np.ndarray, arrivals: np.ndarray, members: np.ndarray, window: int, voter: Voter,
                   test_predictions: np.ndarray, test_labels: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """(seconds x classes): the admitted requests answered right. A second's admitted requests are its first
    ``admitted`` ones (a cohort is admitted or dropped whole)."""
    seconds, classes = arrivals.shape
    images = orders.shape[1]
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
            stop = start + admitted[rows, c]
            def upto(k):  # right answers among requests [0, k) of the class
                return (k // images) * table[-1] + table[k % images]
            correct[rows, c] = upto(stop) - upto(start)
    return correct
