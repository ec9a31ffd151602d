"""REPRODUCTION.md and the README's table are generated from results.json and kept in step."""

import json

import pytest

from mlsysrepro import catalog, reproduction, runner
from mlsysrepro.core import paths


def test_committed_reproduction_and_readme_agree_with_results():
    assert reproduction.main(["--check"]) == 0, "run `python -m mlsysrepro.reproduction` and commit"


def test_every_paper_is_listed_with_a_computed_status():
    table = reproduction.paper_table()
    assert len(catalog.PAPERS) == 11
    for paper in catalog.PAPERS:
        row = next(line for line in table.splitlines() if f"`{paper.name}.ipynb`" in line)
        results = json.loads(paper.results_path().read_text()) if paper.results_path().exists() else None
        assert f"| {reproduction.status(paper, results)} |" in row


def claim(id, verdict, kind="paper claim"):
    return {"id": id, "kind": kind, "verdict": verdict, "where": "Fig. 1", "statement": "a|b", "paper_value": 1.0,
            "unit": "x", "measured": 2.5, "interval": [2.0, 3.0], "settings_held": "3 of 4", "vs_paper": "beyond",
            "rule": "measured <= 1", "why": "2.5 fails", "note": "small", "timing": False}


HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE = "holds", "fails", "inconclusive", "not testable here"


@pytest.mark.parametrize("verdicts, expected", [
    ([HOLDS, HOLDS, NOT_TESTABLE], "reproduced"),  # two thirds testable, every testable one holds
    ([HOLDS, HOLDS, NOT_TESTABLE, NOT_TESTABLE], "partly reproduced"),  # half testable: under two thirds
    ([HOLDS, NOT_TESTABLE, NOT_TESTABLE], "partly tested"),  # most not testable: no other word may overstate it
    ([HOLDS, HOLDS, HOLDS, NOT_TESTABLE, NOT_TESTABLE, NOT_TESTABLE], "partly reproduced"),  # half is not most
    ([HOLDS, INCONCLUSIVE], "partly reproduced"),
    ([HOLDS, FAILS, HOLDS], "partly reproduced"),
    ([INCONCLUSIVE, INCONCLUSIVE, NOT_TESTABLE], "inconclusive"),  # none fails, none holds
    ([FAILS, INCONCLUSIVE], "not reproduced at this scale"),  # only with a fail
    ([FAILS, NOT_TESTABLE, NOT_TESTABLE], "partly tested"),
])
def test_status_comes_from_the_paper_claims_alone(verdicts, expected, monkeypatch):
    monkeypatch.setattr(reproduction, "stale", lambda paper: [])  # the status of these results, whatever is committed
    others = [claim("K1", FAILS, "consistency check"), claim("A1", FAILS, "analogue"), claim("F1", FAILS, "our finding")]
    results = {"claims": [claim(f"C{i}", v) for i, v in enumerate(verdicts)] + others}
    assert reproduction.status(catalog.by_name("llcg"), results) == expected
    coming = catalog.Paper("coming_paper", "A paper without a notebook yet", "venue", "https://arxiv.org", "theme")
    assert reproduction.status(coming, None) == "planned"


def test_a_fragile_or_assumption_dependent_hold_does_not_make_a_paper_reproduced(monkeypatch):
    monkeypatch.setattr(reproduction, "stale", lambda paper: [])
    depends = {"robustness": [{"assumption": "buffer_mib", "text": "depends on buffer_mib: holds for 4, fails for 1"}]}
    robust = {"robustness": [{"assumption": "pe_tile", "text": "robust over pe_tile 8–64"}]}
    fragile = {"fragility": ["fails without alibaba"]}
    firm = [claim("C1", HOLDS) | robust, claim("C2", HOLDS), claim("C3", NOT_TESTABLE)]
    assert reproduction.status(catalog.by_name("llcg"), {"claims": firm}) == "reproduced"
    leaning = [claim("C1", HOLDS) | depends, claim("C2", HOLDS) | fragile, claim("C3", NOT_TESTABLE)]
    assert reproduction.status(catalog.by_name("llcg"), {"claims": leaning}) == \
        "partly reproduced (depends on buffer_mib; fragile: C2)"
    mixed = [claim("C1", HOLDS) | depends, claim("C2", FAILS) | depends, claim("C3", INCONCLUSIVE)]
    assert reproduction.status(catalog.by_name("llcg"), {"claims": mixed}) == "partly reproduced (depends on buffer_mib)"
    assert reproduction.verdict_summary({"claims": mixed}) == ("1 (depends on buffer_mib) of 3 hold, "
                                                              "1 (depends on buffer_mib) fails, 1 inconclusive")
    assert reproduction.verdict_summary({"claims": leaning}) == ("2 (depends on buffer_mib; fragile: C2) of 3 hold, "
                                                                "1 not testable")
    rows = "\n".join(reproduction._claim_rows(mixed, {}))
    assert "| **fails** (depends on buffer_mib) |" in rows and "| holds (depends on buffer_mib) |" in rows
    assert "| **inconclusive** |" in rows  # nothing to flip


