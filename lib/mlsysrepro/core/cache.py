"""Expensive artifacts (trained checkpoints, profiles, simulation tables) cached under ``data/cache/``.

An artifact is keyed by the run's seed, the values of an explicit list of the knobs it depends on, its name, and
the **source of the code that computes it**: the module that defines ``compute`` and every module of this package
it imports, directly or through others (:func:`source_hash`), plus the data registry (``datasets.json``, the
checksums of every dataset), and the vector instructions of torch's CPU kernels (:func:`cpu_kernels`: a machine
with other kernels computes other last bits, so it never reads another's entries). Editing any of that code or data
gives new keys, so no entry outlives the code that made it; a change outside it (a notebook, another paper's module,
an installed library's version) does not. The sources are read at every call, so editing and reloading a module in a live kernel rekeys its entries too. A knob
that does not change the artifact (a worker count) is left out of the list, so changing it never invalidates the
cache; the knobs a computation reads are recorded while it runs, and one that reads a knob its list omits is not
cached (the tests make it an error), so a forgotten knob can never serve an old result. ``use_cache=False`` (every notebook's parameter) recomputes and
overwrites each entry once per process: an entry this process has itself recomputed is read back (a notebook that
asks twice for the same comparison computes it once), an entry from before is never::

    w_star = cached("w_star", settings, fit, knobs=("n_samples", "n_features", "fit_steps"))

An entry is one file, written atomically: a header with the SHA-256 of its payload, then the payload. On read the
hash is checked and the payload loaded with ``torch.load(weights_only=True)`` -- tensors and plain data only, never
a pickled object that could run code; data frames are stored as their columns (:func:`encode`). An entry that
fails either check is recomputed, with a warning that names the file. An entry that cannot be written (a read-only
``data/``, a full disk) costs the next run a recomputation, never this run its result: one warning names the file.
A sweep of independent runs is cached one entry per run (:func:`cached_parts`), each written as it finishes, so a
run that stops half-way keeps what it finished.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import tempfile
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd
import torch

from . import paths
from .settings import Settings, recording_reads

PACKAGE = "mlsysrepro"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: First bytes of every cache entry; the payload's SHA-256 follows on the same line.
MAGIC = b"mlsysrepro-cache-1 "


def _module_file(name: str) -> Path | None:
    """The source file of a module of this package (``mlsysrepro.gnn.mvs``), or None if there is none."""
    parts = name.split(".")[1:]
    base = PACKAGE_DIR.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(name: str, path: Path, source: bytes | None = None) -> set[str]:
    """The modules of this package that ``name`` (at ``path``) imports, read from its ``source`` (the file's bytes
    by default); parsed once per distinct source (:data:`_PARSED`)."""
    source = path.read_bytes() if source is None else source
    key = (name, hashlib.sha256(source).digest())
    if key not in _PARSED:
        _PARSED[key] = _parse_imports(name, path, source)
    return _PARSED[key]


#: (module, SHA-256 of its source) -> the package modules it imports: a file is parsed again only once it changed.
_PARSED: dict[tuple[str, bytes], set[str]] = {}


def _parse_imports(name: str, path: Path, source: bytes) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from . import plots` names a module
    return {m for m in found if (m == PACKAGE or m.startswith(PACKAGE + ".")) and _module_file(m) is not None}


#: Modules that only draw figures: no cached artifact is computed by them (tests/test_layering.py checks that
#: nothing but the report imports them), so editing them keeps every cache.
DRAWING_MODULES = frozenset({f"{PACKAGE}.core.plots"})


def source_hash(module: str | None = None) -> str:
    """SHA-256 of the source of ``module`` and of every module of this package it imports, transitively, and of
    the data registry; None or a module outside the package (a notebook's ``__main__``, a test) hashes the whole
    package. :data:`DRAWING_MODULES` are left out. The files are read at every call, so a module edited and
    reloaded in a live kernel rekeys its entries (only the parse of an unchanged file is remembered)."""
    if module is None or not module.startswith(PACKAGE + ".") or _module_file(module) is None:
        files = sorted(set(PACKAGE_DIR.rglob("*.py")) - {_module_file(name) for name in DRAWING_MODULES})
        sources = {path: path.read_bytes() for path in files}
    else:
        sources, seen, todo = {}, set(), [module]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            path = _module_file(name)
            sources[path] = path.read_bytes()
            todo.extend(_imports(name, path, sources[path]) - DRAWING_MODULES)
    registry = PACKAGE_DIR / "core" / "datasets.json"
    digest = hashlib.sha256()
    for path in sorted(sources) + [registry]:
        source = sources[path] if path in sources else path.read_bytes()
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode() + b"\0" + source + b"\0")
    return digest.hexdigest()


def cpu_kernels() -> str:
    """The vector instructions torch's CPU kernels take on this machine (``"AVX2"``, ``"AVX512"``, ...): part of every
    key, because machines that differ in them compute different last bits from the same code and seed (BaKlaVa's
    models trained with AVX2 and with AVX-512 kernels differed, and two verdicts that sat at their thresholds moved)."""
    return torch.backends.cpu.get_cpu_capability()


def cache_key(name: str, settings: Settings, knobs: Iterable[str], source: str | None = None) -> str:
    """A short stable hash of the paper, the seed, ``name``, the values of ``knobs``, :func:`source_hash` of the
    ``source`` module and :func:`cpu_kernels`; a ValueError names a knob that is not one of the paper's parameters."""
    knobs = sorted(set(knobs))
    unknown = [k for k in knobs if k not in settings.values]
    if unknown:
        raise ValueError(f"knobs {unknown} are not parameters of {settings.paper}; parameters: "
                         f"{sorted(settings.values)}")
    blob = json.dumps([settings.paper, settings.seed, name, source_hash(source), cpu_kernels(),
                       {k: settings.values[k] for k in knobs}], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cache_path(name: str, settings: Settings, knobs: Iterable[str], source: str | None = None) -> Path:
    """``data/cache/<paper>/<name>-<key>.pt``."""
    return paths.cache_dir() / settings.paper / f"{name}-{cache_key(name, settings, knobs, source)}.pt"


# --- plain data in, plain data out: what torch.load(weights_only=True) can read back ------------------------

def _encode_array(values: np.ndarray) -> Any:
    if values.dtype.kind in "biuf" and values.dtype != np.float16:
        return torch.from_numpy(values.copy())  # a copy: owned, writable and contiguous
    return [encode(v) for v in values.tolist()]


def _encode_index(index: pd.Index) -> dict:
    if isinstance(index, pd.RangeIndex):
        return {"range": [index.start, index.stop, index.step], "name": index.name}
    if isinstance(index, pd.MultiIndex):
        return {"levels": [_encode_index(index.get_level_values(i)) for i in range(index.nlevels)],
                "names": list(index.names)}
    return {"values": _encode_array(index.to_numpy()), "dtype": str(index.dtype), "name": index.name}


def _decode_index(data: dict) -> pd.Index:
    if "range" in data:
        return pd.RangeIndex(*data["range"], name=data["name"])
    if "levels" in data:
        return pd.MultiIndex.from_arrays([_decode_index(level) for level in data["levels"]], names=data["names"])
    return pd.Index(_decode_values(data["values"]), dtype=data["dtype"], name=data["name"])


def _decode_values(values: Any) -> Any:
    return values.numpy() if isinstance(values, torch.Tensor) else [decode(v) for v in values]


def encode(value: Any) -> Any:
    """``value`` as tensors, numbers, strings, lists, tuples and dicts only; a DataFrame or Series becomes its
    columns, index and dtypes (:func:`decode` rebuilds it). Anything else raises TypeError."""
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return {"__ndarray__": _encode_array(value), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, pd.DataFrame):
        return {"__dataframe__": {
            "columns": _encode_index(value.columns), "index": _encode_index(value.index),
            "data": [_encode_array(value.iloc[:, i].to_numpy()) for i in range(value.shape[1])],
            "dtypes": [str(dtype) for dtype in value.dtypes]}}
    if isinstance(value, pd.Series):
        return {"__series__": {"values": _encode_array(value.to_numpy()), "dtype": str(value.dtype),
                               "index": _encode_index(value.index), "name": encode(value.name)}}
    if isinstance(value, OrderedDict):
        return OrderedDict((k, encode(v)) for k, v in value.items())
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(encode(v) for v in value)
    raise TypeError(f"cannot cache a {type(value).__name__}: store tensors, numbers, strings, frames and "
                    "lists, tuples or dicts of them")


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`."""
    if isinstance(value, dict) and "__dataframe__" in value:
        data = value["__dataframe__"]
        columns = _decode_index(data["columns"])
        frame = pd.DataFrame({i: pd.Series(_decode_values(v), dtype=dtype)
                              for i, (v, dtype) in enumerate(zip(data["data"], data["dtypes"]))})
        frame.columns, frame.index = columns, _decode_index(data["index"])
        return frame
    if isinstance(value, dict) and "__series__" in value:
        data = value["__series__"]
        return pd.Series(_decode_values(data["values"]), dtype=data["dtype"], index=_decode_index(data["index"]),
                         name=decode(data["name"]))
    if isinstance(value, dict) and "__ndarray__" in value:
        return np.asarray(_decode_values(value["__ndarray__"]), dtype=value["dtype"]).reshape(value["shape"])
    if isinstance(value, OrderedDict):
        return OrderedDict((k, decode(v)) for k, v in value.items())
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(decode(v) for v in value)
    return value


class CorruptEntry(Exception):
    """A cache entry whose bytes do not match their recorded hash, or that cannot be read back."""


def write_entry(path: Path, value: Any) -> None:
    """Write ``value`` to ``path`` atomically: the header with the payload's SHA-256, then the payload."""
    buffer = io.BytesIO()
    torch.save(encode(value), buffer)
    payload = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def read_entry(path: Path) -> Any:
    """The value stored at ``path``; :class:`CorruptEntry` if its hash does not match or it cannot be loaded."""
    blob = path.read_bytes()
    header, _, payload = blob.partition(b"\n")
    if not header.startswith(MAGIC):
        raise CorruptEntry("no mlsysrepro cache header")
    if hashlib.sha256(payload).hexdigest().encode() != header[len(MAGIC):]:
        raise CorruptEntry("its SHA-256 does not match the one recorded when it was written")
    try:
        return decode(torch.load(io.BytesIO(payload), weights_only=True))
    except Exception as error:  # an entry that passes its hash but not the safe loader was not written by us
        raise CorruptEntry(f"it does not load as plain data ({type(error).__name__}: {error})") from error


class IncompleteKey(Exception):
    """A cached computation read a knob its key omits (raised where ``MLSYSREPRO_STRICT_KEYS`` is set)."""


#: Knobs that say how a computation runs, never what it computes: a key leaves them out.
UNKEYED_KNOBS = frozenset({"workers"})
#: Set (to anything) to make a computation that reads a knob its key omits raise instead of warn.
STRICT_KEYS_ENV = "MLSYSREPRO_STRICT_KEYS"

#: The entries this process recomputed with ``use_cache=False``: with it false they, and only they, are read back.
_WRITTEN: set[Path] = set()
#: Whether this process has already warned that it cannot write the cache (read-only ``data/``, a full disk).
_WARNED_UNWRITABLE = False


def _keep_unwritten(path: Path, error: OSError) -> None:
    """A cache entry that cannot be written costs the next run a recomputation, not this run its result: warn once
    per process, naming the file and the error."""
    global _WARNED_UNWRITABLE
    if not _WARNED_UNWRITABLE:
        _WARNED_UNWRITABLE = True
        warnings.warn(f"cannot write the cache entry {path} ({error}); this run keeps its results, but the next "
                      f"one will compute them again (further entries that fail are not reported)", stacklevel=3)


def _read_if_usable(path: Path, settings: Settings) -> tuple[bool, Any]:
    """(True, the value stored at ``path``) when it may be served (``settings.use_cache``, or an entry this process
    recomputed) and verifies; (False, None) otherwise, with a warning naming an entry that fails its checks."""
    if (settings.use_cache or path in _WRITTEN) and path.exists():
        try:
            return True, read_entry(path)
        except (CorruptEntry, OSError) as error:
            warnings.warn(f"cache entry {path} is not usable ({error}); recomputing it", stacklevel=3)
    return False, None


def _unkeyed_reads(name: str, settings: Settings, reads: set[str], knobs: Iterable[str]) -> str | None:
    """The message for a computation that read knobs its key omits (None when it read none)."""
    unkeyed = sorted(reads - set(knobs) - UNKEYED_KNOBS)
    if not unkeyed:
        return None
    return (f"cached computation {name!r} of {settings.paper} read the knobs {unkeyed}, which its key omits "
            f"(knobs={sorted(set(knobs))}): an entry keyed without them would be served after they change. "
            "Add them to its knobs=.")


def _refuse(message: str) -> None:
    """Raise :class:`IncompleteKey` where ``MLSYSREPRO_STRICT_KEYS`` is set; warn otherwise."""
    if os.environ.get(STRICT_KEYS_ENV):
        raise IncompleteKey(message)
    warnings.warn(message + " Its result is used by this run and not cached.", stacklevel=3)


def _store(path: Path, value: Any, settings: Settings) -> None:
    """Write one entry (an unwritable cache costs the next run, not this one: :func:`_keep_unwritten`)."""
    try:
        write_entry(path, value)
    except OSError as error:
        _keep_unwritten(path, error)
        return
    if not settings.use_cache:
        _WRITTEN.add(path)


def cached(name: str, settings: Settings, compute: Callable[[], Any], *, knobs: Iterable[str],
           source: str | None = None) -> Any:
    """Return ``compute()``, loading it from the cache when a verified entry for this seed, these ``knobs`` and
    this code exists (with ``settings.use_cache`` false: one this process recomputed).

    ``knobs`` lists every knob ``compute`` reads (directly or through the tasks it runs); the reads this process
    sees are recorded (:func:`mlsysrepro.core.settings.recording_reads`), and a computation that reads a knob its key
    omits (but :data:`UNKEYED_KNOBS`) is not cached, with a warning, or raises :class:`IncompleteKey` where
    ``MLSYSREPRO_STRICT_KEYS`` is set (the tests set it). ``source`` names the
    module whose code (with everything of this package it imports) computes the value, by default the one that
    defines ``compute``. ``compute`` must return tensors, numbers, strings, data frames, or lists, tuples and
    dicts of them. With ``settings.use_cache`` false the entry is recomputed and overwritten, once per process.
    """
    path = cache_path(name, settings, knobs, source or compute.__module__)
    found, value = _read_if_usable(path, settings)
    if found:
        return value
    with recording_reads() as reads:
        value = compute()
    message = _unkeyed_reads(name, settings, reads, knobs)
    if message:
        _refuse(message)
        return value
    _store(path, value, settings)
    return value


def cached_parts(name: str, settings: Settings, compute: Callable[[list[int]], Iterable[Any]], count: int, *,
                 knobs: Iterable[str], source: str | None = None) -> list[Any]:
    """:func:`cached` for a value made of ``count`` independent parts (the runs of a sweep), one entry per part,
    ``<name>-<key>-<i>of<count>.pt``, each written as soon as it is computed: a run that stops half-way (a crash,
    a timeout, an interrupt) keeps the parts it finished, and the next one computes only the others.

    ``compute(missing)`` yields the values of the parts whose entries are missing (their indices, ascending), in
    that order. The parts share the key of the whole (the seed, ``knobs`` and the code of ``source``), so the
    parts themselves must follow from those alone, as the value of :func:`cached` must. A computation found to read
    a knob its key omits writes nothing, and removes the parts it had already written in this call."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    whole = cache_path(name, settings, knobs, source or compute.__module__)
    paths = [whole.with_name(f"{whole.stem}-{i}of{count}.pt") for i in range(count)]
    values: list[Any] = [None] * count
    missing = []
    for i, path in enumerate(paths):
        found, values[i] = _read_if_usable(path, settings)
        if not found:
            missing.append(i)
    if not missing:
        return values
    written, message, computed = [], None, 0
    try:
        with recording_reads() as reads:
            for i, value in zip(missing, compute(missing)):
                values[i], computed = value, computed + 1
                message = message or _unkeyed_reads(name, settings, reads, knobs)
                if message is None:
                    _store(paths[i], value, settings)
                    written.append(paths[i])
    finally:
        if message:  # nothing of a computation keyed without a knob it read outlives it
            for path in written:
                path.unlink(missing_ok=True)
                _WRITTEN.discard(path)
    if computed != len(missing):
        raise RuntimeError(f"cached computation {name!r} of {settings.paper} yielded {computed} parts for the "
                           f"{len(missing)} asked for")
    if message:
        _refuse(message)
    return values
