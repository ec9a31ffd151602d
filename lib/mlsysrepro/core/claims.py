"""A paper's claims: declared before the run, judged by their rule on what the run measured.

A paper module declares its claims next to its presets, before anything runs (:class:`Claim`):
the statement, where the paper makes it, the paper's value *in the unit we measure*, the
:class:`Rule` written from the paper, and the settings the rule runs over. A quantity that is
fixed by how this reproduction is built is declared as a consistency check
(``kind=CONSISTENCY``) and counted apart from the paper's claims::

    CLAIMS = (
        Claim("C1", "Dally improves makespan over Tiresias on the traces", where="Abstract, Sec. 6",
              paper_value=0.69, unit="makespan gain over Tiresias (share)", rule=above(0.0),
              over="every trace of `traces`", min_share=2 / 3, near=0.5),
    )

The notebook measures (a paper-module function returning a :class:`Measurement`) and judges::

    report = Report(settings, title="...", claims=dally.CLAIMS)
    report.judge("C1", across(dally.makespan_gain(table)))
    report.save()

A verdict has four values (:func:`verdict`): ``holds``, ``fails``, ``inconclusive`` (the
measurement's interval, from seeds, timing repeats or a bootstrap over settings, straddles the
rule's threshold) and ``not testable here`` (with the reason). A claim over several settings
(``min_share``) holds only where the rule passes on at least that share of them *and* for the
median effect; a claim that a method beats a baseline holds only if the same rule fails for the
baseline. Verdicts are computed, never typed in.

A verdict must be evidence about the paper, not about a weak experiment of ours. So a claim declares its *power
preconditions* (:class:`Precondition`: a positive control showing the effect is detectable at this scale, e.g.
compression must cost measurable quality); where one is not met the claim is *not testable at this scale*, with the
precondition's numbers, never "fails". A claim resting on a modelling choice of ours declares it (:class:`Assumption`,
a central value, a range and its source); the claim is judged at the central value and re-judged over the range
(:func:`robustness`). Each claim has a *kind* (:data:`KINDS`): the paper's own claims make a paper's status;
analogues (a paper claim measured on another platform or quantity), our findings and consistency checks are shown
apart. :meth:`Report.save` writes
``<out_dir>/results.json`` with sorted keys and rounded floats, so a rerun with one seed gives the
same bytes; it refuses to write while a declared claim is unjudged.
"""

from __future__ import annotations

import errno
import json
import math
import operator
import os
import shutil
import time
import uuid
import warnings
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import paths
from .settings import Settings

#: Significant digits kept for floats in results.json.
SIGNIFICANT_DIGITS = 6

HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE = "holds", "fails", "inconclusive", "not testable here"
#: The four verdicts, in the order REPRODUCTION.md counts them.
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE)

PAPER_CLAIM, ANALOGUE, FINDING, CONSISTENCY = "paper claim", "analogue", "our finding", "consistency check"
#: What a claim is: the paper's own claim; an analogue of one (measured on another platform or quantity, or a
#: model's prediction of it); a finding of this reproduction (a hypothesis or result of ours); a consistency check (a
#: quantity fixed by how the reproduction is built). Only paper claims make a paper's status.
KINDS = (PAPER_CLAIM, ANALOGUE, FINDING, CONSISTENCY)
#: Below this many settings a claim shows each setting's own interval and k of n, not a bootstrap of the median.
MIN_BOOTSTRAP_SETTINGS = 6


@dataclass(frozen=True)
class Rule:
    """A test of a measured value: ``check(measured) -> bool``, its text (``measured <= 0.01``) and which way is
    better (``better``: "higher", "lower", "range" for a band, "" for a yes/no); ``bounds`` are a band's ends."""

    text: str
    check: Callable[[Any], bool]
    better: str = ""
    bounds: tuple[float, float] | None = None

    def __call__(self, measured: Any) -> bool:
        if measured is None or (isinstance(measured, float) and math.isnan(measured)):
            return False
        return bool(self.check(measured))


def _compare(symbol: str, op: Callable[[Any, Any], bool], bound: float) -> Rule:
    return Rule(f"measured {symbol} {bound:g}", lambda m: op(m, bound), "higher" if ">" in symbol else "lower",
                (bound, bound))


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
    return Rule(f"{low:g} <= measured <= {high:g}", lambda m: low <= m <= high, "range", (low, high))


def is_true() -> Rule:
    """Holds when the measured value is ``True`` (for claims that are a yes/no computed by code)."""
    return Rule("measured is True", lambda m: m is True)


@dataclass(frozen=True)
class Precondition:
    """A power check a claim's experiment must pass before its verdict means anything: a positive control showing
    the effect is detectable at this scale (``text``, from the claim: "compression costs measurable quality"), judged
    by ``rule`` on a measurement the paper module's tested function makes. Not met (or inconclusive): the claim is
    not testable at this scale."""

    id: str
    text: str
    rule: Rule


@dataclass(frozen=True)
class Assumption:
    """A modelling choice of ours that could decide a claim: its ``central`` value (the one the claim is judged
    at), the ``values`` it is re-judged over (the range, the central one included), the ``unit`` and the ``source``
    of the range."""

    name: str
    central: Any
    values: tuple
    source: str
    unit: str = ""

    def __post_init__(self):
        if self.central not in self.values:
            raise ValueError(f"assumption {self.name}: the central value {self.central!r} must be one of {self.values}")


