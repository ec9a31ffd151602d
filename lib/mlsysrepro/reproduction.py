"""REPRODUCTION.md, the README's paper table and the notebooks' findings, generated from the committed results.json.

Only ``default``-scale results are read (``figures/<paper>/results.json``), so the files always describe what
``./run_all.sh`` regenerates. A notebook's markdown cell tagged ``finding:<key>`` receives the finding the run
recorded under that key (:meth:`mlsysrepro.core.claims.Report.finding`) and the section's runtime, so the committed
notebook states its findings, with computed numbers, on GitHub; one tagged ``table:<key>`` receives, as markdown,
the table the cell above it showed (:func:`mlsysrepro.core.tables.show`), so no table is invisible in a
notebook committed without outputs. A markdown cell tagged ``listing:<module>.<name>``
receives the source of that library function (the paper's algorithm on the page, always the code that runs).
It also draws the map of the collection (:mod:`mlsysrepro.collection_map`, ``figures/collection_map.png``) that
README.md and REPRODUCTION.md open with, and writes the readers' start page, ``notebooks/README.md``
(:mod:`mlsysrepro.reading_guide`). ``python -m mlsysrepro.reproduction`` rewrites all of them; ``--check`` exits
1 when any is out of date (a test runs it; for the map it compares the points drawn, ``figures/collection_map.json``).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat

from . import collection_map, reading_guide
from .catalog import PAPERS, TEMPLATE, Paper
from .core import paths, runtimes
from .core.tables import TABLES
from .core.claims import (ANALOGUE, CONSISTENCY, FAILS, FINDING, HOLDS, INCONCLUSIVE, MIN_BOOTSTRAP_SETTINGS,
                          NOT_TESTABLE, PAPER_CLAIM, VERDICTS, assumptions_deciding, declaration_changes, qualifier)

FINDING_TAG = "finding:"
LISTING_TAG = "listing:"
TABLE_TAG = "table:"
README = paths.REPO_ROOT / "README.md"
REPRODUCTION = paths.REPO_ROOT / "REPRODUCTION.md"
MAP_POINTS = paths.REPO_ROOT / "figures" / f"{collection_map.NAME}.json"
TABLE_START, TABLE_END = "<!-- papers:start -->", "<!-- papers:end -->"
RUNTIMES_START, RUNTIMES_END = "<!-- runtimes:start -->", "<!-- runtimes:end -->"
#: How many committed runs of a paper the stability mark reads (the current results.json among them).
STABILITY_RUNS = 5


#: What a claim's declaration says in words that its run does not measure: a run judged before these were declared is
#: shown with the current declaration's (the claims are otherwise unchanged, or the run would be stale).
DECLARED_WORDS = ("threshold_why", "no_power_check")


def _results(paper: Paper) -> dict | None:
    """The paper's committed results, None if it has none, its last run failed (its folder then still holds the
    run before, which no longer describes the notebook) or its claims changed since that run (:func:`stale`); each
    claim with the words of its declaration that its run need not have recorded (:data:`DECLARED_WORDS`)."""
    path = paper.results_path()
    if not path.exists() or last_run_failed(paper) or stale(paper):
        return None
    results = json.loads(path.read_text())
    declared = {claim.id: claim for claim in paper.module().CLAIMS}
    for claim in results["claims"]:
        for name in DECLARED_WORDS:
            if getattr(declared[claim["id"]], name) and name not in claim:
                claim[name] = getattr(declared[claim["id"]], name)
    return results


def stale(paper: Paper) -> list[str]:
    """What changed in the paper's declared claims since its committed run judged them
    (:func:`mlsysrepro.core.claims.declaration_changes`): such verdicts are not served; the notebook must be rerun."""
    path = paper.results_path()
    if not path.exists():
        return []
    return declaration_changes(paper.module().CLAIMS, json.loads(path.read_text())["claims"])


def last_run_failed(paper: Paper) -> bool:
    return paths.failure_marker(paper.name, paths.COMMITTED_SCALE).exists()


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return "`" + json.dumps(value) + "`"
    return "" if value is None else str(value).replace("|", "\\|")


def tally(results: dict, kind: str = PAPER_CLAIM) -> dict[str, int]:
    """How many claims of ``kind`` (one of :data:`mlsysrepro.core.claims.KINDS`) got each verdict."""
    counts = dict.fromkeys(VERDICTS, 0)
    for claim in results["claims"]:
        if claim["kind"] == kind:
            counts[claim["verdict"]] += 1
    return counts


def status(paper: Paper, results: dict | None) -> str:
    """Where a paper stands, from its paper claims' verdicts alone (analogues, our findings and consistency checks
    never count): ``planned`` (no notebook), ``not run`` (no committed results), then, over the n paper claims,
    ``partly tested`` where most of them are not testable here, ``reproduced`` where at least two thirds were
    testable and every testable one holds firmly, ``inconclusive`` where none fails and none holds, ``not reproduced
    at this scale`` where at least one fails and none holds, and ``partly reproduced`` otherwise (some hold, and some
    fail, are inconclusive or were not testable). A hold that is fragile or depends on an assumption of ours
    (:func:`mlsysrepro.core.claims.qualifier`) does not count toward "reproduced": the status then says
    ``partly reproduced (depends on ...; fragile: ...)``, naming the assumptions and the fragile claims."""
    if not paper.notebook.exists():
        return "planned"
    if last_run_failed(paper):
        return "failed in its last run"
    if stale(paper):
        return "claims changed since its last run: rerun it"
    if results is None:
        return "not run"
    counts = tally(results)
    total = sum(counts.values())
    testable = counts[HOLDS] + counts[FAILS] + counts[INCONCLUSIVE]
    if 2 * testable < total:
        return "partly tested"
    if counts[HOLDS] == 0:
        return "inconclusive" if counts[FAILS] == 0 else "not reproduced at this scale"
    deciding = _deciding([c for c in results["claims"] if c["kind"] == PAPER_CLAIM and c["verdict"] == HOLDS])
    if counts[HOLDS] == testable and 3 * testable >= 2 * total and not deciding:
        return "reproduced"
    return "partly reproduced" + (f" ({deciding})" if deciding else "")


def _deciding(claims: list[dict]) -> str:
    """What the verdicts of ``claims`` rest on besides the paper: "depends on <the assumptions of ours whose range
    flips them>; fragile: <the fragile ones by id>" (:func:`mlsysrepro.core.claims.qualifier`); empty where nothing
    does."""
    names = list(dict.fromkeys(name for c in claims for name in assumptions_deciding(c)))
    fragile = [c["id"] for c in claims if c.get("fragility")]
    return "; ".join(([f"depends on {', '.join(names)}"] if names else [])
                     + ([f"fragile: {', '.join(fragile)}"] if fragile else []))


def verdict_summary(results: dict | None, kind: str = PAPER_CLAIM) -> str:
    """``k of n hold, m inconclusive, t not testable`` for the claims of ``kind``, with what the holds and the fails
    rest on besides the paper, the assumptions of ours and the fragile claims (:func:`_deciding`); ``-`` without
    any."""
    if not results:
        return "-"
    counts = tally(results, kind)
    total = sum(counts.values())
    if not total:
        return "-"
    deciding = {v: _deciding([c for c in results["claims"] if c["kind"] == kind and c["verdict"] == v])
                for v in (HOLDS, FAILS)}

    def count(verdict: str) -> str:
        return f"{counts[verdict]}" + (f" ({deciding[verdict]})" if deciding.get(verdict) else "")

    text = f"{count(HOLDS)} of {total} hold"
    text += "".join(f", {count(v)} {v.replace(' here', '')}" for v in (FAILS, INCONCLUSIVE, NOT_TESTABLE)
                    if counts[v])
    return text


def checks_summary(results: dict | None) -> str:
    """``k of n pass`` for the consistency checks; ``-`` without any."""
    counts = tally(results, CONSISTENCY) if results else {}
    total = sum(counts.values())
    return f"{counts[HOLDS]} of {total} pass" if total else "-"


def committed_runs(paper: Paper, runs: int = STABILITY_RUNS) -> list[dict]:
    """The paper's last ``runs`` results: the current results.json, then the committed versions before it (newest
    first, one per distinct content, so committing the current one changes nothing), from git's history; only the
    current one where git has no history of it (a shallow clone, no git)."""
    path = paper.results_path()
    current = path.read_text() if path.exists() else None
    texts = [] if current is None else [current]
    relative = path.relative_to(paths.REPO_ROOT).as_posix()
    try:
        commits = subprocess.run(["git", "log", "--format=%H", "-n", str(3 * runs), "--", relative],
                                 cwd=paths.REPO_ROOT, capture_output=True, text=True, check=True).stdout.split()
        for commit in commits:
            if len(texts) >= runs:
                break
            text = subprocess.run(["git", "show", f"{commit}:{relative}"], cwd=paths.REPO_ROOT,
                                  capture_output=True, text=True, check=True).stdout
            if text not in texts:
                texts.append(text)
    except (OSError, subprocess.CalledProcessError):
        pass
    return [json.loads(text) for text in texts[:runs]]


def unstable_claims(runs: list[dict]) -> dict[str, list[str]]:
    """Claims whose verdict changed over ``runs`` (newest first): id -> the verdicts seen, oldest first."""
    seen: dict[str, list[str]] = {}
    for results in reversed(runs):
        for claim in results.get("claims", []):
            if "verdict" not in claim:  # an early results.json format
                continue
            verdicts = seen.setdefault(claim["id"], [])
            if not verdicts or verdicts[-1] != claim["verdict"]:
                verdicts.append(claim["verdict"])
    current = {claim["id"] for claim in runs[0]["claims"]} if runs else set()
    return {k: v for k, v in seen.items() if k in current and len(v) > 1}


KIND_COLUMNS = ((PAPER_CLAIM, "paper claims"), (ANALOGUE, "analogues"), (FINDING, "our findings"))


def paper_table() -> str:
    """The README's table: every paper, its notebook and status (from its paper claims), the paper claims' verdicts,
    then its analogues, our findings and consistency checks apart."""
    rows = ["| paper | venue | theme | notebook | status | paper claims | analogues | our findings | consistency "
            "checks |", "|---|---|---|---|---|---|---|---|---|"]
    for p in PAPERS:
        notebook = f"[`{p.name}.ipynb`](notebooks/{p.name}.ipynb)" if p.notebook.exists() else f"`{p.name}.ipynb`"
        title = f"[{p.title}]({p.link})" if p.link else p.title
        results = _results(p)
        rows.append(f"| {title} | {p.venue} | {p.theme} | {notebook} | {status(p, results)} | "
                    + " | ".join(verdict_summary(results, kind) for kind, _ in KIND_COLUMNS)
                    + f" | {checks_summary(results)} |")
    return "\n".join(rows)


#: The finding every notebook records as its closing list of claims ("Which parts of the paper hold"): REPRODUCTION.md
#: shows the claims as a table, so this finding is left out there (it would list every claim twice).
SUMMARY_FINDING = "summary"
#: The claims table's columns (rule, reason, robustness and notes go to a collapsible block under it).
CLAIM_COLUMNS = ("id", "claim", "paper", "ours", "95 % interval", "settings", "verdict")


def _verdict_cell(claim: dict, unstable: dict[str, list[str]]) -> str:
    verdict = ("**" + claim["verdict"] + "**" if claim["verdict"] != HOLDS else claim["verdict"]) + (
        " (timing)" if claim["timing"] else "") + (f" ({qualifier(claim)})" if qualifier(claim) else "")
    if claim["id"] in unstable:
        verdict += " (unstable: " + " → ".join(unstable[claim["id"]]) + f" over the last {STABILITY_RUNS} runs)"
    return verdict


def _interval(claim: dict) -> str:
    return "" if claim["interval"] is None else f"[{_fmt(claim['interval'][0])}, {_fmt(claim['interval'][1])}]"


def _statement(claim: dict) -> str:
    """The claim's statement as the reader sees it, with why its threshold is not the paper's number where the
    claim says (:attr:`mlsysrepro.core.claims.Claim.shown_statement`)."""
    if not claim.get("threshold_why"):
        return claim["statement"]
    threshold = claim["rule"].split(" on >= ")[0]  # the rule's test, without the share of settings
    return (f"{claim['statement'].rstrip('.')} (threshold `{threshold}`, not the paper's "
            f"{_fmt(claim['paper_value'])}: {claim['threshold_why']})")


def _claim_rows(claims: list[dict], unstable: dict[str, list[str]]) -> list[str]:
    """The claims table: one short row a claim, in :data:`CLAIM_COLUMNS`; a consistency check shows no paper value
    (it has none to be compared with). Everything longer is in :func:`_claim_details`."""
    lines = ["| " + " | ".join(CLAIM_COLUMNS) + " |", "|" + "---|" * len(CLAIM_COLUMNS)]
    for c in claims:
        paper_value = "" if c["kind"] == CONSISTENCY else _fmt(c["paper_value"])
        lines.append(f"| {c['id']} | {_fmt(_statement(c))} | {paper_value} | {_fmt(c['measured'])} | "
                     f"{_interval(c)} | {_fmt(c['settings_held'])} | {_verdict_cell(c, unstable)} |")
    return lines


def _per_setting(claim: dict) -> str:
    """Under :data:`MIN_BOOTSTRAP_SETTINGS` settings, each setting's own value and interval (they decide the
    verdict there); else nothing."""
    if not claim.get("per_setting") or len(claim["per_setting"]) >= MIN_BOOTSTRAP_SETTINGS:
        return ""
    own = claim.get("per_setting_interval") or {}
    return "; ".join(f"{name} {_fmt(value)}" + (f" [{_fmt(own[name][0])}, {_fmt(own[name][1])}]" if own.get(name)
                                                 else "") for name, value in claim["per_setting"].items())


def _claim_details(claims: list[dict]) -> list[str]:
    """A collapsible block under the claims table: per claim where the paper says it, the unit, the rule and why it
    gave this verdict, each setting's value (under 6 settings), the robustness over our modelling choices and the
    note."""
    lines = ["<details><summary>Rule, unit, reason and notes of each claim</summary>", ""]
    for c in claims:
        parts = [f"{_fmt(c['where'])}; unit: {_fmt(c['unit'])}; rule `{c['rule']}`"
                 + (f"; against the paper: {c['vs_paper']}" if c.get("vs_paper") else ""),
                 f"why: {_fmt(c['why'])}" if c.get("why") else "",
                 f"per setting: {_per_setting(c)}" if _per_setting(c) else "",
                 f"robustness: {'; '.join(entry['text'] for entry in c['robustness'])}" if c.get("robustness") else "",
                 f"no power check: {_fmt(c['no_power_check'])}" if c.get("no_power_check") else "",
                 f"fragile: {'; '.join(c['fragility'])}" if c.get("fragility") else "",
                 f"identical runs counted once: {', '.join(f'{a} = {b}' for a, b in c['merged'].items())}"
                 if c.get("merged") else "",
                 f"note: {_fmt(c['note'])}" if c.get("note") else ""]
        lines.append(f"- **{c['id']}**: " + ". ".join(p.rstrip(".") for p in parts if p) + ".")
    return lines + ["", "</details>"]


def headline(results: dict) -> str:
    """One line: what the paper's first claim says (its first paper claim or analogue, as declared), with the
    paper's value, and what we found, with the verdict; then the paper claims' tally."""
    claims = [c for c in results["claims"] if c["kind"] in (PAPER_CLAIM, ANALOGUE)]
    if not claims:
        return ""
    first = claims[0]
    ours = "" if first["measured"] is None else f" {_fmt(first['measured'])}" + (
        f" {_interval(first)}" if first["interval"] else "")
    kind = "" if first["kind"] == PAPER_CLAIM else f" ({first['kind']})"
    verdict = first["verdict"] + (f" ({qualifier(first)})" if qualifier(first) else "")
    return (f"**The paper says** {_fmt(first['statement']).rstrip('.')} ({first['id']}; the paper: "
            f"{_fmt(first['paper_value'])}). **We found**{ours}: {verdict}{kind}; over all its paper "
            f"claims, {verdict_summary(results)}.")


def contents() -> list[str]:
    """The table of contents: one linked line per paper with committed results, with its status."""
    lines = ["## Contents", ""]
    for paper in (*PAPERS, TEMPLATE):
        results = _results(paper)
        if results is not None:
            lines.append(f"- [{results['title']}](#{paper.name}): {status(paper, results)}")
    return lines + [""]


def _paper_section(paper: Paper, results: dict) -> list[str]:
    """One paper's part: an anchor named after the paper, its status, the headline, one claims table per kind with
    its details, the run's findings and the figures."""
    lines = [f'<a id="{paper.name}"></a>', "", f"## {results['title']}", ""]
    if paper.is_paper:
        notebook = f"notebooks/{paper.name}.ipynb"
        lines += [f"{paper.venue}, {paper.link}. Notebook: [`{notebook}`]({notebook}).", ""]
    lines += [f"Scale `{results['scale']}`, seed {results['seed']}. Status: **{status(paper, results)}**; "
              + "; ".join(f"{label}: {verdict_summary(results, kind)}" for kind, label in KIND_COLUMNS)
              + f"; consistency checks: {checks_summary(results)}.", ""]
    if headline(results):
        lines += [headline(results), ""]
    unstable = unstable_claims(committed_runs(paper))
    for kind, heading in ((PAPER_CLAIM, "Paper claims"),
                          (ANALOGUE, "Analogues (a paper claim measured on another platform or quantity)"),
                          (FINDING, "Findings of this reproduction (not the paper's)"),
                          (CONSISTENCY, "Consistency checks of this reproduction")):
        claims = [c for c in results["claims"] if c["kind"] == kind]
        if claims:
            lines += [f"**{heading}**", "", *_claim_rows(claims, unstable), "", *_claim_details(claims), ""]
    findings = {key: text for key, text in all_findings(results).items() if key != SUMMARY_FINDING}
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


