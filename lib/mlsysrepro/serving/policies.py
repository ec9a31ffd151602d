"""Serving policies as Cocktail compares them: model selection + resource management, one flag per mechanism.

| policy | selection | pruning | autoscaling | importance sampling | VMs |
|---|---|---|---|---|---|
| InFaaS (Romero et al., ATC'21), as Cocktail's artifact runs it | the most accurate model meeting the SLO (:func:`~.ensemble.select_most_accurate`) | - | reactive | - | on-demand, one model each |
| InFaaS, cheapest (the INFaaS paper's rule) | the cheapest model meeting both targets (:func:`~.ensemble.select_cheapest`) | - | reactive | - | on-demand, one model each |
| Clipper (Crankshaw et al., NSDI'17) | every model of the pool meeting the SLO | - | reactive | - | on-demand, one model each |
| Clipper-X | Cocktail's (:func:`~.ensemble.select_greedy`) | guarded (:func:`~.ensemble.prune_once`) | reactive | - | on-demand, one model each |
| Cocktail | Cocktail's | guarded | proactive (predictor + MArk's fill/kill) + reactive | yes | spot, on-demand fallback, models packed (:func:`~.fleet.packed`) |

The baselines' autoscaler is the same reactive one for all three (the paper gives Clipper and Clipper-X no resource
manager of their own), so Clipper-X against Clipper isolates selection, and Cocktail against Clipper-X its
resource manager. Ablations switch one of Cocktail's flags off (:func:`make_policy` with overrides).

The scaling rules (:func:`reactive_deficit`, :func:`proactive_target`) are what the simulator calls.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Policy:
    name: str
    selection: str  # one of SELECTIONS
    pruning: bool = False
    proactive: bool = False
    importance: bool = False
    spot: bool = False
    fallback: bool = False  # on a spot VM's revocation warning, launch an on-demand replacement
    packing: bool = False  # several models may share a VM (Config.models_per_vm)


POLICIES = {
    "infaas": Policy("infaas", "most_accurate"),
    "infaas_cheapest": Policy("infaas_cheapest", "cheapest"),
    "clipper": Policy("clipper", "all"),
    "clipper_x": Policy("clipper_x", "greedy", pruning=True),
    "cocktail": Policy("cocktail", "greedy", pruning=True, proactive=True, importance=True, spot=True,
                       fallback=True, packing=True),
}
LABELS = {"infaas": "InFaaS", "infaas_cheapest": "InFaaS (cheapest)", "clipper": "Clipper", "clipper_x": "Clipper-X",
          "cocktail": "Cocktail"}
SELECTIONS = ("most_accurate", "cheapest", "all", "greedy")


def make_policy(name: str, **overrides) -> Policy:
    """A policy of :data:`POLICIES` by name, with flags overridden (``make_policy("cocktail", spot=False)``)."""
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {name!r}")
    flags = ("pruning", "proactive", "importance", "spot", "fallback", "packing")
    unknown = sorted(set(overrides) - set(flags))
    if unknown:
        raise ValueError(f"overrides must be among {', '.join(flags)}; got {unknown}")
    policy = replace(POLICIES[name], **overrides)
    if overrides:
        policy = replace(policy, name=name + "".join(f"-{k}={v}" for k, v in sorted(overrides.items())))
    if policy.selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {policy.selection!r}")
    return policy


def reactive_deficit(rate: np.ndarray, backlog: np.ndarray, provisioned: np.ndarray, utilisation: float,
                     drain_seconds: float) -> np.ndarray:
    """Per model, the capacity (requests/s) to add now: enough for the recent arrival ``rate`` plus draining the
    ``backlog`` within ``drain_seconds``, at the target ``utilisation``, beyond what is ready or booting
    (``provisioned``); zero where nothing is missing."""
    needed = (rate + backlog / drain_seconds) / utilisation
    return np.maximum(needed - provisioned, 0.0)


def proactive_target(forecast_total: float, shares: np.ndarray, utilisation: float) -> np.ndarray:
    """Per model, the capacity the proactive planner provisions for: the forecast arrival rate times the share of
    requests that selected the model (importance sampling; 1 for every model in use without it), at the target
    ``utilisation``."""
    return forecast_total * shares / utilisation
