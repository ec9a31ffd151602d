"""Scale presets and parameter validation for the notebooks.

Every notebook runs at three scales chosen by one parameter, ``scale``:

- ``smoke``: under a minute; what the tests run;
- ``default``: minutes on 2 CPU cores; regenerates the committed figures;
- ``paper``: the paper's own setting, for a user with the hardware and data.

A paper declares its knobs once, as a preset per scale::

    PRESETS = {
        "smoke":   dict(n_samples=2_000, n_draws=50),
        "default": dict(n_samples=20_000, n_draws=400),
        "paper":   dict(n_samples=200_000, n_draws=2_000),
    }

The notebook's ``parameters`` cell lists ``scale``, ``seed``, ``use_cache`` and every knob with
the value ``None`` ("take it from the scale's preset"); a value given there, or injected by
papermill (``-p n_draws 10``), overrides the preset. :func:`resolve` rejects an unknown scale,
an unknown parameter or a value of the wrong type with an error naming the parameter and the
allowed values: papermill itself only warns about a misspelt ``-p``.
"""

from __future__ import annotations

import ast
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from . import paths

SCALES = ("smoke", "default", "paper")

#: Parameters every notebook has, with their types and defaults.
COMMON = {"scale": (str, "default"), "seed": (int, 0), "use_cache": (bool, True)}

#: The comment papermill puts on the first line of the cell it injects.
_PAPERMILL_HEADER = "# Parameters"


#: The knobs read, as attributes of a :class:`Settings`, while each cached computation of this process runs
#: (:func:`recording_reads`), innermost last. A read counts for every computation running, so a computation that
#: calls another also reads what that one reads. Reads in worker processes are not seen.
_RECORDING: list[set[str]] = []


@contextmanager
def recording_reads() -> Iterator[set[str]]:
    """The set of knobs read as attributes (``settings.n_draws``) until the block ends."""
    reads: set[str] = set()
    _RECORDING.append(reads)
    try:
        yield reads
    finally:
        _RECORDING.pop()


@dataclass(frozen=True)
class Settings:
    """The resolved parameters of one run: read knobs as attributes (``settings.n_draws``)."""

    paper: str
    scale: str
    seed: int
    use_cache: bool
    values: Mapping[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "values")
        if name in values:
            for reads in _RECORDING:
                reads.add(name)
            return values[name]
        raise AttributeError(f"{name!r} is not a parameter of {self.paper}; parameters: {sorted(values)}")

    def to_dict(self) -> dict[str, Any]:
        """All parameters but ``use_cache`` (which does not change results), as plain data."""
        return {"scale": self.scale, "seed": self.seed, **dict(self.values)}

    @property
    def out_dir(self):
        """Where this run's figures and results.json go (see :mod:`mlsysrepro.core.paths`)."""
        return paths.output_dir(self.paper, self.scale)

    def with_values(self, **changes: Any) -> "Settings":
        """These settings with some knobs changed (an assumption's other values); a name that is not a knob is an
        error."""
        unknown = sorted(set(changes) - set(self.values))
        if unknown:
            raise ValueError(f"{unknown} are not parameters of {self.paper}; parameters: {sorted(self.values)}")
        return Settings(self.paper, self.scale, self.seed, self.use_cache, MappingProxyType({**self.values, **changes}))

    def __reduce__(self):
        """Pickle through a plain dict (a mapping proxy does not pickle), so settings can go to worker processes."""
        return _unpickle_settings, (self.paper, self.scale, self.seed, self.use_cache, dict(self.values))


def _unpickle_settings(paper: str, scale: str, seed: int, use_cache: bool, values: dict) -> Settings:
    return Settings(paper, scale, seed, use_cache, MappingProxyType(values))


def _type_name(kind: type) -> str:
    return kind.__name__


def _check_type(name: str, value: Any, kind: type) -> Any:
    """Return ``value`` as ``kind`` or raise; ints are accepted for floats, bools only for bools."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, bool):
        ok = False
    elif kind in (list, tuple):
        ok = isinstance(value, (list, tuple))
        value = kind(value) if ok else value
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise ValueError(
            f"parameter {name!r} must be of type {_type_name(kind)}, got {value!r} ({type(value).__name__})"
        )
    return value


@dataclass(frozen=True)
class Above:
    """An exclusive lower bound in a ``RANGES`` entry: ``"lr": (Above(0), None)`` admits every rate above 0, so the
    degenerate value (a learning rate of 0 trains nothing) is refused with the parameter's name."""

    value: float

    def __str__(self) -> str:
        return f"> {self.value}"