@dataclass(frozen=True)
class Claim:
    """One claim of the paper (or one consistency check of this reproduction), declared before the run.

    ``paper_value`` is in the unit the run measures (``unit``): a gap in points is compared with a
    gap in points, a share with a share; a text when the paper gives no number. ``over`` names the
    settings the rule runs over; ``min_share`` (for a claim about several settings) is the share of
    them the rule must pass on. ``near``: the relative band within which the measured value counts
    as near the paper's number (below it: "below", above it: "beyond"); ``up_to``: the paper's number
    is its best setting ("up to 69 %"), so our best setting in the rule's direction (``rule.better``) is set beside
    it. ``kind``: one of :data:`KINDS`. ``preconditions``: the power checks the experiment must pass
    (:class:`Precondition`); ``assumptions``: our modelling choices the claim is re-judged over (:class:`Assumption`);
    ``reruns``: for a timing claim, how many times the notebook measures it where it sits near its threshold.
    ``parity``: a claim that two
    things perform alike, whose ``baseline`` is a control showing that what is compared matters at all (dropout
    against none); where the control passes the rule too, parity says nothing and the claim is not testable,
    and where the control is inconclusive, so is the claim. ``timing``: measured in wall-clock time (its
    verdict may change between runs).

    What shows that the verdict could have gone the other way (:func:`lint` asks every paper claim for it):
    ``control`` names the claim's *negative control*, a run on which its rule must give the opposite verdict (a
    crippled method, a reversed ranking, random selection, the baseline the paper beats), measured as the
    measurement's ``control`` (or its ``baseline``); a hold whose control passes the rule too is not testable here.
    ``no_power_check``: why no power check (a positive control, ``preconditions``) applies, shown beside a fail.
    ``threshold_why``: why the rule's threshold is not the paper's number (shown in the statement the reader sees).
    ``trained``: the claim rests on trained models; measured over fewer than :data:`MIN_MODELS` of them
    (``Measurement.models``) its verdict is fragile (:func:`fragility`).
    """

    id: str
    statement: str
    where: str
    paper_value: Any
    unit: str
    rule: Rule
    over: str
    min_share: float | None = None
    near: float | None = None
    up_to: bool = False
    parity: bool = False
    timing: bool = False
    kind: str = PAPER_CLAIM
    preconditions: tuple[Precondition, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    reruns: int = 1
    control: str = ""
    no_power_check: str = ""
    threshold_why: str = ""
    trained: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind must be one of {list(KINDS)}, got {self.kind!r}")
        if self.reruns < 1 or (self.reruns > 1 and not self.timing):
            raise ValueError(f"claim {self.id}: reruns must be >= 1, and > 1 only for a timing claim")
        if self.min_share is not None and not 0 < self.min_share <= 1:
            raise ValueError(f"min_share must be in (0, 1], got {self.min_share}")
        if self.near is not None and not isinstance(self.paper_value, (int, float)):
            raise ValueError(f"claim {self.id}: near= needs a numeric paper_value, got {self.paper_value!r}")

    @property
    def shown_statement(self) -> str:
        """The statement as the reader sees it: with the reason its threshold is not the paper's number, where the
        claim gives one (``threshold_why``)."""
        if not self.threshold_why:
            return self.statement
        return (f"{self.statement.rstrip('.')} (threshold `{self.rule.text}`, not the paper's "
                f"{_fmt_setting(self.paper_value)}: {self.threshold_why})")


@dataclass(frozen=True)
class Measurement:
    """What a run measured for one claim.

    ``value`` is compared with the rule; ``interval`` is its 95 % interval where it has spread (seeds,
    timing repeats, a bootstrap over settings); ``per_setting`` the effect on each setting of a
    claim over several (the rule counts those it passes on); ``baseline`` the same measurement
    for the baseline the paper beats, which must fail the rule; ``per_setting_interval`` each setting's own 95 %
    interval where it was measured over seeds (:func:`across_seeds`): a setting whose interval straddles the
    threshold is undecided; ``not_testable`` the reason this run cannot test the claim (then nothing else is
    needed). ``control``: the claim's negative control, measured the same way (its rule must give the opposite
    verdict there); ``samples``: each setting's seeds (:func:`across_seeds` keeps them, so a setting can be left out
    and the rest re-judged); ``resampled``: the same measurement on bootstrap resamples of the evaluation items,
    where a setting's outcome hangs on a few of them; ``models``: how many independently trained models it rests
    on; ``merged``: settings left out as identical runs of another (name -> the one kept).
    """

    value: Any = None
    interval: tuple[float, float] | None = None
    per_setting: Mapping[str, float] | None = None
    per_setting_interval: Mapping[str, tuple[float, float]] | None = None
    baseline: "Measurement | None" = None
    note: str = ""
    not_testable: str = ""
    preconditions: Mapping[str, "Measurement"] = field(default_factory=dict)
    grid: Mapping[str, Mapping[Any, "Measurement"]] = field(default_factory=dict)
    control: "Measurement | None" = None
    samples: Mapping[str, Sequence[float]] | None = None
    resampled: tuple["Measurement", ...] = ()
    models: int | None = None
    merged: Mapping[str, str] | None = None

    def given(self, **checks: "Measurement | float | bool") -> "Measurement":
        """This measurement with its power preconditions' measurements (by :class:`Precondition` id; a bare number
        is a measurement without interval)."""
        made = {k: v if isinstance(v, Measurement) else Measurement(v) for k, v in checks.items()}
        return replace(self, preconditions={**self.preconditions, **made})

    def controlled(self, control: "Measurement") -> "Measurement":
        """This measurement with its claim's negative control (:attr:`Claim.control`), measured the same way."""
        return replace(self, control=control)

    def resampled_over(self, measurements: Sequence["Measurement"]) -> "Measurement":
        """This measurement with the same claim re-measured on bootstrap resamples of its evaluation items, for
        :func:`fragility`."""
        return replace(self, resampled=tuple(measurements))

    def over(self, assumption: str, measured: Mapping[Any, "Measurement"]) -> "Measurement":
        """This measurement (made at the assumption's central value) with the same claim measured at each value of
        the assumption's range, for :func:`robustness`."""
        return replace(self, grid={**self.grid, assumption: dict(measured)})


def distinct_runs(runs: Mapping[str, Any]) -> dict[str, str]:
    """Settings whose runs are identical, to be counted once: ``runs`` maps each setting to a fingerprint of its run
    (:func:`run_fingerprint`, or any hashable), and the result maps each setting that repeats an earlier one to that
    earlier one (empty when every run is distinct). Two settings that gave the same run are one piece of evidence:
    counting both would lift k of n and narrow a bootstrap with no new information."""
    first: dict[Any, str] = {}
    merged = {}
    for name, fingerprint in runs.items():
        name = str(name)
        if fingerprint in first:
            merged[name] = first[fingerprint]
        else:
            first[fingerprint] = name
    return merged


def run_fingerprint(*parts: Any) -> str:
    """A fingerprint of a run's outputs (numbers, arrays, pandas frames, nested lists of them): equal for runs that
    gave the same values to the last bit, for :func:`distinct_runs`."""
    import hashlib

    digest = hashlib.sha256()
    for part in parts:
        if hasattr(part, "to_numpy"):  # a pandas frame or series: its values and their labels
            digest.update(repr(list(getattr(part, "columns", [getattr(part, "name", "")]))).encode())
            part = part.to_numpy()
        array = np.asarray(part)
        digest.update(str(array.dtype).encode() + repr(array.shape).encode())
        digest.update(array.tobytes() if array.dtype != object else repr(array.tolist()).encode())
    return digest.hexdigest()


def _merge_note(note: str, merged: Mapping[str, str]) -> str:
    if not merged:
        return note
    text = "identical runs counted once: " + ", ".join(f"{name} = {kept}" for name, kept in merged.items())
    return f"{note}; {text}" if note else text


def across(effects: Mapping[str, float], note: str = "", resamples: int = 2000, seed: int = 0,
           intervals: Mapping[str, tuple[float, float]] | None = None,
           runs: Mapping[str, Any] | None = None) -> Measurement:
    """A claim over several settings: the median effect, its 95 % bootstrap interval over the settings
    (percentile, ``resamples`` draws with a fixed ``seed``) and every setting's effect, with its own interval where
    given (``intervals``, e.g. timing rounds). Over fewer than :data:`MIN_BOOTSTRAP_SETTINGS` settings a bootstrap of
    the median decides nothing, so the median has no interval: the verdict rests on k of n and each setting's own
    interval. ``runs``: a fingerprint of each setting's run; settings whose runs are identical are counted once
    (:func:`distinct_runs`), before k of n and before any bootstrap."""
    effects = {str(k): float(v) for k, v in dict(effects).items()}
    if not effects:
        raise ValueError("across: effects is empty; a claim over settings needs at least one setting")
    if runs is not None and set(map(str, runs)) != set(effects):
        raise ValueError(f"across: runs must name the settings of effects, {sorted(effects)}; got {sorted(runs)}")
    merged = distinct_runs(runs) if runs is not None else {}
    effects = {k: v for k, v in effects.items() if k not in merged}
    own = {str(k): (float(a), float(b)) for k, (a, b) in dict(intervals or {}).items() if str(k) not in merged}
    note = _merge_note(note, merged)
    values = np.array(list(effects.values()))
    if len(values) < MIN_BOOTSTRAP_SETTINGS:
        return Measurement(float(np.median(values)), None, per_setting=effects, per_setting_interval=own or None,
                           note=note, merged=merged or None)
    draws = np.random.default_rng(seed).choice(values, size=(resamples, len(values)), replace=True)
    medians = np.median(draws, axis=1)
    interval = (float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975)))
    return Measurement(float(np.median(values)), interval, per_setting=effects, per_setting_interval=own or None,
                       note=note, merged=merged or None)


