"""Scheduling policies, split as Blox splits them: admission -> ordering -> placement.

An ordering is a function of a :class:`JobView` (the candidate jobs' columns at time ``now``) that returns one key
per job; lower keys go first, ties go to the earlier arrival. A :class:`Policy` names an admission rule, an
ordering, a placement (:mod:`.placement`) and whether it preempts at lease expiry. :func:`make_policy` builds
the policies of the paper's comparison:

=================  ==========================================  =======================  ==========
policy             ordering                                    placement                preempts
=================  ==========================================  =======================  ==========
``fifo``           arrival                                     tightest free now        no
``srsf``           shortest remaining service (GPU-seconds)    tightest free now        at leases
``tiresias``       2D-LAS: attained GPU-seconds in 2 queues    tightest free now        at leases
``gandiva``        arrival; migrates spread jobs to tighter    tightest free now        no
``themis``         finish-time fairness rho, largest first     tightest free now        at leases
``dally``          progress per held second vs ideal, lowest   delay, auto-tuned        at leases
``dally_fixed``    as ``dally``                                delay, fixed timers      at leases
=================  ==========================================  =======================  ==========

and one ablation (:data:`ABLATIONS`): ``dally_no_migration``, Dally that never moves a running job to a
tighter placement at lease renewal, which says how much of Dally's effect the re-placement carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .placement import Consolidating, DelayScheduling, Placement


@dataclass(frozen=True)
class JobView:
    """The candidate jobs at ``now``: their ids and the columns the orderings read (progress brought up to now)."""

    now: float
    index: np.ndarray
    arrival: np.ndarray
    gpus: np.ndarray
    iterations: np.ndarray
    done: np.ndarray
    attained: np.ndarray  # GPU-seconds held so far
    held: np.ndarray  # seconds the job has held GPUs so far
    ideal_iteration: np.ndarray  # seconds per iteration at the tightest placement
    iteration: np.ndarray  # seconds per iteration where it runs now (ideal when waiting)


def admit_all(view: JobView) -> np.ndarray:
    """Admission: every arrived job may be scheduled (no policy here limits the queue)."""
    return np.ones(len(view.index), dtype=bool)


def fifo(view: JobView) -> np.ndarray:
    return view.arrival


def shortest_remaining_service(view: JobView) -> np.ndarray:
    """SRSF: remaining GPU-seconds at the ideal iteration time."""
    return (view.iterations - view.done) * view.ideal_iteration * view.gpus


def least_attained_service(thresholds: tuple[float, ...]) -> Callable[[JobView], np.ndarray]:
    """Tiresias' discretised 2D-LAS (Gu et al., NSDI'19, Sec. 4.2): a job's queue is the number of thresholds its
    attained service (GPUs x seconds held) has passed; lower queues first, FIFO inside a queue."""
    bounds = np.asarray(thresholds, dtype=float)

    def order(view: JobView) -> np.ndarray:
        return np.searchsorted(bounds, view.attained, side="right").astype(float)

    return order


def finish_time_fairness(view: JobView) -> np.ndarray:
    """Themis (Mahajan et al., NSDI'20): rho = shared finish time / ideal finish time, the largest rho first.
    The shared finish time is the time spent so far plus the remaining iterations at the current speed."""
    elapsed = view.now - view.arrival
    shared = elapsed + (view.iterations - view.done) * view.iteration
    return -shared / (view.iterations * view.ideal_iteration)


def network_progress(view: JobView) -> np.ndarray:
    """Dally's bid (authors' ``mNwSlowdown``): work done per second of GPUs held, relative to the ideal placement,
    ``done x ideal_iteration / held``. The job most slowed by its placements (or by checkpoints) bids lowest and
    wins the GPUs first. A job that has not run yet bids 0, as in the authors' simulator (``mNwSlowdown`` starts
    at 0 and changes only when an iteration ends), so waiting jobs go before running ones, the oldest first."""
    progress = np.zeros(len(view.index))
    ran = view.held > 0
    progress[ran] = view.done[ran] * view.ideal_iteration[ran] / view.held[ran]
    return np.minimum(progress, 1.0)  # nobody beats the ideal: only rounding would say so, and reorder ties


@dataclass
class Policy:
    name: str
    order: Callable[[JobView], np.ndarray]
    placement: Placement
    preemptive: bool
    migrates: bool = False
    admission: Callable[[JobView], np.ndarray] = admit_all
    #: a waiting job's key does not change while it waits (so the simulator ranks it once, :mod:`.queue`)
    waiting_keys_fixed: bool = True


POLICIES = ("fifo", "srsf", "tiresias", "gandiva", "themis", "dally", "dally_fixed")
ABLATIONS = ("dally_no_migration",)


def make_policy(name: str, *, las_threshold: float = 3600.0, rack_wait: float = 6, network_wait: float = 12,
                history: int = 20) -> Policy:
    """A fresh policy (placements keep per-run state). ``las_threshold`` is Tiresias' queue boundary in
    GPU-seconds; ``rack_wait``/``network_wait`` are ``dally_fixed``'s timers in leases; ``history`` is the
    auto-tuner's window H in leases."""
    if name == "fifo":
        return Policy(name, fifo, Consolidating(), preemptive=False)
    if name == "srsf":
        return Policy(name, shortest_remaining_service, Consolidating(), preemptive=True)
    if name == "tiresias":
        return Policy(name, least_attained_service((las_threshold,)), Consolidating(), preemptive=True)
    if name == "gandiva":
        return Policy(name, fifo, Consolidating(), preemptive=False, migrates=True)
    if name == "themis":
        return Policy(name, finish_time_fairness, Consolidating(), preemptive=True, waiting_keys_fixed=False)
    if name == "dally":
        return Policy(name, network_progress, DelayScheduling(history=history), preemptive=True, migrates=True)
    if name == "dally_no_migration":
        return Policy(name, network_progress, DelayScheduling(history=history), preemptive=True)
    if name == "dally_fixed":
        return Policy(name, network_progress, DelayScheduling(rack_wait, network_wait, history), preemptive=True,
                      migrates=True)
    raise ValueError(f"policy must be one of {list(POLICIES + ABLATIONS)}, got {name!r}")
