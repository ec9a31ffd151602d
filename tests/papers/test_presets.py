"""Every paper with a notebook has a paper module whose presets are well formed and match the notebook's
parameters cell: the same knobs at every scale, of the types the parameters cell declares."""

import ast
import typing

import nbformat
import pytest

from mlsysrepro import catalog
from mlsysrepro.core.settings import COMMON, Above, validate_presets

WITH_NOTEBOOKS = [p for p in (*catalog.PAPERS, catalog.TEMPLATE) if p.notebook.exists()]


def declared_parameters(paper) -> dict[str, type]:
    """name -> the type annotated in the notebook's parameters cell (``int | None`` -> int)."""
    cell = next(c for c in nbformat.read(paper.notebook, as_version=4).cells
                if "parameters" in c.metadata.get("tags", []))
    declared = {}
    for statement in ast.parse(cell.source).body:
        annotation = eval(compile(ast.Expression(statement.annotation), "<annotation>", "eval"))
        kinds = [k for k in typing.get_args(annotation) if k is not type(None)] or [annotation]
        declared[statement.target.id] = kinds[0]
    return declared


@pytest.mark.parametrize("paper", WITH_NOTEBOOKS, ids=[p.name for p in WITH_NOTEBOOKS])
def test_presets_are_well_formed_and_match_the_parameters_cell(paper):
    presets = paper.module().PRESETS
    validate_presets(presets, paper.module().RANGES)  # the three scales, the same knobs and types, in range
    declared = declared_parameters(paper)
    assert {name: declared[name] for name in COMMON} == {name: kind for name, (kind, _) in COMMON.items()}
    knobs = {name: kind for name, kind in declared.items() if name not in COMMON}
    assert set(knobs) == set(presets["default"]), "the parameters cell lists exactly the presets' knobs"
    for scale, values in presets.items():
        for name, value in values.items():
            expected = float if knobs[name] is float and isinstance(value, int) else knobs[name]
            assert isinstance(value, expected), f"{scale}.{name} = {value!r} is not a {knobs[name].__name__}"


def test_every_catalog_entry_names_its_paper_module():
    names = {p.name: p.module_name for p in (*catalog.PAPERS, catalog.TEMPLATE)}
    assert names["llcg"] == "mlsysrepro.papers.llcg" and names["_template"] == "mlsysrepro.papers.template"
    assert names["dlrm_gpu"] == "mlsysrepro.papers.dlrm_gpu"  # a planned paper's home


@pytest.mark.parametrize("paper", WITH_NOTEBOOKS, ids=[p.name for p in WITH_NOTEBOOKS])
def test_every_count_and_probability_has_a_declared_range_that_the_notebook_checks(paper):
    module, presets = paper.module(), paper.module().PRESETS["default"]
    numeric = {name for name, value in presets.items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)}
    assert numeric <= set(module.RANGES), f"numeric knobs without a range: {sorted(numeric - set(module.RANGES))}"
    source = "".join(c.source for c in nbformat.read(paper.notebook, as_version=4).cells)
    assert ".RANGES)" in source, "the notebook passes its module's RANGES to resolve_notebook"


@pytest.mark.parametrize("paper", WITH_NOTEBOOKS, ids=[p.name for p in WITH_NOTEBOOKS])
def test_every_learning_rate_refuses_zero(paper):
    """A rate of 0 trains nothing and every accuracy would read as chance, with verdicts still issued: each
    learning-rate knob's range must exclude it (``Above(0)``, or a positive lower bound)."""
    module = paper.module()
    rates = [name for name in module.PRESETS["default"]
             if name == "lr" or name.endswith(("_lr", "_lrs")) or name == "learning_rate"]
    for name in rates:
        low = module.RANGES[name][0]
        refuses_zero = low.value >= 0 if isinstance(low, Above) else low is not None and low > 0
        assert refuses_zero, f"{name}'s range {module.RANGES[name]} admits a rate of 0"