def test_committed_results_are_default_scale_and_match_the_catalog():
    for paper in (*catalog.PAPERS, catalog.TEMPLATE):
        path = paper.results_path()
        if not path.exists():
            continue
        results = json.loads(path.read_text())
        assert results["scale"] == paths.COMMITTED_SCALE
        declared = paper.module().CLAIMS
        if reproduction.stale(paper):  # declared claims changed since the committed run: its verdicts are not served
            assert reproduction.status(paper, results).startswith("claims changed since its last run")
            assert f"[`{paper.name}.ipynb`]" in reproduction.paper_table() and reproduction._results(paper) is None
            continue
        assert [c["id"] for c in results["claims"]] == [c.id for c in declared]
        assert [c["kind"] for c in results["claims"]] == [c.kind for c in declared]
        assert results["figures"] == [f"{f}.png" for f in paper.figures]
        for figure in results["figures"]:
            assert (path.parent / figure).exists()


def test_claim_table_shows_the_verdict_and_keeps_checks_apart():
    results = {"title": "T", "scale": "default", "seed": 0, "figures": ["fig1_x.png"],
               "claims": [claim("C1", "fails"), claim("K1", "holds", "consistency check")]}
    text = "\n".join(reproduction._paper_section(catalog.TEMPLATE, results))
    assert "| C1 | a\\|b | 1 | 2.5 | [2, 3] | 3 of 4 | **fails** |" in text
    assert "| K1 | a\\|b |  | 2.5 |" in text  # a consistency check has no paper value to be compared with
    assert "- **C1**: Fig. 1; unit: x; rule `measured <= 1`; against the paper: beyond. why: 2.5 fails. note: small." \
        in text  # the long columns, in the collapsible block under the table
    assert "paper claims: 0 of 1 hold, 1 fails; analogues: -; our findings: -; consistency checks: 1 of 1 pass" in text
    assert "**The paper says** a\\|b (C1; the paper: 1). **We found** 2.5 [2, 3]: fails" in text
    assert text.index("**Paper claims**") < text.index("**Consistency checks of this reproduction**")
    assert "(figures/_template/fig1_x.png)" in text
    assert text.startswith('<a id="_template"></a>')


def test_the_closing_list_of_claims_is_not_repeated_under_the_table():
    results = {"title": "T", "scale": "default", "seed": 0, "figures": [], "claims": [claim("C1", "holds")],
               "findings": {"speed": "**What we found.** 2x.", "summary": "## Which parts hold\n\n- **C1** holds"}}
    text = "\n".join(reproduction._paper_section(catalog.TEMPLATE, results))
    assert "- **What we found.** 2x." in text and "Which parts hold" not in text


def _tokens(markdown: str) -> list[dict]:
    mistune = pytest.importorskip("mistune")  # nbconvert's markdown parser
    return mistune.create_markdown(renderer=None, plugins=["table"])(markdown)


def _types(token: dict) -> set[str]:
    return {token["type"]}.union(*(_types(child) for child in token.get("children", [])))


def _text(token: dict) -> str:
    return token.get("raw", "") + "".join(_text(child) for child in token.get("children", []))


def test_committed_reproduction_is_valid_markdown_with_contents_anchors_and_short_tables():
    text = paths.REPO_ROOT.joinpath("REPRODUCTION.md").read_text()
    tokens = _tokens(text)
    headings = [(t["attrs"]["level"], _text(t)) for t in tokens if t["type"] == "heading"]
    papers = [p for p in (*catalog.PAPERS, catalog.TEMPLATE) if reproduction._results(p) is not None]
    assert headings[:2] == [(1, "Reproduction status"), (2, "Contents")]
    assert [title for _, title in headings[2:]] == [reproduction._results(p)["title"] for p in papers]
    assert all(level == 2 for level, _ in headings[1:])
    for paper in papers:  # every contents line links to an anchor that exists, just above its paper's heading
        assert f"](#{paper.name})" in text
        assert f'<a id="{paper.name}"></a>\n\n## {reproduction._results(paper)["title"]}' in text
    tables = [t for t in tokens if t["type"] == "table"]
    assert len(tables) > len(papers)
    for table in tables[1:]:  # the claims tables (the first is the README's table of papers)
        head, body = table["children"]
        width = len(head["children"])
        assert width <= 7
        assert all(len(row["children"]) == width for row in body["children"])
    for token in tokens:  # no heading hides inside a list item (a finding that carried its own heading)
        if token["type"] == "list":
            assert "heading" not in _types(token)
    assert text.count("<details>") == text.count("</details>") > 0


