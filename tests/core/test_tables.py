"""A shown table as markdown: index as leading columns, wide frames split, long frames cut with a count."""

import numpy as np
import pandas as pd
import pytest

from mlsysrepro.core.tables import markdown_table


def rows(text):
    return [line for line in text.splitlines() if line.startswith("|")]


def test_a_frame_reads_as_a_markdown_table_with_its_index_first():
    frame = pd.DataFrame({"ppl": [19.4213, np.nan], "note": ["a|b", "c"]},
                         index=pd.MultiIndex.from_tuples([("snapkv", 0.7), ("snapkv", 0.9)], names=["policy", "c"]))
    assert rows(markdown_table(frame)) == [
        "| policy | c | ppl | note |", "|---|---|---|---|", "| snapkv | 0.7 | 19.4213 | a\\|b |", "| snapkv | 0.9 |  | c |"]


def test_a_wide_frame_is_split_into_tables_that_repeat_the_index():
    frame = pd.DataFrame(np.arange(20.0).reshape(2, 10), columns=pd.MultiIndex.from_product([["ppl", "ret"], range(5)]),
                         index=pd.Index(["a", "b"], name="model"))
    tables = markdown_table(frame, max_columns=4).split("\n\n")
    assert len(tables) == 4  # 10 columns, 3 per table beside the index
    assert all(rows(t)[0].startswith("| model |") and len(rows(t)[0].split("|")) <= 4 + 2 for t in tables)
    assert rows(tables[0])[0] == "| model | ppl / 0 | ppl / 1 | ppl / 2 |"
    assert rows(tables[-1]) == ["| model | ret / 4 |", "|---|---|", "| a | 9 |", "| b | 19 |"]


def test_a_long_frame_shows_its_first_rows_and_says_how_many_more():
    text = markdown_table(pd.Series(range(50), name="x"), max_rows=5)
    assert len(rows(text)) == 2 + 5 and "The first 5 of 50 rows" in text


def test_numbers_take_the_given_format_and_bad_input_is_refused():
    assert rows(markdown_table(pd.Series([0.1234], name="gain"), fmt="{:+.1%}"))[-1] == "| +12.3% |"
    with pytest.raises(TypeError, match="frame must be a pandas DataFrame or Series"):
        markdown_table([1, 2])
    with pytest.raises(ValueError, match="max_columns"):
        markdown_table(pd.Series([1]), max_columns=1)


def test_shown_tables_are_recorded_in_results_and_timed_ones_kept_apart(tmp_path, monkeypatch):
    import json

    from mlsysrepro.core.claims import Measurement, without_timings
    from mlsysrepro.core.tables import show
    from tests.core.test_claims import TOY_CLAIMS, make_report

    report = make_report(tmp_path, monkeypatch, TOY_CLAIMS[:1])
    frame = pd.DataFrame({"gain": [0.25]}, index=pd.Index(["dally"], name="policy"))
    assert show(report, "gains", frame) is frame
    assert show(report, "speed", frame, "{:+.1%}", timing=True).data is frame  # styled for display
    show(report, "more", frame["gain"])
    with pytest.raises(ValueError, match="recorded twice"):
        show(report, "speed", frame)
    with pytest.raises(ValueError, match="without spaces"):
        show(report, "table:1", frame)
    report.judge("C1", Measurement(0.05))
    saved = json.loads(report.save().read_text())
    assert saved["metrics"]["tables"] == {"gains": "| policy | gain |\n|---|---|\n| dally | 0.25 |",
                                          "more": "| policy | gain |\n|---|---|\n| dally | 0.25 |"}
    assert saved["timings"]["tables"] == {"speed": "| policy | gain |\n|---|---|\n| dally | +25.0% |"}
    assert "+25.0%" not in json.dumps(without_timings(saved))
