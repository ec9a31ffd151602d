"""The measurement-based recommender: the cheapest configuration that trains within a time budget.

For each configuration ``i`` with measured hours per epoch ``T_i`` and price ``P_i`` $/h, training ``E`` epochs
costs ``P_i T_i E`` and takes ``T_i E``. The recommendation is ``argmin_i P_i T_i E`` subject to
``T_i E <= budget`` (ties go to the faster one); if no configuration meets the budget the answer says so and
names the fastest one instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class Recommendation:
    choice: str | None  # None: nothing meets the budget
    hours: float  # of the choice, or of the fastest configuration when none meets the budget
    cost: float
    fastest: str
    budget_hours: float

    @property
    def feasible(self) -> bool:
        return self.choice is not None

    def __str__(self) -> str:
        if self.feasible:
            return f"{self.choice}: {self.hours:.3g} h, ${self.cost:.3g}"
        return (f"none meets the {self.budget_hours:.3g} h budget; the fastest, {self.fastest}, "
                f"needs {self.hours:.3g} h (${self.cost:.3g})")


def recommend(hours_per_epoch: Mapping[str, float], price_per_hour: Mapping[str, float], epochs: float,
              budget_hours: float) -> Recommendation:
    """See the module docstring. Both mappings are keyed by configuration name."""
    if not hours_per_epoch:
        raise ValueError("hours_per_epoch is empty: measure at least one configuration")
    missing = sorted(set(hours_per_epoch) - set(price_per_hour))
    if missing:
        raise ValueError(f"no price for configuration(s) {missing}")
    if epochs <= 0 or budget_hours <= 0:
        raise ValueError(f"epochs and budget_hours must be > 0, got {epochs} and {budget_hours}")
    hours = {name: t * epochs for name, t in hours_per_epoch.items()}
    cost = {name: hours[name] * price_per_hour[name] for name in hours}
    fastest = min(hours, key=lambda n: (hours[n], cost[n]))
    feasible = [n for n in hours if hours[n] <= budget_hours]
    if not feasible:
        return Recommendation(None, hours[fastest], cost[fastest], fastest, budget_hours)
    best = min(feasible, key=lambda n: (cost[n], hours[n]))
    return Recommendation(best, hours[best], cost[best], fastest, budget_hours)