def test_runner_lists_notebooks_and_rejects_unknown_names(capsys):
    assert runner.main(["--list"]) == 0
    assert "_template" in capsys.readouterr().out.split()
    with pytest.raises(SystemExit):
        runner.main(["--only", "nope"])
    assert "unknown notebook(s) ['nope']" in capsys.readouterr().err


@pytest.mark.slow
def test_runner_runs_notebooks_side_by_side_with_the_cores_split(monkeypatch, capsys):
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 4)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MLSYSREPRO_CORES"):
        monkeypatch.setenv(name, "1")  # restored (or removed) after the test, whatever the runner sets
    assert runner.main(["--scale", "smoke", "--only", "_template", "--jobs", "2"]) == 0
    assert runner.os.environ["OMP_NUM_THREADS"] == runner.os.environ["MLSYSREPRO_CORES"] == "2"
    assert "1 passed, 0 failed" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        runner.main(["--jobs", "0"])
    assert "--jobs must be >= 1, got 0" in capsys.readouterr().err


def test_a_notebook_receives_each_finding_in_its_tagged_cell():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("report.finding('fig2', text)"),
        nbformat.v4.new_markdown_cell("stale", metadata={"tags": ["finding:fig2"]}),
        nbformat.v4.new_markdown_cell("untouched"),
        nbformat.v4.new_markdown_cell("old", metadata={"tags": ["finding:table4"]}),
    ])
    results = {"paper": "toy", "findings": {"fig2": "slope -0.98"},
               "timings": {"findings": {"table4": "2.3x"}, "section_seconds": [["table4", 4.0], ["fig2", 12.3]]}}
    out = nbformat.reads(reproduction.notebook_with_generated_cells(nbformat.writes(nb), results), as_version=4)
    assert out.cells[1].source.startswith("slope -0.98\n\n*From the committed `default` run, where this section "
                                          "took 12 s")
    assert out.cells[2].source == "untouched" and out.cells[3].source.startswith("2.3x")
    assert list(reproduction.all_findings(results)) == ["table4", "fig2"]  # the order the run recorded them
    with pytest.raises(ValueError, match="has no finding 'fig2'"):
        reproduction.notebook_with_generated_cells(nbformat.writes(nb), {"paper": "toy", "findings": {}, "timings": {}})


def test_a_finding_puts_its_section_time_beside_the_whole_notebooks():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("stale", metadata={"tags": ["finding:fig2"]})])
    results = {"paper": "toy", "findings": {"fig2": "slope -0.98"}, "timings": {"section_seconds": [["fig2", 4.0]]}}
    cached = {"cold": {"seconds": 7867.0}, "warm": {"seconds": 560.0}}
    out = nbformat.reads(reproduction.notebook_with_generated_cells(nbformat.writes(nb), results, cached),
                         as_version=4)
    # a section that took 4 s from the cache is not read as 4 s of training
    assert out.cells[0].source.endswith("took 4 s; running the cell above recomputes it. The whole notebook takes "
                                        "131 min from an empty cache and 9 min with it full (the README's runtime "
                                        "table).*")
    assert reproduction.whole_run_time({"cold": {"seconds": 61.0}, "warm": {"seconds": 60.0}}) == \
        " The whole notebook takes 61 s (the README's runtime table)."
    assert reproduction.whole_run_time({"warm": {"seconds": 600.0}}) == \
        " The whole notebook takes 10 min (the README's runtime table)."
    assert reproduction.whole_run_time({}) == ""