def all_tables(results: dict) -> dict[str, str]:
    """The markdown of every table the run showed (:func:`mlsysrepro.core.tables.show`), the ones holding
    wall-clock numbers included."""
    return {**results.get("metrics", {}).get(TABLES, {}), **results.get("timings", {}).get(TABLES, {})}


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


def whole_run_time(times: dict) -> str:
    """The sentence that puts a section's time beside the whole notebook's, from its entry in
    ``figures/runtimes.json`` (``{"cold" | "warm": {"seconds", ...}}``): a section that read its results from the
    cache took seconds in the committed run, and a reader must not take that for the time to compute them. Empty
    when the notebook was never timed."""
    seconds = {kind: times[kind]["seconds"] for kind in runtimes.KINDS if kind in times}
    if not seconds:
        return ""

    def duration(value: float) -> str:
        return f"{value:.0f} s" if value < 90 else f"{value / 60:.0f} min"

    if len(seconds) == 2 and seconds["cold"] > 1.2 * seconds["warm"]:
        return (f" The whole notebook takes {duration(seconds['cold'])} from an empty cache and "
                f"{duration(seconds['warm'])} with it full (the README's runtime table).")
    return f" The whole notebook takes {duration(max(seconds.values()))} (the README's runtime table)."


def notebook_with_generated_cells(notebook: str, results: dict | None, times: dict | None = None) -> str:
    """``notebook`` (its JSON text) with every markdown cell tagged ``listing:<function>`` set to that function's
    listing and, given the committed ``results``, every one tagged ``finding:<key>`` set to the run's finding
    ``key``, the section's runtime and the whole notebook's (:func:`whole_run_time` of ``times``, by default the
    paper's entry in ``figures/runtimes.json``), and every one tagged ``table:<key>`` to the table the run showed
    under ``key``; a tagged cell whose finding or table the run did not record raises ValueError."""
    nb = nbformat.reads(notebook, as_version=4)
    findings = all_findings(results) if results else {}
    tables = all_tables(results) if results else {}
    seconds = dict(results.get("timings", {}).get("section_seconds", [])) if results else {}
    if times is None:
        times = runtimes.load().get(results["paper"], {}) if results else {}
    whole = whole_run_time(times)
    for cell in nb.cells:
        if _tagged(cell, LISTING_TAG):
            cell.source = listing_markdown(_tagged(cell, LISTING_TAG))
        table = _tagged(cell, TABLE_TAG)
        if table is not None and results is not None:
            if table not in tables:
                raise ValueError(f"cell tagged {TABLE_TAG}{table} has no table {table!r} in {results['paper']}'s "
                                 f"results.json; recorded: {sorted(tables)}")
            cell.source = (tables[table] + "\n\n*The table the cell above shows, from the committed `default` run "
                           "(generated by `python -m mlsysrepro.reproduction`).*")
        key = _tagged(cell, FINDING_TAG)
        if key is None or results is None:
            continue
        if key not in findings:
            raise ValueError(f"cell tagged {FINDING_TAG}{key} has no finding {key!r} in {results['paper']}'s "
                             f"results.json; recorded: {sorted(findings)}")
        cell.source = (findings[key] + f"\n\n*From the committed `default` run, where this section took "
                       f"{seconds.get(key, float('nan')):.0f} s; running the cell above recomputes it.{whole}*")
    return nbformat.writes(nb) + "\n"


