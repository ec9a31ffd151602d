"""The map of the collection: every paper's claims in one figure, our value against the paper's.

A claim whose paper value is a number other than zero, and that we measured as a number, is placed at

    ours / the paper's        (1: as the paper says; its 95 % interval divided alike)

in the claim's own unit, on a log axis. The others cannot be placed on that axis: a paper value that is a phrase
("lowest on all 4 graphs"), a parity claim whose paper value is zero ("no loss"), or a claim with no value of ours
(not testable here). They are listed beside it, by paper and verdict. Colour is the verdict
(:data:`mlsysrepro.core.plots.VERDICT_COLOURS`), the marker the kind (a paper claim or an analogue, measured on another
platform or quantity), an open marker (a ``*`` on the right) a hold or fail that is fragile or depends on an assumption
of ours (:func:`mlsysrepro.core.claims.qualifier`); findings of this reproduction and consistency checks are not the papers' and stay off the map.

``python -m mlsysrepro.reproduction`` (run by ``./run_all.sh``) draws it from the committed results into
``figures/collection_map.png`` and writes the points it drew to ``figures/collection_map.json``, which ``--check``
compares with what the results give.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from .core import plots
from .core.claims import ANALOGUE, NOT_TESTABLE, PAPER_CLAIM, VERDICTS, qualifier

#: The kinds the map shows, with their markers.
KIND_MARKERS = {PAPER_CLAIM: "o", ANALOGUE: "s"}
#: The figure's file name under ``figures/``.
NAME = "collection_map"
#: Ratios are drawn between these bounds; an interval reaching past them is drawn to the edge.
AXIS_LIMITS = (0.01, 100.0)


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def placement(claim: dict) -> tuple[float, float | None, float | None] | None:
    """``(ours / paper, low / paper, high / paper)`` for a claim with a numeric, non-zero paper value and a numeric
    value of ours (the interval's ends sorted, so a negative paper value keeps low below high); None otherwise."""
    paper, ours = _number(claim["paper_value"]), _number(claim["measured"])
    if paper is None or paper == 0 or ours is None:
        return None
    if not claim.get("interval"):
        return ours / paper, None, None
    low, high = sorted(value / paper for value in claim["interval"])
    return ours / paper, low, high


def claim_points(results: dict[str, dict]) -> pd.DataFrame:
    """One row per paper claim and analogue of ``results`` (paper name -> its results.json, in the order to draw):
    paper, id, kind, verdict, and ``ratio``, ``low``, ``high`` where :func:`placement` places it (NaN otherwise)."""
    rows = []
    for paper, result in results.items():
        for claim in result["claims"]:
            if claim["kind"] not in KIND_MARKERS:
                continue
            placed = placement(claim) or (None, None, None)
            rows.append({"paper": paper, "id": claim["id"], "kind": claim["kind"], "verdict": claim["verdict"],
                         "qualified": bool(qualifier(claim)), "ratio": placed[0], "low": placed[1], "high": placed[2]})
    return pd.DataFrame(rows, columns=["paper", "id", "kind", "verdict", "qualified", "ratio", "low", "high"]).astype(
        {"qualified": bool, "ratio": float, "low": float, "high": float})


def _placed_panel(ax, placed: pd.DataFrame) -> None:
    low_edge, high_edge = AXIS_LIMITS
    for row_number, row in enumerate(placed.itertuples()):
        y = -row_number
        colour = plots.VERDICT_COLOURS[row.verdict]
        if not math.isnan(row.low):
            ax.plot([max(row.low, low_edge), min(row.high, high_edge)], [y, y], color=colour, linewidth=1.5)
        ax.plot([min(max(row.ratio, low_edge), high_edge)], [y], marker=KIND_MARKERS[row.kind], color=colour,
                linestyle="", markersize=6, markerfacecolor="white" if row.qualified else colour)
    plots.reference_line(ax, 1.0, "as the paper says", axis="x")
    ax.set_xscale("log")
    ax.set_xlim(*AXIS_LIMITS)
    ax.set_xticks([0.01, 0.1, 1, 10, 100], ["0.01", "0.1", "1", "10", "100"])
    ax.set_yticks([-i for i in range(len(placed))], [f"{p} {c}" for p, c in zip(placed.paper, placed.id)])
    ax.set_ylim(-len(placed) + 0.4, 0.6)
    ax.set_xlabel("our value / the paper's, in the claim's own unit\n(1: as the paper says; 95 % interval)")
    ax.set_title("Claims with a number to compare", fontsize="medium")


def _unplaced_panel(ax, unplaced: pd.DataFrame, papers: list[str]) -> None:
    """The claims with no ratio: their ids written in a (paper x verdict) grid, in the verdict's colour."""
    for y, paper in enumerate(papers):
        for x, verdict in enumerate(VERDICTS):
            rows = unplaced[(unplaced.paper == paper) & (unplaced.verdict == verdict)]
            ids = [f"{i}*" if qualified else i for i, qualified in zip(rows.id, rows.qualified)]
            if ids:
                ax.text(x, -y, "\n".join(textwrap.wrap(" ".join(ids), 9)), ha="center", va="center",
                        fontsize=8, color=plots.VERDICT_COLOURS[verdict])
    ax.set_xticks(range(len(VERDICTS)), [v.replace(" here", "") for v in VERDICTS])
    ax.set_xlim(-0.5, len(VERDICTS) - 0.5)
    ax.set_yticks([-i for i in range(len(papers))], papers)
    ax.set_ylim(-len(papers) + 0.4, 0.6)
    ax.set_xlabel("verdict")
    ax.grid(False)
    ax.set_title("Claims without one (a phrase, zero, or not measured)", fontsize="medium")


def draw(points: pd.DataFrame):
    """The map: placed claims on the left, the rest on the right (:mod:`mlsysrepro.collection_map`)."""
    plots.style()
    placed = points.dropna(subset=["ratio"]).reset_index(drop=True)
    unplaced = points[points.ratio.isna()]
    papers = list(dict.fromkeys(unplaced.paper))
    height = max(len(placed), 1.6 * len(papers)) * 0.24 + 1.8
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.5, height), width_ratios=(1.25, 1),
                                      layout="constrained")
    _placed_panel(left, placed)
    _unplaced_panel(right, unplaced, papers)
    handles = [Line2D([], [], marker="o", linestyle="", color=plots.VERDICT_COLOURS[v], label=v) for v in VERDICTS]
    handles += [Line2D([], [], marker=KIND_MARKERS[k], linestyle="", color=plots.REFERENCE_COLOUR, label=k)
                for k in KIND_MARKERS]
    handles.append(Line2D([], [], marker="o", linestyle="", color=plots.REFERENCE_COLOUR, markerfacecolor="white",
                          label="open, or * on the right: fragile or depends on our choice"))
    handles.append(Line2D([], [], color=plots.REFERENCE_COLOUR, linestyle="--", label="as the paper says"))
    fig.legend(handles=handles, loc="outside lower center", ncol=4, frameon=False, fontsize="small")
    fig.suptitle("The collection at a glance: every paper claim and analogue against the paper's value, coloured "
                 "by its verdict (beyond the paper)", fontsize="medium")
    return fig


def points_json(points: pd.DataFrame) -> str:
    """The points as the committed ``figures/collection_map.json`` holds them (rounded to 4 significant digits)."""
    rows = [{key: (None if isinstance(value, float) and math.isnan(value) else
                   float(f"{value:.4g}") if isinstance(value, float) else value) for key, value in row.items()}
            for row in points.to_dict("records")]
    return json.dumps(rows, indent=1) + "\n"


def write(points: pd.DataFrame, out_dir: Path) -> Path:
    """Draw the map into ``out_dir`` (PNG and SVG, byte-stable) with its points beside it; returns the PNG."""
    fig = draw(points)
    problems = plots.style_problems(fig)
    if problems:
        plt.close(fig)
        raise ValueError("the collection map fails the figure checklist: " + "; ".join(problems))
    path = plots.savefig(fig, out_dir, NAME)
    plt.close(fig)
    (Path(out_dir) / f"{NAME}.json").write_text(points_json(points))
    return path