def test_a_notebook_receives_each_shown_table_in_its_tagged_cell():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("report.show('gains', gains)"),
        nbformat.v4.new_markdown_cell("placeholder", metadata={"tags": ["table:gains"]}),
        nbformat.v4.new_markdown_cell("old", metadata={"tags": ["table:speed"]}),
    ])
    results = {"paper": "toy", "metrics": {"tables": {"gains": "| a |\n|---|\n| 1 |"}},
               "timings": {"tables": {"speed": "| s |\n|---|\n| 2 |"}}}
    out = nbformat.reads(reproduction.notebook_with_generated_cells(nbformat.writes(nb), results), as_version=4)
    assert out.cells[1].source.startswith("| a |\n|---|\n| 1 |\n\n*The table the cell above shows")
    assert out.cells[2].source.startswith("| s |")
    with pytest.raises(ValueError, match="has no table 'gains'"):
        reproduction.notebook_with_generated_cells(nbformat.writes(nb), {"paper": "toy", "timings": {}})


def test_a_listing_cell_receives_the_library_function_it_names_and_a_wrong_name_is_an_error():
    import inspect
    import textwrap

    import nbformat

    from mlsysrepro.core import claims

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("stale copy", metadata={"tags": ["listing:mlsysrepro.core.claims.across"]})])
    out = nbformat.reads(reproduction.notebook_with_generated_cells(nbformat.writes(nb), None), as_version=4)
    source, first = inspect.getsourcelines(claims.across)
    assert textwrap.dedent("".join(source)).rstrip() in out.cells[0].source
    assert f"lib/mlsysrepro/core/claims.py#L{first}-L{first + len(source) - 1}" in out.cells[0].source
    nb.cells[0].metadata["tags"] = ["listing:mlsysrepro.core.claims.no_such_function"]
    with pytest.raises(ValueError, match="no function 'mlsysrepro.core.claims.no_such_function'"):
        reproduction.notebook_with_generated_cells(nbformat.writes(nb), None)


def test_a_claim_whose_verdict_changed_over_the_last_runs_is_marked_unstable():
    runs = [{"claims": [claim("C1", v1), claim("C2", "fails")]}  # newest first
            for v1 in (HOLDS, INCONCLUSIVE, HOLDS, HOLDS)]
    assert reproduction.unstable_claims(runs) == {"C1": [HOLDS, INCONCLUSIVE, HOLDS]}
    assert reproduction.unstable_claims(runs[2:]) == {}
    assert reproduction.unstable_claims([]) == {}
    results = {"title": "T", "scale": "default", "seed": 0, "figures": [], "claims": [claim("C1", HOLDS)]}
    rows = reproduction._claim_rows(results["claims"], {"C1": [INCONCLUSIVE, HOLDS]})
    assert "holds (unstable: inconclusive → holds over the last 5 runs)" in rows[-1]
    few = dict(claim("C2", HOLDS), per_setting={"a": 1.5, "b": 0.9}, per_setting_interval={"a": [1.2, 1.8]})
    details = "\n".join(reproduction._claim_details([few]))
    assert "per setting: a 1.5 [1.2, 1.8]; b 0.9." in details  # under 6 settings, each setting's own value and interval


def test_committed_runs_read_the_history_of_a_papers_results():
    runs = reproduction.committed_runs(catalog.by_name("llcg"))
    assert 1 <= len(runs) <= reproduction.STABILITY_RUNS and runs[0]["paper"] == "llcg"
    assert len({json.dumps(r, sort_keys=True) for r in runs}) == len(runs)  # one per distinct content


def test_a_run_judged_before_a_threshold_reason_was_declared_is_shown_with_it(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from mlsysrepro.core.claims import Claim, at_most

    declared = Claim("C1", "no loss", where="Table", paper_value=0.0, unit="ppl ratio - 1", rule=at_most(0.02),
                     over="seeds", threshold_why="the paper's table shows about 2 %", no_power_check="a parity claim")
    saved = claim("C1", HOLDS) | {"statement": "no loss", "rule": "measured <= 0.02", "paper_value": 0.0}
    (tmp_path / "results.json").write_text(json.dumps({"claims": [saved]}))
    paper = SimpleNamespace(name="p", results_path=lambda: tmp_path / "results.json",
                            module=lambda: SimpleNamespace(CLAIMS=(declared,)))
    monkeypatch.setattr(reproduction, "stale", lambda p: [])
    monkeypatch.setattr(reproduction, "last_run_failed", lambda p: False)
    shown = reproduction._results(paper)["claims"][0]
    assert shown["threshold_why"] == "the paper's table shows about 2 %" and shown["no_power_check"] == "a parity claim"
    assert "(threshold `measured <= 0.02`, not the paper's 0: the paper's table shows about 2 %)" in \
        reproduction._statement(shown)
    over_settings = shown | {"rule": "measured <= 0.02 on >= 67% of settings and for the median"}
    assert "(threshold `measured <= 0.02`, not" in reproduction._statement(over_settings)