def across_seeds(samples: Mapping[str, Sequence[float]], note: str = "", resamples: int = 2000,
                 seed: int = 0, runs: Mapping[str, Any] | None = None) -> Measurement:
    """A claim over several settings, each measured over seeds: per setting the mean with its Student-t interval
    (:func:`from_samples`); the median of the settings' means with a two-level bootstrap interval (settings drawn
    with replacement, then each drawn setting's seeds), so the interval carries the seeds' noise as well as the
    settings' spread (one setting: its own t-interval; fewer than :data:`MIN_BOOTSTRAP_SETTINGS`: no interval for
    the median, the settings' own intervals and k of n decide). A setting whose own interval straddles the rule's
    threshold is undecided (:func:`verdict`). ``runs``: a fingerprint of each setting's runs (of what was run, not of
    the measured values alone: two settings whose seeds all saturate at 1.0 are not the same run); settings whose runs
    are identical are counted once (:func:`distinct_runs`)."""
    samples = {str(k): np.asarray(v, dtype=float) for k, v in dict(samples).items()}
    if not samples or any(v.size == 0 for v in samples.values()):
        raise ValueError("across_seeds: every setting needs at least one sample")
    if runs is not None and set(map(str, runs)) != set(samples):
        raise ValueError(f"across_seeds: runs must name the settings of samples, {sorted(samples)}; got {sorted(runs)}")
    merged = distinct_runs(runs) if runs is not None else {}
    samples = {k: v for k, v in samples.items() if k not in merged}
    note = _merge_note(note, merged)
    kept = {k: v.tolist() for k, v in samples.items()}
    per_setting = {k: from_samples(v.tolist()) for k, v in samples.items()}
    intervals = {k: m.interval for k, m in per_setting.items() if m.interval is not None}
    extra = dict(samples=kept, merged=merged or None)
    if len(per_setting) == 1:  # the median of one setting is its mean, and its interval the seeds' t-interval
        (name, only), = per_setting.items()
        return Measurement(only.value, only.interval, per_setting={name: only.value}, per_setting_interval=intervals,
                           note=note, **extra)
    if len(per_setting) < MIN_BOOTSTRAP_SETTINGS:
        return Measurement(float(np.median([m.value for m in per_setting.values()])), None,
                           per_setting={k: m.value for k, m in per_setting.items()}, per_setting_interval=intervals,
                           note=note, **extra)
    interval = _two_level_interval(list(samples.values()), np.median, resamples, seed)
    return Measurement(float(np.median([m.value for m in per_setting.values()])), interval,
                       per_setting={k: m.value for k, m in per_setting.items()}, per_setting_interval=intervals,
                       note=note, **extra)


