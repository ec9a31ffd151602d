"""Every notebook follows the conventions, runs at scale=smoke and writes what the catalog declares;
the template is byte-for-byte repeatable; bad parameters fail with a clear message."""

import ast
import json
import time

import nbformat
import papermill
import pytest

from mlsysrepro import catalog
from mlsysrepro.core import paths
from mlsysrepro.core.claims import VERDICTS, without_timings

NOTEBOOKS = sorted((paths.REPO_ROOT / "notebooks").glob("*.ipynb"))
IDS = [nb.stem for nb in NOTEBOOKS]


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_follows_conventions(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert catalog.by_name(path.stem).notebook == path
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    for cell in code_cells(nb):
        assert not cell.outputs and cell.execution_count is None, "notebooks are committed without outputs"
    params = code_cells(nb)[0]
    assert "parameters" in params.metadata.get("tags", []), "the first code cell is tagged 'parameters'"
    statements = ast.parse(params.source).body
    assert all(isinstance(s, ast.AnnAssign) and isinstance(s.value, ast.Constant) for s in statements), (
        "the parameters cell holds annotated literals only"
    )
    names = [s.target.id for s in statements]
    assert names[:3] == ["scale", "seed", "use_cache"]
    assert 'scale: str = "default"' in params.source and "seed: int = 0" in params.source
    assert "resolve_notebook(" in code_cells(nb)[1].source, "the next cell resolves the settings"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_thin(path):
    """No helpers, no cache calls, no single-letter module aliases: logic lives in the paper module and themes."""
    nb = nbformat.read(path, as_version=4)
    tree = ast.parse("\n".join(cell.source for cell in code_cells(nb)))
    for node in ast.walk(tree):
        assert not isinstance(node, (ast.FunctionDef, ast.ClassDef)), f"a helper is defined: {node.name}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            assert all(alias.asname is None or len(alias.asname) > 1 for alias in node.names), "a one-letter alias"
            assert all(alias.name not in ("cached", "TaskRunner") for alias in node.names), "a cache call"
    modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    assert "mlsysrepro.papers" in modules, "the notebook imports its paper module"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_a_lesson_readable_on_github(path):
    """Every saved figure is embedded in a markdown cell after the code that saves it; every finding the notebook
    records has its tagged cell; the algorithm is listed; the notebook closes with its summary and "Try this"."""
    import re

    nb = nbformat.read(path, as_version=4)
    sources = [(cell.cell_type, cell.source, cell.metadata.get("tags", [])) for cell in nb.cells]
    for index, (kind, source, _) in enumerate(sources):
        if kind != "code":
            continue
        for name in re.findall(r"report\.savefig\([^,]+, \"(\w+)\"\)", source):
            later = "".join(text for k, text, _ in sources[index + 1:] if k == "markdown")
            assert f"](../figures/{path.stem}/{name}.png)" in later, f"figure {name!r} is not embedded below its cell"
        for key in re.findall(r"report\.finding\(\s*\"(\w+)\"", source):
            assert any(f"finding:{key}" in tags for k, _, tags in sources[index + 1:] if k == "markdown"), (
                f"finding {key!r} has no markdown cell tagged finding:{key} below it")
        for key in shown_tables(source):
            assert any(f"table:{key}" in tags for k, _, tags in sources[index + 1:] if k == "markdown"), (
                f"table {key!r} has no markdown cell tagged table:{key} below it")
    tags = [tag for _, _, cell_tags in sources for tag in cell_tags]
    assert any(tag.startswith("listing:mlsysrepro.") for tag in tags), "no cell lists the library's algorithm"
    assert "finding:summary" in tags, "no closing summary (report.finding('summary', report.claims_markdown()))"
    assert any(kind == "markdown" and source.startswith("## Try this") for kind, source, _ in sources)


def shown_tables(source):
    """The keys of the tables a code cell shows through ``show(report, "<key>", ...)``."""
    import re

    return re.findall(r"\bshow\(report, \"(\w+)\"", source)


def execute(path, out_dir, **parameters):
    out_dir.mkdir(parents=True, exist_ok=True)
    return papermill.execute_notebook(
        str(path), str(out_dir / path.name), parameters=parameters, kernel_name="python3",
        cwd=str(path.parent), progress_bar=False, execution_timeout=600,
    )


def smoke_outputs(name):
    return paths.output_dir(name, "smoke")


#: The README's promise is a smoke run under a minute per notebook from a cold cache; the tests allow this much
#: on a loaded 2-core machine before they call it broken.
SMOKE_SECONDS = 90


@pytest.fixture(scope="session")
def smoke_runs(tmp_path_factory):
    """Each notebook executed once per test process at scale=smoke (lazily, so -k selects cheaply), from the tests'
    empty cache (for the session: under pytest-xdist a process runs other modules' tests between two of this
    module's, and a module-scoped fixture would be built, and the notebooks run, again);
    ``run.seconds`` holds each run's wall time, ``run.executed`` each executed notebook (with its outputs)."""
    done = {}

    def run(path):
        if path not in done:
            start = time.perf_counter()
            run.executed[path] = execute(path, tmp_path_factory.mktemp("executed"), scale="smoke")
            run.seconds[path] = time.perf_counter() - start
            done[path] = smoke_outputs(path.stem)
        return done[path]

    run.seconds, run.executed = {}, {}
    return run


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs_at_smoke_scale_and_writes_what_it_declares(path, smoke_runs):
    out = smoke_runs(path)
    seconds = smoke_runs.seconds[path]  # its first run, from the tests' empty cache, whichever test asked first
    assert seconds < SMOKE_SECONDS, f"{path.stem} took {seconds:.0f} s at smoke from a cold cache (at most " \
        f"{SMOKE_SECONDS})"
    assert paths.build_dir() in out.parents, "a smoke run never writes into the committed figures/"
    results = json.loads((out / "results.json").read_text())
    declared = catalog.by_name(path.stem)
    assert results["paper"] == path.stem and results["scale"] == "smoke"
    assert [c["id"] for c in results["claims"]] == [c.id for c in declared.module().CLAIMS]
    assert results["figures"] == [f"{name}.png" for name in declared.figures]
    for name in declared.figures:
        assert (out / f"{name}.png").stat().st_size > 0 and (out / f"{name}.svg").stat().st_size > 0
    for claim in results["claims"]:
        assert claim["verdict"] in VERDICTS and claim["rule"] and claim["where"] and claim["unit"]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_table_a_notebook_shows_reads_on_github(path, smoke_runs):
    """A frame a cell displays is invisible in the committed notebook (no outputs) unless it goes through
    ``show(report, key, frame)``, which records it for the markdown cell tagged ``table:<key>``: every cell whose
    executed output holds a table shows each through ``show`` (the claims table, ``report.table()``, is the
    closing summary's), and the run's results.json records every table shown."""
    out = smoke_runs(path)
    executed = smoke_runs.executed[path]
    results = json.loads((out / "results.json").read_text())
    recorded = set(results["metrics"].get("tables", {})) | set(results["timings"].get("tables", {}))
    for cell in code_cells(executed):
        shown = [o for o in cell.outputs if "<table" in o.get("data", {}).get("text/html", "")]
        keys = shown_tables(cell.source)
        if cell.source.rstrip().endswith("report.table()"):
            continue
        assert len(shown) <= len(keys), (
            f"a cell displays {len(shown)} table(s) but records {len(keys)} through show(report, ...): "
            f"...{cell.source[-160:]!r}")
        missing = sorted(set(keys) - recorded)
        assert not missing, f"tables {missing} are shown but not in results.json (shown after report.save()?)"


@pytest.mark.slow
@pytest.mark.parametrize("template", [catalog.TEMPLATE.notebook], ids=[catalog.TEMPLATE.notebook.stem])
def test_template_is_byte_identical_across_runs(template, smoke_runs, tmp_path, monkeypatch):
    first = smoke_runs(template)
    monkeypatch.setenv("MLSYSREPRO_BUILD_DIR", str(tmp_path / "second"))  # the kernel inherits it
    execute(template, tmp_path, scale="smoke", use_cache=False)
    second = smoke_outputs(template.stem)
    assert second != first
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir()) and "results.json" in names
    for name in names:  # results.json: the same bytes but for the section times the findings record
        if name == "results.json":
            first_results, second_results = (json.loads((run / name).read_text()) for run in (first, second))
            assert without_timings(first_results) == without_timings(second_results)
            assert json.dumps(without_timings(first_results)) == json.dumps(without_timings(second_results))
        else:
            assert (first / name).read_bytes() == (second / name).read_bytes(), name