def _check_range(name: str, value: Any, bounds: tuple[float | Above | None, float | None]) -> None:
    """Raise unless ``value`` (every element, for a list) lies within ``bounds``: inclusive, or exclusive where the
    lower bound is :class:`Above` (None: unbounded)."""
    low, high = bounds
    for item in value if isinstance(value, (list, tuple)) else (value,):
        below = item <= low.value if isinstance(low, Above) else low is not None and item < low
        if below or (high is not None and item > high):
            floor = str(low) if isinstance(low, Above) else f">= {low}"
            allowed = (floor if high is None else f"<= {high}" if low is None
                       else f"{floor} and <= {high}" if isinstance(low, Above) else f"in [{low}, {high}]")
            raise ValueError(f"parameter {name!r} must be {allowed}" + (" (each element)" if value is not item else "")
                             + f", got {value!r}")


def validate_presets(presets: Mapping[str, Mapping[str, Any]],
                     ranges: Mapping[str, tuple[float | None, float | None]] | None = None) -> None:
    """Check a PRESETS table: exactly the three scales, the same knobs with the same types in each, each within
    its declared range."""
    if tuple(presets) != SCALES:
        raise ValueError(f"PRESETS must define the scales {SCALES} in that order, got {tuple(presets)}")
    reference = presets["default"]
    for scale, values in presets.items():
        if set(values) != set(reference):
            raise ValueError(
                f"PRESETS[{scale!r}] has knobs {sorted(values)}, PRESETS['default'] has {sorted(reference)}"
            )
        for name, value in values.items():
            if name in COMMON:
                raise ValueError(f"PRESETS may not redefine the common parameter {name!r}")
            _check_type(f"{scale}.{name}", value, type(reference[name]))
            if name in (ranges or {}):
                _check_range(f"{scale}.{name}", value, ranges[name])
    stray = sorted(set(ranges or {}) - set(reference))
    if stray:
        raise ValueError(f"ranges given for {stray}, which are not knobs of these PRESETS")


def resolve(paper: str, presets: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any],
            ranges: Mapping[str, tuple[float | None, float | None]] | None = None) -> Settings:
    """Merge ``params`` over the preset of ``params['scale']`` and validate every value.

    ``params`` holds the notebook's parameters; a knob whose value is ``None`` takes the
    preset's value. ``ranges`` (a paper module's ``RANGES``) gives a knob its inclusive bounds, ``(1, None)`` for
    a count, or an exclusive lower one, ``(Above(0), None)`` for a learning rate. Raises ``ValueError`` naming the
    offending parameter and what is allowed.
    """
    validate_presets(presets, ranges)
    allowed = sorted(set(COMMON) | set(presets["default"]))
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for {paper}; allowed parameters: {allowed}")
    scale = params.get("scale", COMMON["scale"][1])
    if scale not in presets:
        raise ValueError(f"parameter 'scale' must be one of {list(SCALES)}, got {scale!r}")
    common = {
        name: _check_type(name, params.get(name, default), kind) for name, (kind, default) in COMMON.items()
    }
    if common["seed"] < 0:
        raise ValueError(f"parameter 'seed' must be >= 0, got {common['seed']}")
    values = {}
    for name, preset_value in presets[scale].items():
        given = params.get(name)
        values[name] = preset_value if given is None else _check_type(name, given, type(preset_value))
        if name in (ranges or {}):
            _check_range(name, values[name], ranges[name])
    return Settings(paper, common["scale"], common["seed"], common["use_cache"], MappingProxyType(values))


def injected_parameter_names(history: list[str]) -> set[str]:
    """Names assigned in the cells papermill injected, read from IPython's input history ``In``."""
    names: set[str] = set()
    for source in history:
        if not source.lstrip().startswith(_PAPERMILL_HEADER):
            continue
        for node in ast.parse(source).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def resolve_notebook(paper: str, presets: Mapping[str, Mapping[str, Any]], namespace: Mapping[str, Any],
                     ranges: Mapping[str, tuple[float | None, float | None]] | None = None) -> Settings:
    """:func:`resolve` for a notebook: ``settings = resolve_notebook("llcg", PRESETS, globals(), RANGES)``.

    Reads the common parameters and every knob from the notebook's namespace, and rejects any
    name papermill injected that is not a parameter (a misspelt ``-p``), which papermill
    itself would only warn about.
    """
    known = set(COMMON) | set(presets["default"])
    params = {name: namespace[name] for name in known if name in namespace}
    for name in injected_parameter_names(list(namespace.get("In", []))):
        params.setdefault(name, namespace.get(name))
    return resolve(paper, presets, params, ranges)


def beside_paper(settings: Settings, paper: Mapping[str, Any], ours: Mapping[str, Any] | None = None):
    """This run's setting beside the paper's, a (pandas) table with one row per key of ``paper``. ``ours`` gives
    this run's entry for each key; by default it is the knob of the same name."""
    import pandas as pd

    ours = {key: settings.values[key] for key in paper} if ours is None else ours
    return pd.DataFrame({f"this run ({settings.scale})": [ours[key] for key in paper], "paper": list(paper.values())},
                        index=list(paper))