def _two_level_interval(groups: list[np.ndarray], statistic: Callable, resamples: int,
                        seed: int) -> tuple[float, float]:
    """The 95 % percentile interval of ``statistic`` over groups' means, from a two-level bootstrap: groups drawn
    with replacement, then each drawn group's own samples."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(len(groups), size=(resamples, len(groups)))
    means = np.empty(picks.shape)
    for column, group in enumerate(groups):  # each group's bootstrap means, then placed wherever it was drawn
        boot = group[rng.integers(group.size, size=(resamples, group.size))].mean(1)
        means[picks == column] = boot[(picks == column).nonzero()[0]]
    values = statistic(means, axis=1)
    return float(np.quantile(values, 0.025)), float(np.quantile(values, 0.975))


def across_models(items: Mapping[str, Sequence[float]], note: str = "", resamples: int = 2000,
                  seed: int = 0) -> Measurement:
    """A claim on trained models: ``items`` maps each independently trained model to its per-item effects (the
    same evaluation items for every model). The value is the mean over models of each model's mean, its 95 %
    interval a two-level bootstrap over models and then items, so it carries training variance as well as the items'
    (one model: the items' t-interval alone, and :func:`fragility` calls the verdict fragile); each model's mean and
    t-interval is a setting, so k of n counts models."""
    items = {str(k): np.asarray(v, dtype=float) for k, v in dict(items).items()}
    if not items or any(v.size == 0 for v in items.values()):
        raise ValueError("across_models: every model needs at least one item")
    per_model = {k: from_samples(v.tolist()) for k, v in items.items()}
    intervals = {k: m.interval for k, m in per_model.items() if m.interval is not None}
    value = float(np.mean([m.value for m in per_model.values()]))
    interval = (next(iter(per_model.values())).interval if len(items) == 1
                else _two_level_interval(list(items.values()), np.mean, resamples, seed))
    return Measurement(value, interval, per_setting={k: m.value for k, m in per_model.items()},
                       per_setting_interval=intervals or None, note=note, models=len(items),
                       samples={k: v.tolist() for k, v in items.items()})


def from_samples(samples: Sequence[float], note: str = "", confidence: float = 0.95) -> Measurement:
    """The mean of independent samples (seeds) with its Student-t interval; one sample has no interval."""
    from scipy import stats

    values = np.asarray(samples, dtype=float)
    if values.size == 0:
        raise ValueError("from_samples: samples is empty")
    mean = float(values.mean())
    if values.size == 1:
        return Measurement(mean, note=note)
    half = float(stats.t.ppf(0.5 + confidence / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return Measurement(mean, (mean - half, mean + half), note=note)


def proportion_gap(first: float, second: float, n: int, note: str = "") -> Measurement:
    """``first - second``, two accuracies each over ``n`` independent items, with its Wald 95 % interval."""
    if n < 1:
        raise ValueError(f"proportion_gap: n must be >= 1 item, got {n}")
    half = 1.96 * math.sqrt((first * (1 - first) + second * (1 - second)) / n)
    return Measurement(first - second, (first - second - half, first - second + half), note=note)


def proportion_ratio(first: float, second: float, n: int, note: str = "") -> Measurement:
    """``first / second``, two accuracies each over ``n`` items, with Katz's log 95 % interval; half an item is
    added to both counts (Haldane), so a count of 0 gives a finite ratio and a wide interval."""
    if n < 1:
        raise ValueError(f"proportion_ratio: n must be >= 1 item, got {n}")
    a, b = first * n + 0.5, second * n + 0.5
    ratio = a / b
    half = 1.96 * math.sqrt(1 / a - 1 / (n + 0.5) + 1 / b - 1 / (n + 0.5))
    return Measurement(ratio, (ratio * math.exp(-half), ratio * math.exp(half)), note=note)


def rank_correlation(first: Sequence[float], second: Sequence[float], note: str = "") -> Measurement:
    """Spearman's rho of two paired samples (ties take their mean rank), with the 95 % Fisher-z interval of Bonett
    and Wright (2000): variance ``(1 + rho^2 / 2) / (n - 3)`` on the z scale. Where either sample is constant rho
    is undefined: 0, the interval [-1, 1], and the note says so."""
    from scipy import stats

    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if first.shape != second.shape or first.size < 4:
        raise ValueError(f"rank_correlation: needs two samples of the same size, at least 4 pairs; got "
                         f"{first.size} and {second.size}")
    if np.ptp(first) == 0 or np.ptp(second) == 0:
        return Measurement(0.0, (-1.0, 1.0), note=(note + "; " if note else "") + "undefined: a constant sample")
    rho = float(stats.spearmanr(first, second).statistic)
    z, half = math.atanh(min(max(rho, -0.999999), 0.999999)), 1.96 * math.sqrt((1 + rho ** 2 / 2) / (first.size - 3))
    return Measurement(rho, (math.tanh(z - half), math.tanh(z + half)), note=note)


def best_rank_correlation(truth: Sequence[float]) -> Measurement:
    """The highest Spearman rho any ranking without ties can reach against ``truth``, with its interval
    (:func:`rank_correlation`): the ranking that orders ``truth`` (within a group of tied values every order gives
    the same rho). Below 1 where ``truth`` has ties, 0 where it is constant: a rule asking a ranking for more than
    this could never be shown to pass (a power check)."""
    truth = np.asarray(truth, dtype=float)
    return rank_correlation(np.argsort(np.argsort(truth, kind="stable")), truth)


def not_testable(reason: str) -> Measurement:
    """This run cannot test the claim, and why."""
    if not reason:
        raise ValueError("not_testable needs a reason")
    return Measurement(not_testable=reason)


def _value_verdict(rule: Rule, measurement: Measurement) -> str:
    passes = rule(measurement.value)
    if measurement.interval is None:
        return HOLDS if passes else FAILS
    ends = [rule(end) for end in measurement.interval]
    if passes and all(ends):
        return HOLDS
    if not passes and not any(ends):
        return FAILS
    return INCONCLUSIVE


def verdict(claim: Claim, measurement: Measurement, powered: bool = True) -> tuple[str, str]:
    """The verdict of ``claim`` on ``measurement`` and why, in words.

    1. ``not_testable`` set: not testable here.
    2. The value against the rule: holds, fails, or inconclusive when the interval straddles the threshold.
    3. Over settings (``min_share``): fails when the rule passes on fewer than that share of them, counting the
       undecided ones (their seed interval straddles the threshold) as passing; inconclusive when it needs them.
    4. With a baseline: a claim that holds for the baseline too does not single the method out: fails. For a
       ``parity`` claim the baseline is a control that must fail the rule (what is compared matters); where it
       passes, the claim is not testable here, and where it is inconclusive, so is the claim.
    0. A power precondition of the claim not met (or inconclusive): not testable at this scale, with its numbers
       and what the claim's own rule alone would have said. ``powered=False`` leaves the preconditions out (a
       baseline's or an assumption grid's measurement, which carries none of its own).
    """
    if measurement.not_testable:
        return NOT_TESTABLE, measurement.not_testable
    unmet = unmet_preconditions(claim, measurement) if powered else []
    if unmet:
        alone, why = verdict(claim, measurement, powered=False)
        return NOT_TESTABLE, ("not testable at this scale: the experiment could not show the effect (" + "; ".join(unmet)
                              + f"). Its rule alone would say {alone}: {why}")
    result = _value_verdict(claim.rule, measurement)
    why = [f"{_fmt_value(measurement)} {'passes' if claim.rule(measurement.value) else 'fails'} `{claim.rule.text}`"]
    if measurement.interval is not None and result == INCONCLUSIVE:
        why.append("its 95 % interval straddles the threshold")
    if claim.min_share is not None:
        if not measurement.per_setting:
            raise ValueError(f"claim {claim.id} is over settings (min_share); measure it with across()")
        held, total = settings_held(claim.rule, measurement)
        undecided = settings_undecided(claim.rule, measurement)
        why.append(f"passes on {held} of {total} settings"
                   + (f" ({undecided} undecided: their interval straddles the threshold)" if undecided else "")
                   + f" (needs {math.ceil(claim.min_share * total)})")
        if held + undecided < claim.min_share * total:
            result = FAILS
        elif held < claim.min_share * total and (result == HOLDS or measurement.interval is None):
            result = INCONCLUSIVE  # it needs undecided settings (with few settings, they decide, not the median)
    if measurement.baseline is not None and result != FAILS:
        base = verdict(claim, measurement.baseline, powered=bool(measurement.baseline.preconditions))[0]
        why.append(f"{'control' if claim.parity else 'baseline'}: {_fmt_value(measurement.baseline)}, {base}")
        if claim.parity and base == HOLDS:
            return NOT_TESTABLE, "; ".join(why + ["the control passes the rule too, so what is compared does not "
                                                 "measurably matter at this scale"])
        if claim.parity and base == INCONCLUSIVE:
            return INCONCLUSIVE, "; ".join(why + ["the control's interval straddles the threshold: it is not yet "
                                                 "shown that what is compared matters"])
        if base == HOLDS:
            result = FAILS
        elif base == INCONCLUSIVE:
            result = INCONCLUSIVE
    if measurement.control is not None:
        control = measurement.control
        base = NOT_TESTABLE if control.not_testable else verdict(claim, control, powered=False)[0]
        why.append(f"negative control ({claim.control or 'control'}): "
                   + (control.not_testable if control.not_testable else f"{_fmt_value(control)}, {base}"))
        if result == HOLDS and base == HOLDS:
            return NOT_TESTABLE, "; ".join(why + ["its negative control passes the rule too, so the rule cannot tell "
                                                 "the method from it at this scale"])
        if result == HOLDS and base in (INCONCLUSIVE, NOT_TESTABLE):
            result = INCONCLUSIVE
            why.append("the negative control is not shown to fail the rule")
    return result, "; ".join(why)


def rule_text(claim: Claim) -> str:
    """The rule as results.json records it: the rule's text, and the share of settings for a claim over several."""
    return claim.rule.text + (f" on >= {claim.min_share:.0%} of settings and for the median"
                              if claim.min_share is not None else "")


def declaration_changes(claims: Sequence[Claim], judged: Sequence[Mapping[str, Any]]) -> list[str]:
    """How the declared ``claims`` differ from the claims a saved run ``judged`` (its results.json): ids added or
    removed, a changed kind, statement, unit or rule, power checks or assumptions the run did not measure. Empty
    when the run judged exactly what is declared now."""
    saved = {c["id"]: c for c in judged}
    changes = [f"{c.id} is new" for c in claims if c.id not in saved]
    changes += [f"{i} is no longer declared" for i in saved if i not in {c.id for c in claims}]
    for claim in claims:
        old = saved.get(claim.id)
        if old is None:
            continue
        for name, now in (("kind", claim.kind), ("statement", claim.statement), ("unit", claim.unit),
                          ("rule", rule_text(claim)), ("paper_value", round_floats(claim.paper_value)),
                          ("over", claim.over)):
            if old.get(name) != now:
                changes.append(f"{claim.id}'s {name}")
        if old.get("verdict") != NOT_TESTABLE or old.get("preconditions"):
            checks = old.get("preconditions", {})
            if set(checks) != {pre.id for pre in claim.preconditions}:
                changes.append(f"{claim.id}'s power checks")
            elif any(checks[pre.id].get("rule") != pre.rule.text for pre in claim.preconditions):
                changes.append(f"{claim.id}'s power-check rules")
            grids = {e["assumption"]: e for e in old.get("robustness", [])}
            if set(grids) != {a.name for a in claim.assumptions}:
                changes.append(f"{claim.id}'s assumptions")
            elif any(grids[a.name].get("central") != round_floats(a.central)
                     or set(grids[a.name].get("verdicts", {})) != {_fmt_setting(v) for v in a.values}
                     for a in claim.assumptions):
                changes.append(f"{claim.id}'s assumption values")
            if claim.control and (old.get("control") or {}).get("text") != claim.control:
                changes.append(f"{claim.id}'s negative control")
    return changes


