"""The readers' start page: every notebook in the plan with its own questions, runtimes read from the record,
glossary terms that the notebooks use."""

import nbformat
import pytest

from mlsysrepro import reading_guide
from mlsysrepro.catalog import PAPERS, TEMPLATE, Paper
from mlsysrepro.core import paths, runtimes


def test_every_notebook_has_a_meeting_with_the_questions_of_its_try_this_cell():
    assert reading_guide.missing_from_plan() == []
    page = reading_guide.page()
    for paper in (TEMPLATE, *PAPERS):
        asked = reading_guide.questions(paper)
        assert asked and asked[0].isupper() and asked in page


def test_a_notebook_without_questions_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path)
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Try this\n\n- `seed=1`: another draw.")])
    nbformat.write(nb, tmp_path / "notebooks" / "toy.ipynb")
    with pytest.raises(ValueError, match="toy.ipynb: no 'Questions for a reading group:'"):
        reading_guide.questions(Paper(name="toy", title="Toy", venue="-", link="-", theme="-"))


def test_runtimes_come_from_the_record_and_an_unmeasured_notebook_says_so(monkeypatch):
    monkeypatch.setattr(runtimes, "load", lambda: {"dally": {"cold": {"seconds": 126.0}}})
    rows = {line.split(" | ")[0]: line for line in reading_guide.page().splitlines() if line.startswith("| [`")}
    assert "| 2.1 min | not measured |" in rows["| [`dally`](dally.ipynb)"]
    assert "| not measured | not measured |" in rows["| [`llcg`](llcg.ipynb)"]


def test_every_glossary_term_is_used_by_a_notebook():
    assert {term: reading_guide.used_in(term) for term in reading_guide.GLOSSARY if not reading_guide.used_in(term)} \
        == {}