def _notebooks_with_generated_cells() -> dict[Path, str]:
    """Every notebook with a cell tagged for a finding or a listing, as the committed results and the library's
    source would make it."""
    wanted = {}
    for paper in (*PAPERS, TEMPLATE):
        if not paper.notebook.exists():
            continue
        text = paper.notebook.read_text()
        if any(f'"{tag}' in text for tag in (FINDING_TAG, LISTING_TAG, TABLE_TAG)):
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
        "here** (with the reason). A claim whose experiment could not show the effect (its power precondition, a",
        "positive control, was not met) is not testable at this scale, never \"fails\". A claim over several settings",
        "must pass on the stated share of them and for the median (over fewer than 6 settings each setting's own",
        "interval and k of n decide); a claim that a method beats a baseline must fail for the baseline. Only the",
        "paper's own claims make its status: *reproduced* (at least two thirds testable, every testable one holds),",
        "*partly reproduced*, *inconclusive* (none holds, none fails), *not reproduced at this scale* (at least one",
        "fails, none holds) or *partly tested* (most not testable here). Analogues (a paper claim measured on another",
        "platform or quantity), findings of this reproduction and consistency checks are shown apart. *Robustness*",
        "re-judges a claim over each modelling choice of ours it rests on; a hold or fail that flips within that",
        "range is shown as \"(depends on <assumption>)\". *Fragile* marks a hold or fail that flips when one",
        "setting is left out, that rests on fewer than 3 trained models, or that is re-reached on fewer than 95 % of",
        "bootstrap resamples of its evaluation items. A fragile or assumption-dependent hold does not count toward",
        "*reproduced*. Each paper claim declares a power check (a positive control) or a negative control (a run on",
        "which its rule must give the opposite verdict; a hold whose control passes too is not testable here).",
        "A verdict marked (timing) rests on",
        f"wall-clock time; one marked unstable changed over the last {STABILITY_RUNS} committed runs.",
        "",
        f"![The collection at a glance: each claim's value against the paper's, coloured by verdict]"
        f"(figures/{collection_map.NAME}.png)",
        "",
        paper_table(),
        "",
        *contents(),
    ]
    for paper in (*PAPERS, TEMPLATE):
        results = _results(paper)
        if results is not None:
            lines += _paper_section(paper, results)
    return "\n".join(lines).rstrip() + "\n"