#: The fewest independently trained models a claim on trained models rests on before its verdict is not fragile.
MIN_MODELS = 3
#: A verdict re-reached on fewer than this share of bootstrap resamples of its evaluation items is fragile.
RESAMPLED_AGREEMENT = 0.95


def lint(claims: Sequence[Claim]) -> list[str]:
    """What a paper's declared claims lack for a verdict that could have gone the other way, one line each (empty:
    nothing): every paper claim declares a power check (``preconditions``) or a negative control (``control``); a
    fail needs a power check, so a claim without one says why none applies (``no_power_check``); a claim whose rule
    tests a number other than the paper's (not a direction, 0 or 1) says why (``threshold_why``)."""
    problems = []
    for claim in claims:
        if claim.kind != PAPER_CLAIM:
            continue
        if not claim.preconditions and not claim.control:
            problems.append(f"{claim.id}: neither a power check (preconditions) nor a negative control (control); a "
                            "claim that cannot fail by construction is a consistency check")
        if not claim.preconditions and not claim.no_power_check:
            problems.append(f"{claim.id}: no power check, and no_power_check does not say why none applies")
        bounds = claim.rule.bounds
        if (claim.rule.better in ("higher", "lower") and bounds and isinstance(claim.paper_value, (int, float))
                and not isinstance(claim.paper_value, bool) and bounds[0] not in (0, 1)
                and not math.isclose(bounds[0], claim.paper_value, rel_tol=1e-9) and not claim.threshold_why):
            problems.append(f"{claim.id}: its rule tests {bounds[0]:g}, not the paper's {claim.paper_value:g}, and "
                            "threshold_why does not say why")
    return problems


def _inherit(point: Measurement, central: Measurement) -> Measurement:
    """A re-measurement (a grid point, a resample) with the central measurement's power checks and negative
    control where it brings none of its own (they did not depend on what it varies)."""
    return replace(point, preconditions=point.preconditions or central.preconditions,
                   control=point.control if point.control is not None else central.control)


def without_setting(measurement: Measurement, name: str) -> Measurement:
    """``measurement`` re-aggregated with the setting ``name`` left out: by the function that made it where its
    value is one (:func:`across_models` for models, :func:`across_seeds` with seeds, :func:`across` for the median of
    single effects), else the value kept and only the setting dropped from k of n; its baseline and negative
    control lose the same setting."""
    effects = {k: v for k, v in (measurement.per_setting or {}).items() if k != name}
    own = {k: v for k, v in (measurement.per_setting_interval or {}).items() if k != name}
    samples = {k: v for k, v in (measurement.samples or {}).items() if k != name}
    if measurement.models is not None and samples:
        made = across_models(samples, note=measurement.note)
    elif samples:
        made = across_seeds(samples, note=measurement.note)
    elif effects and math.isclose(float(np.median(list(measurement.per_setting.values()))), measurement.value,
                                  rel_tol=1e-9, abs_tol=1e-12):
        made = across(effects, note=measurement.note, intervals=own)
    else:
        made = replace(measurement, per_setting=effects, per_setting_interval=own or None)
    side = {key: without_setting(other, name) if other is not None and other.per_setting and
            name in other.per_setting else other
            for key, other in (("baseline", measurement.baseline), ("control", measurement.control))}
    return replace(made, preconditions=measurement.preconditions, grid={}, **side)


def fragility(claim: Claim, measurement: Measurement) -> list[str]:
    """What flips a hold or a fail, one sentence each (empty: nothing tried flips it): (a) each setting left out in
    turn (:func:`without_setting`); (b) for a claim on trained models (``claim.trained``), resting on fewer than
    :data:`MIN_MODELS` of them; (c) where the measurement carries bootstrap resamples of its evaluation items, the
    verdict re-reached on fewer than :data:`RESAMPLED_AGREEMENT` of them. Inconclusive and not-testable verdicts
    have nothing to flip."""
    if measurement.not_testable:
        return []
    central = verdict(claim, measurement)[0]
    if central not in (HOLDS, FAILS):
        return []
    found = []
    if claim.trained and (measurement.models or 1) < MIN_MODELS:
        found.append(f"rests on {measurement.models or 1} trained model(s), fewer than {MIN_MODELS}")
    settings = list(measurement.per_setting or {})
    if len(settings) > 1:
        for name in settings:
            left = verdict(claim, without_setting(measurement, name))[0]
            if left != central:
                found.append(f"{left} without {name}")
    if measurement.resampled:
        agree = sum(verdict(claim, _inherit(point, measurement))[0] == central for point in measurement.resampled)
        share = agree / len(measurement.resampled)
        if share < RESAMPLED_AGREEMENT:
            found.append(f"{central} on only {share:.0%} of {len(measurement.resampled)} bootstrap resamples of the "
                         "evaluation items")
    return found


def assumptions_deciding(judged: Mapping[str, Any]) -> list[str]:
    """The assumptions of ours whose declared range flips a saved claim's verdict (its robustness entries that say
    "depends on")."""
    return [entry["assumption"] for entry in judged.get("robustness", []) if entry["text"].startswith("depends on")]


def qualifier(judged: Mapping[str, Any]) -> str:
    """What a saved hold or fail (a results.json claim) rests on besides the paper: "depends on <assumption>"
    where our modelling choice flips it, "fragile: <what flips it>" (:func:`fragility`); empty for a firm verdict
    and for inconclusive or not-testable ones. A qualified hold does not count toward "reproduced"."""
    if judged.get("verdict") not in (HOLDS, FAILS):
        return ""
    parts = []
    if assumptions_deciding(judged):
        parts.append("depends on " + ", ".join(assumptions_deciding(judged)))
    if judged.get("fragility"):
        parts.append("fragile: " + "; ".join(judged["fragility"]))
    return "; ".join(parts)


def unmet_preconditions(claim: Claim, measurement: Measurement) -> list[str]:
    """The claim's power preconditions that ``measurement`` does not meet, each in words with its numbers; a
    declared precondition left unmeasured is an error (the notebook must measure it)."""
    missing = [pre.id for pre in claim.preconditions if pre.id not in measurement.preconditions]
    if missing:
        raise ValueError(f"claim {claim.id}: power preconditions {missing} are declared but not measured; pass them "
                         "with measurement.given(...)")
    unmet = []
    for pre in claim.preconditions:
        checked = measurement.preconditions[pre.id]
        outcome = NOT_TESTABLE if checked.not_testable else _value_verdict(pre.rule, checked)
        if outcome != HOLDS:
            unmet.append(f"power check {pre.id}, {pre.text}: measured {_fmt_value(checked)}, "
                         + ("straddles" if outcome == INCONCLUSIVE else "fails") + f" `{pre.rule.text}`"
                         + (f" ({checked.note})" if checked.note else ""))
    return unmet


