"""The cost of a ring all-reduce: one formula, shared by the cluster simulator (Dally) and the DDL profiler's
emulated links.

Ring all-reduce is a reduce-scatter and an all-gather (Thakur, Rabenseifner & Gropp, IJHPCA 2005): each of ``p``
participants takes ``2 (p - 1)`` steps, each sending ``1 / p`` of the buffer, so

    T = 2 (p - 1) * latency  +  2 (p - 1) / p * nbytes / bandwidth        (0 for one participant)

Hierarchical all-reduces add one such ring per level of the hierarchy.
"""

from __future__ import annotations


def ring_allreduce_seconds(nbytes: float, participants: int, bandwidth: float, latency: float) -> float:
    """``T`` of the module docstring: ``bandwidth`` in bytes per second, ``latency`` in seconds per step."""
    if participants < 1:
        raise ValueError(f"participants must be >= 1, got {participants}")
    p = participants
    return 2 * (p - 1) * latency + 2 * (p - 1) / p * nbytes / bandwidth
