"""A table a notebook shows, as markdown that GitHub renders from the committed notebook.

Notebooks are committed without outputs, so a frame a cell displays is invisible to a reader on GitHub.
:func:`show` displays the frame and records :func:`markdown_table` of it in the run's results.json (the report's
metric ``tables``, or its timing ``tables`` for wall-clock numbers); ``python -m mlsysrepro.reproduction`` copies it
into the markdown cell tagged ``table:<key>`` below, as it does for the findings. The markdown is narrow enough to read: a frame with more than ``max_columns`` columns
(its index counted) is split into several tables that repeat the index, and a long frame shows its first
``max_rows`` rows and says how many it leaves out.
"""

from __future__ import annotations

import math
from typing import Any

#: At most this many columns in one markdown table, the index columns counted (wider frames are split).
MAX_COLUMNS = 8
#: At most this many rows in one markdown table (the rest are counted, not shown).
MAX_ROWS = 40
#: The metric (and timing) of results.json that holds the shown tables, by key.
TABLES = "tables"


def _label(value: Any) -> str:
    """A column or index label: a tuple of a MultiIndex joined with " / "."""
    if isinstance(value, tuple):
        return " / ".join(_label(v) for v in value if str(v) != "")
    return _cell(value, None)


def _cell(value: Any, fmt: str | None) -> str:
    """One value as text: ``fmt`` (a ``str.format`` pattern such as ``"{:+.1%}"``) for numbers when given, else
    floats in at most 6 significant digits, NaN as an empty cell; ``|`` escaped."""
    if isinstance(value, bool) or value is None:
        text = "" if value is None else str(value)
    elif isinstance(value, (int, float)) or hasattr(value, "dtype"):
        number = value.item() if hasattr(value, "item") else value
        if isinstance(number, float) and math.isnan(number):
            text = ""
        elif fmt is not None and isinstance(number, (int, float)) and not isinstance(number, bool):
            text = fmt.format(number)
        elif isinstance(number, float):
            text = f"{number:.6g}"
        else:
            text = str(number)
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(frame, fmt: str | None = None, max_columns: int = MAX_COLUMNS, max_rows: int = MAX_ROWS) -> str:
    """``frame`` (a pandas DataFrame or Series) as one or more GitHub markdown tables: the index as the leading
    columns (a MultiIndex as several), then at most ``max_columns`` minus those columns per table, in order; at most
    ``max_rows`` rows, with a line saying how many more the frame has. ``fmt`` formats every number."""
    import pandas as pd

    if isinstance(frame, pd.Series):
        frame = frame.to_frame(frame.name if frame.name is not None else "value")
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame or Series, got {type(frame).__name__}")
    if max_columns < 2 or max_rows < 1:
        raise ValueError(f"max_columns must be >= 2 and max_rows >= 1, got {max_columns} and {max_rows}")
    index_names = [_label(n) if n is not None else "" for n in frame.index.names]
    # a default 0..n-1 index is left out, unless the frame is split: then it ties the tables' rows together
    has_index = not (isinstance(frame.index, pd.RangeIndex) and frame.index.names == [None]) or \
        frame.shape[1] > max_columns
    index_width = len(index_names) if has_index else 0
    per_table = max(1, max_columns - index_width)
    shown = frame.iloc[:max_rows]
    index_rows = [list(key) if isinstance(key, tuple) else [key] for key in shown.index]
    parts = []
    for start in range(0, max(1, frame.shape[1]), per_table):
        columns = list(range(start, min(start + per_table, frame.shape[1])))
        header = (index_names if has_index else []) + [_label(frame.columns[c]) for c in columns]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for row, keys in enumerate(index_rows):
            cells = ([_cell(k, None) for k in keys] if has_index else []) + [
                _cell(shown.iat[row, c], fmt) for c in columns]
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    text = "\n\n".join(parts)
    if len(frame) > max_rows:
        text += f"\n\n*The first {max_rows} of {len(frame)} rows; the notebook's output shows them all.*"
    return text


def show(report, key: str, frame, fmt: str | None = None, timing: bool = False):
    """Record the table ``frame`` (a DataFrame or Series) that a notebook shows under ``key`` as markdown
    (:func:`markdown_table`, numbers formatted by ``fmt`` when given) in ``report``'s results.json, and return it
    for display (styled by ``fmt``). ``timing=True``: the table holds wall-clock numbers, filed under the report's
    timings (the one part of results.json allowed to differ between two runs with the same seed)."""
    if not key or any(c in key for c in " :/"):
        raise ValueError(f"table key must be a short name without spaces, ':' or '/', got {key!r}")
    if key in report.metrics.get(TABLES, {}) or key in report.timings.get(TABLES, {}):
        raise ValueError(f"table {key!r} recorded twice")
    shown = (report.timings if timing else report.metrics).get(TABLES, {})
    report.metric(TABLES, {**shown, key: markdown_table(frame, fmt)}, timing=timing)
    if fmt is None:
        return frame
    return (frame if hasattr(frame, "style") else frame.to_frame()).style.format(fmt)