def robustness(claim: Claim, measurement: Measurement) -> list[dict[str, Any]]:
    """The claim re-judged over each declared :class:`Assumption`'s range: per assumption its central value, the
    verdict at each value and a sentence, "robust", "depends on <name>: holds for ..., fails for ..." or, where its
    power checks fail at every value, "not testable at any value" (a verdict nobody could reach is not robust).
    Empty for a claim without assumptions or one measured as not testable here; an assumption left without
    measurements is an error."""
    if not claim.assumptions or measurement.not_testable:
        return []
    missing = [a.name for a in claim.assumptions if a.name not in measurement.grid]
    if missing:
        raise ValueError(f"claim {claim.id}: assumptions {missing} are declared but the claim was not re-measured "
                         "over their range; pass it with measurement.over(name, {value: measurement})")
    found = []
    for assumption in claim.assumptions:
        measured = measurement.grid[assumption.name]
        if set(measured) != set(assumption.values):
            raise ValueError(f"claim {claim.id}: {assumption.name} measured at {sorted(measured)}, declared "
                             f"{list(assumption.values)}")
        # a grid point without power checks of its own keeps the central one's (they did not depend on it)
        at = {value: measurement if value == assumption.central else _inherit(measured[value], measurement)
              for value in assumption.values}
        verdicts = {value: verdict(claim, at[value])[0] for value in assumption.values}
        unit = f" {assumption.unit}" if assumption.unit else ""
        span = f"{assumption.name} {_fmt_range(assumption.values)}{unit}"
        if set(verdicts.values()) == {NOT_TESTABLE}:  # nothing was decided, so nothing is robust
            text = f"not testable at any value of {span}"
        elif len(set(verdicts.values())) == 1:
            text = f"robust over {span}"
        else:
            by_verdict = {v: [k for k, w in verdicts.items() if w == v] for v in VERDICTS if v in verdicts.values()}
            text = f"depends on {assumption.name}: " + "; ".join(
                f"{v} for " + ", ".join(_fmt_setting(k) for k in values) + unit for v, values in by_verdict.items())
        found.append({"assumption": assumption.name, "central": assumption.central, "source": assumption.source,
                      "verdicts": {_fmt_setting(k): v for k, v in verdicts.items()},
                      "measured": {_fmt_setting(k): at[k].value for k in assumption.values},
                      "interval": {_fmt_setting(k): at[k].interval for k in assumption.values},
                      "text": text})
    return found


def remeasured(claim: Claim, measure: Callable[[int], Measurement]) -> Measurement:
    """A timing claim measured once (``measure(1)``) and, where that measurement straddles the rule's threshold,
    again with ``claim.reruns`` times the timing rounds (``measure(claim.reruns)``), which is the one judged; its
    note says so and keeps the first. A claim declared with ``reruns=1`` is measured once."""
    first = measure(1)
    if claim.reruns == 1 or verdict(claim, first, powered=False)[0] != INCONCLUSIVE:
        return first
    again = measure(claim.reruns)
    return replace(again, note=(f"{again.note}; " if again.note else "") + f"timed again with {claim.reruns}x the "
                   f"rounds, as the first timing ({_fmt_value(first)}) straddled the threshold")


def measured_over(measure: Callable[[Any], Measurement], central: Any,
                  grids: Mapping[str, Mapping[Any, Any]]) -> Measurement:
    """``measure(central)``, with the same measurement of the data at every value of each assumption: ``grids`` maps
    an assumption's name to ``{value: the data computed under it}`` (the central value may map to ``central``
    itself), ready for :func:`robustness`."""
    measured = measure(central)
    for name, data in grids.items():
        measured = measured.over(name, {value: measured if d is central else measure(d) for value, d in data.items()})
    return measured


def measured_for(claim: Claim, measure: Callable[[Any], Measurement], central: Any,
                 grids: Mapping[str, Mapping[Any, Any]]) -> Measurement:
    """:func:`measured_over` over the assumptions ``claim`` declares, and no others: ``grids`` may hold every
    assumption of a paper (one rerun of the experiment per value), each claim re-judged over its own."""
    missing = [a.name for a in claim.assumptions if a.name not in grids]
    if missing:
        raise ValueError(f"claim {claim.id} declares assumptions {missing} that grids does not hold")
    return measured_over(measure, central, {a.name: grids[a.name] for a in claim.assumptions})


