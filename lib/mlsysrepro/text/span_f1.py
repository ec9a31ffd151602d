"""Span-level precision, recall and F1 for BIO/IOB tags: the rule of CoNLL's ``conlleval`` script.

A chunk of type X starts at ``B-X``, or at ``I-X`` after ``O`` or after a chunk of another type
(so both IOB1 and IOB2 files are read right), and ends before the next ``B-``, ``O`` or change of
type. A predicted chunk counts as correct only if its start, end and type all equal a true chunk's.
"""

from __future__ import annotations


def chunks(tags: list[str]) -> set[tuple[int, int, str]]:
    """The (start, end exclusive, type) chunks of one sentence's tags."""
    found, start, kind = set(), None, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, label = tag.partition("-")
        if start is not None and (prefix in ("O", "B") or label != kind):
            found.add((start, i, kind))
            start = None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = i, label
    return found


def span_f1(true: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    """Micro-averaged span precision, recall and F1 (in %) over sentences, as conlleval reports them."""
    if len(true) != len(predicted) or any(len(t) != len(p) for t, p in zip(true, predicted)):
        raise ValueError("true and predicted tags must have the same sentences and lengths")
    correct = n_true = n_pred = 0
    for t, p in zip(true, predicted):
        gold, guess = chunks(t), chunks(p)
        correct += len(gold & guess)
        n_true += len(gold)
        n_pred += len(guess)
    precision = 100.0 * correct / n_pred if n_pred else 0.0
    recall = 100.0 * correct / n_true if n_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
