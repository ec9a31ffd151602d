"""How long each notebook took at ``default``, from the cache empty (cold) and full (warm): ``figures/runtimes.json``.

The runner (:mod:`mlsysrepro.runner`) records every successful ``default`` run here (:func:`record_run`): its wall
time, cold when the notebook's cache folder (``data/cache/<paper>/``) held nothing when it started, warm when the
run computed no new entry (:func:`run_kind`; a notebook that caches nothing has one time for both, a run on a
partly stale cache is neither), how many notebooks ran at once (``--jobs``), the machine's cores, its
processor, the vector instructions torch's CPU kernels use there (``kernels``: two machines that both call themselves
"AMD EPYC" ran these notebooks 2x apart, one with AVX-512 kernels and one with AVX2) and the date. The README's
runtime table is generated from this file (:func:`markdown_table`), so the times it shows are measured, never typed.
Timings are kept apart from the results: two runs of one seed give the same ``results.json`` bytes, never the same
times.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

from . import paths
from .timing import machine

KINDS = ("cold", "warm")


def runtimes_file() -> Path:
    """``figures/runtimes.json``; ``MLSYSREPRO_RUNTIMES`` points elsewhere (the tests use a temporary file)."""
    return Path(os.environ.get("MLSYSREPRO_RUNTIMES", paths.figures_root(paths.COMMITTED_SCALE) / "runtimes.json"))


def cache_entries(paper: str) -> frozenset[str]:
    """The names of the entries in the notebook's cache folder (none when it is missing)."""
    folder = paths.cache_dir() / paper
    return frozenset(p.name for p in folder.iterdir()) if folder.is_dir() else frozenset()


def load() -> dict[str, dict[str, dict]]:
    """``{notebook: {"cold" | "warm": {"seconds", "jobs", "cores", "processor", "kernels", "date"}}}``; empty when
    none (an entry recorded before ``kernels`` was has none)."""
    path = runtimes_file()
    return json.loads(path.read_text()) if path.exists() else {}


def record(notebook: str, seconds: float, cold: bool, jobs: int, date: datetime.date | None = None) -> None:
    """Keep ``seconds`` as the notebook's latest cold or warm time (replacing the one before of that kind)."""
    if seconds < 0:
        raise ValueError(f"seconds must be >= 0, got {seconds}")
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    table = load()
    table.setdefault(notebook, {})["cold" if cold else "warm"] = {
        "seconds": round(seconds, 1), "jobs": jobs, "cores": os.cpu_count() or 1,
        "processor": machine()["cpu"], "kernels": machine()["cpu kernels"],
        "date": (date or datetime.date.today()).isoformat()}
    path = runtimes_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(sorted(table.items())), indent=1, sort_keys=True) + "\n")
    tmp.replace(path)  # never half-written


def run_kind(before: frozenset[str], after: frozenset[str]) -> tuple[str, ...]:
    """What a run was, from its cache entries before and after (:func:`cache_entries`): ``cold`` when it started
    with none, ``warm`` when it computed no new one; a notebook that caches nothing is both on every run, and a run
    that started with some entries and still computed others (a stale or partial cache) is neither."""
    kinds = ("cold",) if not before else ()
    if after == before:
        kinds += ("warm",)
    return kinds


def record_run(notebook: str, seconds: float, before: frozenset[str], jobs: int) -> tuple[str, ...]:
    """Record one successful run under each kind :func:`run_kind` gives it (``before``: its cache entries when it
    started); returns those kinds."""
    kinds = run_kind(before, cache_entries(notebook))
    for kind in kinds:
        record(notebook, seconds, cold=kind == "cold", jobs=jobs)
    return kinds


def _cell(entry: dict | None) -> str:
    if entry is None:
        return "not measured"
    minutes = entry["seconds"] / 60
    side = (f", {entry['kernels']}" if "kernels" in entry else "") + \
        ("" if entry["jobs"] == 1 else f", {entry['jobs']} at once")
    return f"{minutes:.1f} min ({entry['date']}{side})"


def markdown_table(notebooks: list[str]) -> str:
    """One row per notebook (cold and warm minutes, the date each was measured, how many ran at once) and each
    kind's total over the notebooks measured in it, with how many were not."""
    table = load()
    lines = ["| notebook | cold cache | warm cache |", "|---|---|---|"]
    totals = {kind: 0.0 for kind in KINDS}
    missing = {kind: 0 for kind in KINDS}
    for name in notebooks:
        entries = table.get(name, {})
        lines.append(f"| `{name}` | {_cell(entries.get('cold'))} | {_cell(entries.get('warm'))} |")
        for kind in KINDS:
            if kind in entries:
                totals[kind] += entries[kind]["seconds"]
            else:
                missing[kind] += 1
    cells = [f"**{totals[kind] / 60:.0f} min**" + (f" ({missing[kind]} not measured)" if missing[kind] else "")
             for kind in KINDS]
    lines.append(f"| **all** | {cells[0]} | {cells[1]} |")
    cores = sorted({entry["cores"] for entries in table.values() for entry in entries.values()})
    processors = sorted({entry["processor"] for entries in table.values() for entry in entries.values()})
    if cores:
        lines += ["", f"Measured on {', '.join(processors)} with {', '.join(map(str, cores))} cores; where a cell "
                  "names them, the vector instructions of torch's CPU kernels (machines with other kernels run at "
                  "another speed, and their trained models differ in the last bits)."]
    return "\n".join(lines)