def _fmt_setting(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _fmt_range(values: tuple) -> str:
    """An assumption's range in words: its ends for numbers (``1–64``), every value for names (``answer_loss,
    retrieval, perplexity``: names have no order whose ends would stand for the values between)."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return f"{_fmt_setting(min(values))}–{_fmt_setting(max(values))}"
    return ", ".join(_fmt_setting(v) for v in values)


def _setting_outcomes(rule: Rule, measurement: Measurement) -> list[bool | None]:
    """Per setting: True where the rule passes (on the whole interval, where the setting has one), False where it
    fails (likewise), None where the setting's interval straddles the threshold."""
    intervals = measurement.per_setting_interval or {}
    outcomes = []
    for name, value in (measurement.per_setting or {}).items():
        ends = {rule(value), *(rule(end) for end in intervals.get(name, ()))}
        outcomes.append(ends.pop() if len(ends) == 1 else None)
    return outcomes


def settings_held(rule: Rule, measurement: Measurement) -> tuple[int, int]:
    """(settings where the rule passes, settings) of a measurement made with :func:`across` or :func:`across_seeds`
    (a setting with an interval passes only if the rule passes on all of it)."""
    outcomes = _setting_outcomes(rule, measurement)
    return sum(outcome is True for outcome in outcomes), len(outcomes)


def settings_text(measurement: Measurement) -> str:
    """Each setting's effect, with its own interval where it has one: ``a +0.012 [+0.003, +0.021]; b -0.004``."""
    intervals = measurement.per_setting_interval or {}
    parts = []
    for name, value in (measurement.per_setting or {}).items():
        text = f"{name} {value:+.3g}"
        if name in intervals:
            text += " [{:+.3g}, {:+.3g}]".format(*intervals[name])
        parts.append(text)
    return "; ".join(parts)


def settings_undecided(rule: Rule, measurement: Measurement) -> int:
    """Settings whose own interval (:func:`across_seeds`) straddles the rule's threshold."""
    return sum(outcome is None for outcome in _setting_outcomes(rule, measurement))


#: The marks :func:`position` gives a value against the paper's, by where it stands in the rule's direction.
SHORT_OF, AT, PAST = "short of the paper's effect", "at the paper's effect", "past the paper's effect"


def position(claim: Claim, measurement: Measurement) -> str:
    """Where the measurement stands against the paper's number, in the same unit and in the rule's direction:
    :data:`SHORT_OF` (a weaker effect: below the paper's number where higher is better, above it where lower is),
    :data:`AT` (within ``claim.near``) or :data:`PAST` it; for an ``up_to`` claim our best setting in the rule's
    direction is the one set beside the paper's best, as "best 3.57: at the paper's effect"; for a claim whose rule is
    a band (the paper's range), where each setting falls ("3 of 4 inside 1.69–5.43, 1 below"). Empty for a
    consistency check (it has no paper value), a claim not testable here, a rule without a direction and where the
    claim declares no band."""
    if claim.kind == CONSISTENCY or measurement.value is None or measurement.not_testable:
        return ""
    rule = claim.rule
    if rule.better == "range" and rule.bounds is not None:
        low, high = rule.bounds
        values = list((measurement.per_setting or {"": measurement.value}).values())
        counts = {"inside": sum(low <= v <= high for v in values), "below": sum(v < low for v in values),
                  "above": sum(v > high for v in values)}
        if not measurement.per_setting:
            return f"{next(where for where, n in counts.items() if n)} {low:g}–{high:g}"
        return (f"{counts['inside']} of {len(values)} inside {low:g}–{high:g}"
                + "".join(f", {counts[where]} {where}" for where in ("below", "above") if counts[where]))
    value, prefix = measurement.value, ""
    if claim.up_to and measurement.per_setting:
        pick = min if rule.better == "lower" else max
        value = pick(measurement.per_setting.values())
        prefix = f"best {value:.3g}: "
    if (claim.near is None or rule.better not in ("higher", "lower") or not isinstance(value, (int, float))
            or isinstance(value, bool)):
        return ""
    reference = float(claim.paper_value)
    if abs(value - reference) <= claim.near * abs(reference):
        return prefix + AT
    weaker = value < reference if rule.better == "higher" else value > reference
    return prefix + (SHORT_OF if weaker else PAST)


def _fmt_value(measurement: Measurement) -> str:
    value = measurement.value
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    if measurement.interval is not None:
        low, high = measurement.interval
        text += f" [{low:.4g}, {high:.4g}]"
    return text


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


@dataclass
class Report:
    """Claims, metrics and figures of one run, saved as ``results.json`` beside the figures."""

    settings: Settings
    title: str
    claims: Sequence[Claim] = ()
    metrics: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    judged: list[dict[str, Any]] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    findings: dict[str, str] = field(default_factory=dict)
    style_problems: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self):
        ids = [c.id for c in self.claims]
        if len(set(ids)) != len(ids):
            raise ValueError(f"claim ids declared twice: {sorted({i for i in ids if ids.count(i) > 1})}")
        self.declared = {c.id: c for c in self.claims}
        # one staging folder per run: two runs of a paper and scale (two seeds in one kernel, two processes) never
        # share or delete each other's staged figures; the folder goes with its Report if that never saves
        self._staging = self.out_dir.parent / f".{self.out_dir.name}.staging-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        weakref.finalize(self, shutil.rmtree, str(self._staging), True)
        _remove_abandoned(self.out_dir)
        # the notebook marks its own run as unfinished until save() (under papermill or JupyterLab as under run_all):
        # a run that stops before it leaves the marker, and the last saved claims read as stale, not current
        marker = paths.failure_marker(self.settings.paper, self.settings.scale)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"a run started at {time.strftime('%Y-%m-%d %H:%M:%S')} (pid {os.getpid()}) and has not "
                          "reached report.save()\n")
        self._section_start = time.perf_counter()

    @property
    def out_dir(self) -> Path:
        return self.settings.out_dir

    @property
    def staging_dir(self) -> Path:
        """Where this run's figures wait until :meth:`save` moves them into :attr:`out_dir` with results.json: a
        folder of this run's own."""
        return self._staging

    def metric(self, name: str, value: Any, timing: bool = False) -> Any:
        """Record a measured quantity (a number, or a nested dict/list of numbers).

        ``timing=True`` files a wall-clock measurement under ``timings``: the one part of
        results.json allowed to differ between two runs with the same seed.
        """
        (self.timings if timing else self.metrics)[name] = round_floats(value)
        return value

    def finding(self, key: str, text: str, timing: bool = False):
        """Record what an experiment found, ``text`` in markdown with numbers the notebook computed, and return it
        for display. ``timing=True``: the text quotes wall-clock numbers (filed under ``timings``). The section's
        wall time since the previous finding (or the start) goes to ``timings["section_seconds"]``, a list of
        ``[key, seconds]`` in the order the notebook recorded them. After a
        ``default`` run, ``python -m mlsysrepro.reproduction`` copies each finding into the committed notebook's
        markdown cell tagged ``finding:<key>``, so a reader sees it on GitHub without running anything."""
        from IPython.display import Markdown

        if not key or any(c in key for c in " :/"):
            raise ValueError(f"finding key must be a short name without spaces, ':' or '/', got {key!r}")
        if key in self.findings or key in self.timings.get("findings", {}):
            raise ValueError(f"finding {key!r} recorded twice")
        (self.timings.setdefault("findings", {}) if timing else self.findings)[key] = text
        now = time.perf_counter()
        self.timings.setdefault("section_seconds", []).append([key, round(now - self._section_start, 1)])
        self._section_start = now
        return Markdown(text)

    def claims_markdown(self) -> str:
        """The judged claims as a markdown list under a heading, one line per declared claim: its verdict (with k of
        n settings), statement, and the measured value beside the paper's (for a claim not measured here, why not); a
        notebook's closing finding."""
        judged = {claim["id"]: claim for claim in self.judged}

        def fmt(value):
            return f"{value:.3g}" if isinstance(value, float) else str(value)

        lines = ["## Which parts of the paper hold at this scale", ""]
        for claim_id, claim in self.declared.items():
            result = judged[claim_id]
            held = f", {result['settings_held']} settings" if result["settings_held"] else ""
            kind = "" if claim.kind == PAPER_CLAIM else f"{claim.kind}, "
            if result["measured"] is None or result["verdict"] == NOT_TESTABLE:
                measured = result["why"]
            elif claim.kind == CONSISTENCY:
                measured = f"measured {fmt(result['measured'])}"
            else:
                measured = f"measured {fmt(result['measured'])} against the paper's {fmt(claim.paper_value)}"
            grid = "".join(f"; {entry['text']}" for entry in result.get("robustness", []))
            flips = "".join(f"; fragile: {text}" for text in result.get("fragility", []))
            lines.append(f"- **{claim_id}** ({kind}{result['verdict']}{held}): {claim.shown_statement}; "
                         f"{measured}{grid}{flips}.")
        return "\n".join(lines)

    def judge(self, id: str, measurement: Measurement) -> str:
        """Judge the declared claim ``id`` on ``measurement``; records and returns the verdict."""
        if id not in self.declared:
            raise ValueError(f"claim {id!r} is not declared; declared: {sorted(self.declared)}")
        if any(c["id"] == id for c in self.judged):
            raise ValueError(f"claim id {id!r} judged twice")
        claim = self.declared[id]
        if (claim.control and not measurement.not_testable and measurement.control is None
                and measurement.baseline is None):
            raise ValueError(f"claim {id} declares a negative control ({claim.control}) but the measurement carries "
                             "none; pass it with measurement.controlled(...)")
        result, why = verdict(claim, measurement)
        held = settings_held(claim.rule, measurement) if measurement.per_setting else None
        undecided = settings_undecided(claim.rule, measurement)
        checks = {pre.id: {"text": pre.text, "rule": pre.rule.text,
                           "measured": round_floats(measurement.preconditions[pre.id].value),
                           "interval": round_floats(measurement.preconditions[pre.id].interval)}
                  for pre in claim.preconditions if pre.id in measurement.preconditions}
        self.judged.append({
            "id": id,
            "kind": claim.kind,
            "better": claim.rule.better,
            "statement": claim.statement,
            "where": claim.where,
            "paper_value": round_floats(claim.paper_value),
            "unit": claim.unit,
            "rule": rule_text(claim),
            "over": claim.over,
            "measured": round_floats(measurement.value),
            "interval": round_floats(measurement.interval),
            "settings_held": None if held is None else f"{held[0]} of {held[1]}" + (
                f", {undecided} undecided" if undecided else ""),
            "per_setting": round_floats(measurement.per_setting),
            "baseline": None if measurement.baseline is None else round_floats(measurement.baseline.value),
            "vs_paper": position(claim, measurement),
            "verdict": result,
            "why": why,
            "note": measurement.note,
            "scale": self.settings.scale,
            "timing": claim.timing,
        })
        if checks:
            self.judged[-1]["preconditions"] = checks
        control = measurement.control if measurement.control is not None else measurement.baseline
        if claim.control and control is not None:
            self.judged[-1]["control"] = {
                "text": claim.control, "measured": round_floats(control.value),
                "interval": round_floats(control.interval),
                "verdict": NOT_TESTABLE if control.not_testable else verdict(claim, control, powered=False)[0]}
        for name in ("no_power_check", "threshold_why"):
            if getattr(claim, name):
                self.judged[-1][name] = getattr(claim, name)
        flips = fragility(claim, measurement)
        if flips:
            self.judged[-1]["fragility"] = flips
        if measurement.models is not None:
            self.judged[-1]["models"] = measurement.models
        if measurement.merged:
            self.judged[-1]["merged"] = dict(measurement.merged)
        grid = robustness(claim, measurement)
        if grid:
            self.judged[-1]["robustness"] = round_floats(grid)
        if measurement.per_setting_interval:
            self.judged[-1]["per_setting_interval"] = round_floats(measurement.per_setting_interval)
        return result

    def savefig(self, fig, name: str) -> Path:
        """Save ``fig`` as ``<name>.png`` and ``.svg`` and list it in results.json; the files reach ``out_dir`` with
        results.json, when :meth:`save` succeeds. A figure that breaks the collection's checklist
        (:func:`mlsysrepro.core.plots.style_problems`) is saved, with a warning naming what to fix, and
        :meth:`save` refuses the run until it passes."""
        from . import plots  # here, not at the top: a worker process that judges nothing never loads matplotlib

        problems = plots.style_problems(fig)
        if problems:
            warnings.warn(f"figure {name!r} breaks the figure checklist: " + "; ".join(problems), stacklevel=2)
            self.style_problems[name] = problems
        else:
            self.style_problems.pop(name, None)
        path = plots.savefig(fig, self.staging_dir, name)
        if name not in self.figures:
            self.figures.append(name)
        return path

    def robustness_figure(self, name: str, assumption: str, title: str):
        """Save a figure of every judged claim re-judged over ``assumption`` (:func:`robustness`): per claim its
        measured value at each of the assumption's values, coloured by the verdict there, with the rule's threshold;
        ``title`` names the paper's figure or section the claims come from. Returns the figure."""
        rows = []
        for judged in self.judged:
            entry = next((e for e in judged.get("robustness", []) if e["assumption"] == assumption), None)
            if entry is not None:
                rule = self.declared[judged["id"]].rule
                rows.append({"claim": judged["id"], "unit": judged["unit"], "entry": entry, "bounds": rule.bounds})
        if not rows:
            raise ValueError(f"no judged claim was re-judged over {assumption!r}")
        declared = next(a for c in self.claims for a in c.assumptions if a.name == assumption)
        from . import plots

        fig = plots.assumption_grid(rows, f"{assumption} ({declared.unit})" if declared.unit else assumption, title)
        self.savefig(fig, name)
        return fig

    def table(self):
        """The judged claims as a pandas DataFrame, for display at the end of a notebook."""
        import pandas as pd

        columns = ["id", "kind", "where", "statement", "paper_value", "measured", "interval", "settings_held",
                   "rule", "verdict", "vs_paper", "note"]
        order = {c.id: i for i, c in enumerate(self.claims)}
        rows = sorted(self.judged, key=lambda c: order[c["id"]])
        return pd.DataFrame([{k: c[k] for k in columns} for c in rows], columns=columns).set_index("id")

    def to_dict(self) -> dict[str, Any]:
        s = self.settings
        order = {c.id: i for i, c in enumerate(self.claims)}
        return {
            "paper": s.paper,
            "title": self.title,
            "scale": s.scale,
            "seed": s.seed,
            "settings": round_floats(s.to_dict()),
            "metrics": self.metrics,
            "timings": self.timings,
            "claims": sorted(self.judged, key=lambda c: order[c["id"]]),
            "figures": [f"{name}.png" for name in self.figures],
        } | ({"findings": self.findings} if self.findings else {})

    def save(self) -> Path:
        """Write ``results.json`` beside this run's figures and move them all into ``out_dir`` together, replacing
        the previous run's folder (two renames: a run that fails or is interrupted before this leaves the previous
        results whole, and no figure of an older run survives beside a newer results.json); returns the path of
        results.json. Every declared claim must have been judged."""
        missing = [c.id for c in self.claims if not any(j["id"] == c.id for j in self.judged)]
        if missing:
            raise ValueError(f"claims {missing} are declared but not judged; judge them (not_testable(reason) "
                             "where this run cannot test them) before saving")
        if self.style_problems:
            raise ValueError("figures break the figure checklist (mlsysrepro.core.plots): " + " | ".join(
                f"{name}: " + "; ".join(problems) for name, problems in self.style_problems.items()))
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        for name in self.figures:  # saved again (a cell re-run in JupyterLab): keep the figures the last save moved
            for suffix in (".png", ".svg"):
                staged, moved = self.staging_dir / f"{name}{suffix}", self.out_dir / f"{name}{suffix}"
                if not staged.exists() and moved.exists():
                    shutil.copy2(moved, staged)
        (self.staging_dir / "results.json").write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        previous = self.staging_dir.with_name(self.staging_dir.name.replace(".staging-", ".previous-"))
        while True:  # the newest complete run wins: another run may put its folder in place between two renames
            shutil.rmtree(previous, ignore_errors=True)
            try:
                os.replace(self.out_dir, previous)
            except FileNotFoundError:
                pass
            try:
                os.replace(self.staging_dir, self.out_dir)
                break
            except OSError as error:
                if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
        shutil.rmtree(previous, ignore_errors=True)
        paths.failure_marker(self.settings.paper, self.settings.scale).unlink(missing_ok=True)
        return self.out_dir / "results.json"


