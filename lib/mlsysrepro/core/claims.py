"""A paper's claims beside what this run measured, and the run's ``results.json``.

A claim records the paper's statement, the paper's number and where it stands (figure or
table), the value this run measured, and a :class:`Rule` that decides whether the claim
holds. The verdict is computed from the measured value by the rule's code; it is never typed
in. A :class:`Report` collects claims, metrics and figures and writes them to
``<out_dir>/results.json`` with sorted keys and rounded floats, so a rerun with the same seed
gives the same bytes::

    report = Report(settings, title="Minimal Variance Sampling ...")
    report.metric("grad_var_mvs", 0.012)
    report.claim("C1", "MVS has the lowest gradient variance", where="Fig. 2",
                 paper_value="lowest of 6 samplers", measured=rank, rule=at_most(1),
                 note="Reddit/PPI unavailable: measured on Tolokers/CiteSeer")
    report.savefig(fig, "fig2_grad_variance")
    report.save()
"""

from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import plots
from .settings import Settings

#: Significant digits kept for floats in results.json.
SIGNIFICANT_DIGITS = 6


@dataclass(frozen=True)
class Rule:
    """A test of a measured value: ``check(measured) -> bool`` and its text (``measured <= 0.01``)."""

    text: str
    check: Callable[[Any], bool]

    def __call__(self, measured: Any) -> bool:
        if measured is None or (isinstance(measured, float) and math.isnan(measured)):
            return False
        return bool(self.check(measured))


def _compare(symbol: str, op: Callable[[Any, Any], bool], bound: float) -> Rule:
    return Rule(f"measured {symbol} {bound:g}", lambda m: op(m, bound))


def at_most(bound: float) -> Rule:
    """Holds when ``measured <= bound``."""
    return _compare("<=", operator.le, bound)


def at_least(bound: float) -> Rule:
    """Holds when ``measured >= bound``."""
    return _compare(">=", operator.ge, bound)


def below(bound: float) -> Rule:
    """Holds when ``measured < bound``."""
    return _compare("<", operator.lt, bound)


def above(bound: float) -> Rule:
    """Holds when ``measured > bound``."""
    return _compare(">", operator.gt, bound)


def within(low: float, high: float) -> Rule:
    """Holds when ``low <= measured <= high``."""
    return Rule(f"{low:g} <= measured <= {high:g}", lambda m: low <= m <= high)


def is_true() -> Rule:
    """Holds when the measured value is ``True`` (for claims that are a yes/no computed by code)."""
    return Rule("measured is True", lambda m: m is True)


def round_floats(value: Any, digits: int = SIGNIFICANT_DIGITS) -> Any:
    """Round every float in a nested structure to ``digits`` significant digits (NaN -> None)."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {str(k): round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_floats(v, digits) for v in value]
    if hasattr(value, "tolist"):  # numpy / torch scalars and arrays
        return round_floats(value.tolist(), digits)
    raise TypeError(f"cannot store {type(value).__name__} in results.json: {value!r}")


class Report:
    """Claims, metrics and figures of one run, saved as ``results.json`` beside the figures."""

    def __init__(self, settings: Settings, title: str):
        self.settings = settings
        self.title = title
        self.metrics: dict[str, Any] = {}
        self.timings: dict[str, Any] = {}
        self.claims: list[dict[str, Any]] = []
        self.figures: list[str] = []

    @property
    def out_dir(self) -> Path:
        return self.settings.out_dir

    def metric(self, name: str, value: Any, timing: bool = False) -> Any:
        """Record a measured quantity (a number, or a nested dict/list of numbers).

        ``timing=True`` files a wall-clock measurement under ``timings``: the one part of
        results.json allowed to differ between two runs with the same seed.
        """
        (self.timings if timing else self.metrics)[name] = round_floats(value)
        return value

    def claim(
        self,
        id: str,
        statement: str,
        *,
        where: str,
        paper_value: Any,
        measured: Any,
        rule: Rule,
        note: str = "",
        timing: bool = False,
    ) -> bool:
        """Record one of the paper's claims; returns whether it holds (``rule(measured)``).

        ``timing=True`` marks a claim measured in wall-clock time, whose value may change between runs.
        """
        if any(c["id"] == id for c in self.claims):
            raise ValueError(f"claim id {id!r} recorded twice")
        holds = rule(measured)
        self.claims.append(
            {
                "id": id,
                "statement": statement,
                "where": where,
                "paper_value": round_floats(paper_value),
                "measured": round_floats(measured),
                "rule": rule.text,
                "holds": holds,
                "scale": self.settings.scale,
                "note": note,
                "timing": timing,
            }
        )
        return holds

    def savefig(self, fig, name: str) -> Path:
        """Save ``fig`` as ``<out_dir>/<name>.png`` and ``.svg`` and list it in results.json."""
        path = plots.savefig(fig, self.out_dir, name)
        if name not in self.figures:
            self.figures.append(name)
        return path

    def table(self):
        """The claims as a pandas DataFrame, for display at the end of a notebook."""
        import pandas as pd

        columns = ["id", "where", "statement", "paper_value", "measured", "rule", "holds", "note"]
        return pd.DataFrame([{k: c[k] for k in columns} for c in self.claims], columns=columns).set_index("id")

    def to_dict(self) -> dict[str, Any]:
        s = self.settings
        return {
            "paper": s.paper,
            "title": self.title,
            "scale": s.scale,
            "seed": s.seed,
            "settings": round_floats(s.to_dict()),
            "metrics": self.metrics,
            "timings": self.timings,
            "claims": self.claims,
            "figures": [f"{name}.png" for name in self.figures],
        }

    def save(self) -> Path:
        """Write ``results.json`` atomically; returns its path."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / "results.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        tmp.replace(path)
        return path


def load_results(path: Path) -> dict[str, Any]:
    """Read a ``results.json`` written by :meth:`Report.save`."""
    return json.loads(Path(path).read_text())


def without_timings(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` less what wall-clock time decides: what two runs with one seed must agree on."""
    kept = {k: v for k, v in results.items() if k != "timings"}
    kept["claims"] = [
        {k: v for k, v in c.items() if not (c["timing"] and k in ("measured", "holds", "note"))}
        for c in results["claims"]
    ]
    return kept
