"""REPRODUCTION.md, the README's paper table and the notebooks' findings, generated from the committed results.json.

Only ``default``-scale results are read (``figures/<paper>/results.json``), so the files always describe what
``./run_all.sh`` regenerates. A notebook's markdown cell tagged ``finding:<key>`` receives the finding the run
recorded under that key (:meth:`mlsysrepro.core.claims.Report.finding`) and the section's runtime, so the committed
notebook states its findings, with computed numbers, on GitHub. A markdown cell tagged ``listing:<module>.<name>``
receives the source of that library function (the paper's algorithm on the page, always the code that runs).
``python -m mlsysrepro.reproduction`` rewrites all of them; ``--check`` exits 1 when any is out of date (a test
runs it).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
import textwrap
from pathlib import Path

import nbformat

from .catalog import PAPERS, TEMPLATE, Paper
from .core import paths
from .core.claims import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, VERDICTS

FINDING_TAG = "finding:"
LISTING_TAG = "listing:"
README = paths.REPO_ROOT / "README.md"
REPRODUCTION = paths.REPO_ROOT / "REPRODUCTION.md"
TABLE_START, TABLE_END = "<!-- papers:start -->", "<!-- papers:end -->"


def _results(paper: Paper) -> dict | None:
    """The paper's committed results, None if it has none or its last run failed (its folder then still holds
    the run before, which no longer describes the notebook)."""
    path = paper.results_path()
    if not path.exists() or last_run_failed(paper):
        return None
    return json.loads(path.read_text())


def last_run_failed(paper: Paper) -> bool:
    return paths.failure_marker(paper.name, paths.COMMITTED_SCALE).exists()


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return "`" + json.dumps(value) + "`"
    return "" if value is None else str(value).replace("|", "\\|")


def tally(results: dict, kind: str = "paper claim") -> dict[str, int]:
    """How many claims of ``kind`` ("paper claim" or "consistency check") got each verdict."""
    counts = dict.fromkeys(VERDICTS, 0)
    for claim in results["claims"]:
        if claim["kind"] == kind:
            counts[claim["verdict"]] += 1
    return counts


def status(paper: Paper, results: dict | None) -> str:
    """Where a paper stands, from its verdicts: ``planned`` (no notebook), ``not run`` (no committed
    results), ``reproduced`` (every testable paper claim holds), ``partly reproduced`` (some hold),
    ``not reproduced at this scale`` (none holds)."""
    if not paper.notebook.exists():
        return "planned"
    if last_run_failed(paper):
        return "failed in its last run"
    if results is None:
        return "not run"
    counts = tally(results)
    testable = counts[HOLDS] + counts[FAILS] + counts[INCONCLUSIVE]
    if testable and counts[HOLDS] == testable:
        return "reproduced"
    return "partly reproduced" if counts[HOLDS] else "not reproduced at this scale"


def verdict_summary(results: dict | None) -> str:
    """``k of n hold, m inconclusive, t not testable`` for the paper claims; ``-`` without results."""
    if not results:
        return "-"
    counts = tally(results)
    total = sum(counts.values())
    text = f"{counts[HOLDS]} of {total} hold"
    text += "".join(f", {counts[v]} {v.replace(' here', '')}" for v in (FAILS, INCONCLUSIVE, NOT_TESTABLE) if counts[v])
    return text


def checks_summary(results: dict | None) -> str:
    """``k of n pass`` for the consistency checks; ``-`` without any."""
    counts = tally(results, "consistency check") if results else {}
    total = sum(counts.values())
    return f"{counts[HOLDS]} of {total} pass" if total else "-"


def paper_table() -> str:
    """The README's table: every paper, its notebook and status, and its verdicts."""
    rows = ["| paper | venue | theme | notebook | status | paper claims | consistency checks |",
            "|---|---|---|---|---|---|---|"]
    for p in PAPERS:
        notebook = f"[`{p.name}.ipynb`](notebooks/{p.name}.ipynb)" if p.notebook.exists() else f"`{p.name}.ipynb`"
        title = f"[{p.title}]({p.link})" if p.link else p.title
        results = _results(p)
        rows.append(f"| {title} | {p.venue} | {p.theme} | {notebook} | {status(p, results)} | "
                    f"{verdict_summary(results)} | {checks_summary(results)} |")
    return "\n".join(rows)