def _remove_abandoned(out_dir: Path) -> None:
    """Delete the staging and previous folders of ``out_dir`` that runs of processes no longer alive left behind
    (and the one shared staging folder of older versions)."""
    for folder in out_dir.parent.glob(f".{out_dir.name}.*"):
        kind, _, owner = folder.name[len(out_dir.name) + 2:].partition("-")
        pid = owner.partition("-")[0]
        legacy = kind in ("staging", "previous") and not owner
        dead = kind in ("staging", "previous") and pid.isdigit() and not _alive(int(pid))
        if legacy or dead:
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load_results(path: Path) -> dict[str, Any]:
    """Read a ``results.json`` written by :meth:`Report.save`."""
    return json.loads(Path(path).read_text())


#: What a timing claim keeps when two runs are compared: what its declaration fixes. Everything else it records
#: (the measurement, its intervals, per-setting values, verdict and reason) depends on wall-clock time.
DECLARED_FIELDS = ("id", "kind", "better", "statement", "where", "paper_value", "unit", "rule", "over", "scale",
                   "timing")


def without_timings(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` less what wall-clock time decides: what two runs with one seed must agree on."""
    kept = {k: v for k, v in results.items() if k != "timings"}
    kept["claims"] = [
        {k: v for k, v in c.items() if not c["timing"] or k in DECLARED_FIELDS} for c in results["claims"]
    ]
    return kept