PAPER_NOTEBOOKS = [nb for nb in NOTEBOOKS if nb != catalog.TEMPLATE.notebook]


@pytest.mark.slow
@pytest.mark.parametrize("path", PAPER_NOTEBOOKS, ids=[nb.stem for nb in PAPER_NOTEBOOKS])
def test_paper_results_repeat_with_the_same_seed(path, smoke_runs, tmp_path, monkeypatch):
    """Everything but wall-clock timings is identical when the notebook reruns without its cache."""
    first = json.loads((smoke_runs(path) / "results.json").read_text())
    monkeypatch.setenv("MLSYSREPRO_BUILD_DIR", str(tmp_path / "second"))
    execute(path, tmp_path, scale="smoke", use_cache=False)
    second = json.loads((smoke_outputs(path.stem) / "results.json").read_text())
    assert without_timings(first) == without_timings(second)


@pytest.mark.slow
@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"scale": "huge"}, "parameter 'scale' must be one of ['smoke', 'default', 'paper'], got 'huge'"),
        ({"scale": "smoke", "n_draw": 5}, "unknown parameter(s) ['n_draw']"),
        ({"scale": "smoke", "n_draws": "many"}, "parameter 'n_draws' must be of type int"),
        ({"scale": "smoke", "n_draws": 0}, "parameter 'n_draws' must be >= 2, got 0"),
    ],
    ids=["unknown-scale", "misspelt-parameter", "wrong-type", "out-of-range"],
)
def test_bad_parameters_fail_with_a_clear_message(parameters, message, tmp_path):
    with pytest.raises(papermill.PapermillExecutionError) as info:
        execute(catalog.TEMPLATE.notebook, tmp_path, **parameters)
    assert message in str(info.value)
    assert not (smoke_outputs("_template").parent.parent / "huge").exists()