def _claim_rows(claims: list[dict]) -> list[str]:
    lines = ["| id | where | statement | paper | unit | ours | 95 % interval | settings | vs paper | rule | verdict | why | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in claims:
        verdict = ("**" + c["verdict"] + "**" if c["verdict"] != HOLDS else c["verdict"]) + (
            " (timing)" if c["timing"] else "")
        interval = "" if c["interval"] is None else f"[{_fmt(c['interval'][0])}, {_fmt(c['interval'][1])}]"
        lines.append(
            f"| {c['id']} | {c['where']} | {_fmt(c['statement'])} | {_fmt(c['paper_value'])} | {_fmt(c['unit'])} | "
            f"{_fmt(c['measured'])} | {interval} | {_fmt(c['settings_held'])} | {c['vs_paper']} | `{c['rule']}` | "
            f"{verdict} | {_fmt(c['why'])} | {_fmt(c['note'])} |"
        )
    return lines


def _paper_section(paper: Paper, results: dict) -> list[str]:
    lines = [f"## {results['title']}", ""]
    if paper.is_paper:
        notebook = f"notebooks/{paper.name}.ipynb"
        lines += [f"{paper.venue}, {paper.link}. Notebook: [`{notebook}`]({notebook}).", ""]
    lines += [f"Scale `{results['scale']}`, seed {results['seed']}. Status: **{status(paper, results)}**; "
              f"paper claims: {verdict_summary(results)}; consistency checks: {checks_summary(results)}.", ""]
    for kind, heading in (("paper claim", "Paper claims"), ("consistency check", "Consistency checks of this reproduction")):
        claims = [c for c in results["claims"] if c["kind"] == kind]
        if claims:
            lines += [f"**{heading}**", "", *_claim_rows(claims), ""]
    findings = all_findings(results)
    if findings:
        lines += ["**What the run found**", ""] + [f"- {text}" for text in findings.values()] + [""]
    figures = [f"[{name}](figures/{paper.name}/{name})" for name in results["figures"]]
    lines += ["Figures: " + ", ".join(figures), ""]
    return lines


def all_findings(results: dict) -> dict[str, str]:
    """The run's findings, the ones quoting wall-clock numbers included, in the order the notebook recorded them."""
    timed = results.get("timings", {}).get("findings", {})
    order = [key for key, _ in results.get("timings", {}).get("section_seconds", [])]
    merged = {**results.get("findings", {}), **timed}
    return {key: merged[key] for key in sorted(merged, key=lambda k: order.index(k) if k in order else len(order))}


def _tagged(cell, tag: str) -> str | None:
    """The key of ``cell``'s first ``<tag><key>`` tag, None if it has none (or is not markdown)."""
    keys = [t[len(tag):] for t in cell.metadata.get("tags", []) if t.startswith(tag)]
    return keys[0] if keys and cell.cell_type == "markdown" else None


def _library_object(dotted: str):
    """The object ``dotted`` names: a module's function or class, or a class's method (``module.Class.method``)."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ImportError(f"no module in {dotted!r}")


def listing_markdown(dotted: str) -> str:
    """The markdown listing of the library function, class or method ``dotted`` (``mlsysrepro.<module>.<name>``):
    its source and where it lives, linked from the notebook folder. A name that does not resolve raises ValueError."""
    try:
        function = _library_object(dotted)
        lines, first = inspect.getsourcelines(function)
    except (ImportError, AttributeError, TypeError, OSError) as error:
        raise ValueError(f"cell tagged {LISTING_TAG}{dotted}: no function {dotted!r} in the library ({error})") \
            from error
    path = Path(inspect.getsourcefile(function)).resolve().relative_to(paths.REPO_ROOT)
    last = first + len(lines) - 1
    return (f"`{dotted}`, from [`{path}` lines {first}–{last}](../{path}#L{first}-L{last}) (copied from the "
            "library by `python -m mlsysrepro.reproduction`, so it is always the code the notebook runs):\n\n"
            "```python\n" + textwrap.dedent("".join(lines)).rstrip() + "\n```")


def notebook_with_generated_cells(notebook: str, results: dict | None) -> str:
    """``notebook`` (its JSON text) with every markdown cell tagged ``listing:<function>`` set to that function's
    listing and, given the committed ``results``, every one tagged ``finding:<key>`` set to the run's finding
    ``key`` and the section's runtime; a tagged cell whose finding the run did not record raises ValueError."""
    nb = nbformat.reads(notebook, as_version=4)
    findings = all_findings(results) if results else {}
    seconds = dict(results.get("timings", {}).get("section_seconds", [])) if results else {}
    for cell in nb.cells:
        if _tagged(cell, LISTING_TAG):
            cell.source = listing_markdown(_tagged(cell, LISTING_TAG))
        key = _tagged(cell, FINDING_TAG)
        if key is None or results is None:
            continue
        if key not in findings:
            raise ValueError(f"cell tagged {FINDING_TAG}{key} has no finding {key!r} in {results['paper']}'s "
                             f"results.json; recorded: {sorted(findings)}")
        cell.source = (findings[key] + f"\n\n*From the committed `default` run, where this section took "
                       f"{seconds.get(key, float('nan')):.0f} s; running the cell above recomputes it.*")
    return nbformat.writes(nb) + "\n"


def _notebooks_with_generated_cells() -> dict[Path, str]:
    """Every notebook with a cell tagged for a finding or a listing, as the committed results and the library's
    source would make it."""
    wanted = {}
    for paper in (*PAPERS, TEMPLATE):
        if not paper.notebook.exists():
            continue
        text = paper.notebook.read_text()
        if f'"{FINDING_TAG}' in text or f'"{LISTING_TAG}' in text:
            wanted[paper.notebook] = notebook_with_generated_cells(text, _results(paper))
    return wanted


def reproduction_markdown() -> str:
    lines = [
        "# Reproduction status",
        "",
        "Generated by `./run_all.sh` from `figures/<paper>/results.json` (scale `default` only); do not edit by hand.",
        "Every claim was declared in its paper module before the run (`mlsysrepro.papers.<name>.CLAIMS`) and is",
        "judged by the rule shown on the value the notebook measured: **holds**, **fails**, **inconclusive** (the 95 %",
        "interval from seeds, timing repeats or a bootstrap over settings straddles the threshold) or **not testable",
        "here** (with the reason). A claim over several settings must pass on the stated share of them and for the",
        "median; a claim that a method beats a baseline must fail for the baseline. Consistency checks (quantities",
        "fixed by how this reproduction is built) are counted apart. A verdict marked (timing) rests on wall-clock",
        "time and may change from run to run.",
        "",
        paper_table(),
        "",
    ]
    for paper in (*PAPERS, TEMPLATE):
        results = _results(paper)
        if results is not None:
            lines += _paper_section(paper, results)
    return "\n".join(lines).rstrip() + "\n"


def readme_with_table(readme: str) -> str:
    start, end = readme.index(TABLE_START) + len(TABLE_START), readme.index(TABLE_END)
    return readme[:start] + "\n" + paper_table() + "\n" + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if REPRODUCTION.md or README.md is stale")
    args = parser.parse_args(argv)
    wanted = {REPRODUCTION: reproduction_markdown(), README: readme_with_table(README.read_text()),
              **_notebooks_with_generated_cells()}
    stale = [p.name for p, text in wanted.items() if not p.exists() or p.read_text() != text]
    if args.check:
        if stale:
            print(f"out of date: {', '.join(stale)}; run `python -m mlsysrepro.reproduction`", file=sys.stderr)
        return 1 if stale else 0
    for path, text in wanted.items():
        Path(path).write_text(text)
    print(f"wrote {REPRODUCTION.name}, the paper table in {README.name} and the notebooks' findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