def map_points():
    """The points of the collection's map, from every paper's committed results (a paper whose results are not
    served, :func:`_results`, is left off)."""
    results = {paper.name: _results(paper) for paper in PAPERS}
    return collection_map.claim_points({name: r for name, r in results.items() if r is not None})


def _between(text: str, start_marker: str, end_marker: str, content: str) -> str:
    start, end = text.index(start_marker) + len(start_marker), text.index(end_marker)
    return text[:start] + "\n" + content + "\n" + text[end:]


def readme_with_table(readme: str) -> str:
    """The README with its paper table and its runtime table (:func:`mlsysrepro.core.runtimes.markdown_table`,
    from ``figures/runtimes.json``) regenerated."""
    names = sorted(paper.name for paper in (*PAPERS, TEMPLATE) if paper.notebook.exists())
    readme = _between(readme, TABLE_START, TABLE_END, paper_table())
    return _between(readme, RUNTIMES_START, RUNTIMES_END, runtimes.markdown_table(names))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if REPRODUCTION.md or README.md is stale")
    args = parser.parse_args(argv)
    points = map_points()
    wanted = {REPRODUCTION: reproduction_markdown(), README: readme_with_table(README.read_text()),
              MAP_POINTS: collection_map.points_json(points), reading_guide.PAGE: reading_guide.page(),
              **_notebooks_with_generated_cells()}
    stale = [p.name for p, text in wanted.items() if not p.exists() or p.read_text() != text]
    if not MAP_POINTS.with_suffix(".png").exists():
        stale.append(MAP_POINTS.with_suffix(".png").name)
    if args.check:
        if stale:
            print(f"out of date: {', '.join(stale)}; run `python -m mlsysrepro.reproduction`", file=sys.stderr)
        return 1 if stale else 0
    for path, text in wanted.items():
        if path != MAP_POINTS:
            Path(path).write_text(text)
    collection_map.write(points, MAP_POINTS.parent)  # the figure, and its points beside it
    print(f"wrote {REPRODUCTION.name}, the paper table in {README.name}, the readers' start page and the notebooks' "
          "generated cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
