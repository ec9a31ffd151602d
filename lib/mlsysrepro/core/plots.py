"""The collection's one figure style, and figure saving that gives byte-identical files.

matplotlib stamps SVG files with a date and random ids and PNG files with its version;
:func:`savefig` removes all three (fixed ``svg.hashsalt``, ``Date``/``Software`` metadata
cleared), so the same run gives the same bytes and a rerun shows up in ``git diff`` only when
a number changed.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg", force=False)
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

DPI = 120
_RC = {
    "svg.hashsalt": "mlsysrepro",
    "svg.fonttype": "path",
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "figure.figsize": (6.0, 3.6),
    "axes.titlesize": "medium",
    "legend.fontsize": "small",
}


def style() -> None:
    """Apply the collection's style (seaborn ``whitegrid``, colour-blind palette)."""
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind", rc=_RC)


def savefig(fig, out_dir: Path, name: str) -> Path:
    """Write ``fig`` to ``out_dir/name.png`` and ``out_dir/name.svg``; returns the PNG path.

    ``name`` carries the paper's figure or table number, e.g. ``fig4_accuracy_vs_rounds``.
    """
    if not name or "/" in name or name.endswith((".png", ".svg")):
        raise ValueError(f"figure name must be a bare name like 'fig4_accuracy', got {name!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with plt.rc_context(_RC):
        fig.savefig(out_dir / f"{name}.png", metadata={"Software": None}, bbox_inches="tight")
        fig.savefig(out_dir / f"{name}.svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    return out_dir / f"{name}.png"
