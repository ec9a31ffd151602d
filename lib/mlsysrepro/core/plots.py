"""The collection's one figure style, its checklist, and figure saving that gives byte-identical files.

:func:`style` sets the look (seaborn ``whitegrid``, the colour-blind palette). :func:`style_problems` checks a
finished figure against the checklist every figure of the collection passes (:meth:`Report.save
<mlsysrepro.core.claims.Report.save>` refuses a figure that fails it):

- the figure has a title that names the paper's figure, table or section it corresponds to, or says
  "beyond the paper";
- every numeric axis is labelled (small multiples may label a row's y axes or a column's x axes once), and no
  label is a placeholder ("value", "variable") or a raw column name (``snake_case``); a colour bar is labelled too;
- text is at least :data:`MIN_FONT_PT` points;
- bars start at zero: a bar chart's value axis is linear and includes 0; a bar of height zero is drawn as
  something (a text on it, such as "0"), or a reader takes it for a setting that was not run;
- a legend covers no data and no other axes, and names at most :data:`MAX_HUES` colours besides the reference
  grey (more categories take direct labels or small multiples), and no two of its entries look alike (the same
  colour, line style and marker read as one series);
- every series is named: a panel that draws two or more colours names each in a legend or by direct labels (a bar
  group or a point coloured by its category is named by its tick label; a panel of one series by its axis label);
- an axis does not hide a difference: two line series drawn alike (colour aside) that differ in their data are
  at least :data:`MIN_SEPARATION_PX` apart somewhere, or a reader sees one line where the text reports a gap (zoom
  in with a panel of their own, draw the difference, or give one its own line style);
- no two texts (tick labels, axis labels, titles, legends) overlap, and no two side by side touch (closer than
  :data:`MIN_GAP_PX`).

:func:`reference_line` and :func:`reference_band` draw the paper's value. matplotlib stamps SVG files with a date
and random ids and PNG files with its version; :func:`savefig` removes all three (fixed ``svg.hashsalt``,
``Date``/``Software`` metadata cleared), so the same run gives the same bytes and a rerun shows up in ``git diff``
only when a number changed.
"""

from __future__ import annotations

import re
import textwrap
from itertools import combinations
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg", force=False)
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.offsetbox import DrawingArea, TextArea  # noqa: E402

#: Smallest text size, in points, a figure may use.
MIN_FONT_PT = 8.0
#: Most colours one legend may name.
MAX_HUES = 6
#: Two texts side by side closer than this (pixels at the figure's dpi) read as one.
MIN_GAP_PX = 2.0
#: Two different series never farther apart than this (pixels) read as one line.
MIN_SEPARATION_PX = 2.0
#: A figure title must cite the paper (or say it goes beyond it) with one of these.
PAPER_REFERENCE = re.compile(r"\b(Fig\.|Figs\.|Figure|Table|Tab\.|Sec\.|§|Eq\.|Alg\.|Algorithm|Appendix)|"
                             r"beyond the paper", re.IGNORECASE)
PLACEHOLDER_LABELS = {"value", "values", "variable", "index", "count", "y", "x"}
#: The colour the paper's reference values are drawn in.
REFERENCE_COLOUR = "0.35"

DPI = 120
_RC = {
    "svg.hashsalt": "mlsysrepro",
    "svg.fonttype": "path",
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "figure.figsize": (6.0, 3.6),
    "axes.titlesize": "medium",
    "legend.fontsize": "small",
    "xtick.labelsize": "small",
    "ytick.labelsize": "small",
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


def reference_line(ax, value: float, label: str, axis: str = "y"):
    """Draw the paper's ``value`` across ``ax`` as a dashed grey line labelled ``label`` in the legend."""
    draw = ax.axhline if axis == "y" else ax.axvline
    return draw(value, color=REFERENCE_COLOUR, linestyle="--", linewidth=1.2, label=label, zorder=1)


def reference_band(ax, low: float, high: float, label: str, axis: str = "y"):
    """Shade the paper's reported range ``[low, high]`` across ``ax``, labelled ``label`` in the legend."""
    draw = ax.axhspan if axis == "y" else ax.axvspan
    return draw(low, high, color=REFERENCE_COLOUR, alpha=0.18, linewidth=0, label=label, zorder=0)


def log_axis(ax, axis: str = "x"):
    """A log scale labelled at 1, 2 and 5 times each power of ten (1 and 3 over more than 2.5 decades of the data
    drawn so far, powers of ten alone over more than 4), in plain numbers, with unlabelled minor ticks
    (matplotlib's default labels the minor ticks of a range under a decade as powers of ten, and they overlap);
    where fewer than two of those fall in view, at most five evenly spaced plain ticks (matplotlib's own fallback
    puts about ten there, whose labels touch on a narrow range such as 0.3-0.42)."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    low, high = ax.get_xlim() if axis == "x" else ax.get_ylim()
    decades = np.log10(high / low) if low > 0 else 1.0
    subs = (1.0, 2.0, 5.0) if decades <= 2.5 else (1.0, 3.0) if decades <= 4 else (1.0,)
    powers = 10.0 ** np.arange(np.floor(np.log10(low)), np.ceil(np.log10(high)) + 1) if low > 0 else np.array([])
    in_view = sum(low <= power * sub <= high for power in powers for sub in subs)
    target.set_major_locator(LogLocator(base=10, subs=subs) if in_view >= 2 or low <= 0
                             else MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
    target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    target.set_minor_formatter(NullFormatter())


#: The colour of each verdict in figures that show verdicts (four hues at most).
VERDICT_COLOURS = {"holds": "#0173b2", "fails": "#d55e00", "inconclusive": "#de8f05", "not testable here": "#949494"}


def assumption_grid(rows: list[dict], xlabel: str, title: str):
    """Small multiples, one per claim: the measured value at each value of one of our assumptions (points with
    their 95 % interval where they have one), coloured by the verdict there, with the rule's threshold (or band) in
    the reference grey. ``rows``: ``{"claim", "unit", "entry"}`` with ``entry`` a robustness record
    (:func:`mlsysrepro.core.claims.robustness`) and ``bounds`` the rule's threshold(s) or None."""
    fig, axes = plt.subplots(1, len(rows), figsize=(2.6 * len(rows) + 1.6, 3.2), squeeze=False)
    seen: dict[str, bool] = {}
    for ax, row in zip(axes[0], rows):
        entry = row["entry"]
        keys = list(entry["measured"])
        for x, key in enumerate(keys):
            value, verdict = entry["measured"][key], entry["verdicts"][key]
            if value is None or isinstance(value, bool):
                continue
            interval = entry["interval"].get(key)
            err = None if interval is None else [[value - interval[0]], [interval[1] - value]]
            ax.errorbar([x], [value], yerr=err, fmt="o", color=VERDICT_COLOURS[verdict], capsize=3)
            seen[verdict] = True
        if row["bounds"] is not None:
            low, high = row["bounds"]
            for bound in {low, high}:
                reference_line(ax, bound, "the rule's threshold")
        ax.set_xticks(range(len(keys)), keys)
        ax.set_xlim(-0.5, len(keys) - 0.5)
        ax.set_title(row["claim"], fontsize="small")
        ax.set_xlabel("\n".join(textwrap.wrap(xlabel, 24)), fontsize="small")
        lines = textwrap.wrap(row["unit"], 30)
        ax.set_ylabel("\n".join(lines[:2]) + ("…" if len(lines) > 2 else ""), fontsize="small")
    fig.suptitle(title, fontsize="medium")
    handles = [Line2D([], [], marker="o", linestyle="", color=VERDICT_COLOURS[v], label=v) for v in seen]
    if any(row["bounds"] is not None for row in rows):
        handles.append(Line2D([], [], color=REFERENCE_COLOUR, linestyle="--", label="the rule's threshold"))
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


def legend_outside(ax, title: str | None = None, **kwargs):
    """Place ``ax``'s legend to the right of the axes, off the data."""
    handles, labels = ax.get_legend_handles_labels()
    return ax.legend(handles, labels, title=title, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False,
                     **kwargs)


def _title(fig) -> str:
    own = fig.get_suptitle()
    axes_titles = [ax.get_title(loc) for ax in fig.axes for loc in ("center", "left", "right")]
    return " ".join([own, *axes_titles])


def _is_colorbar(ax) -> bool:
    return ax.get_label() == "<colorbar>"


def _has_data(ax) -> bool:
    return bool(ax.lines or ax.collections or ax.patches or ax.images)


def _numeric_ticks(axis) -> bool:
    """True when ``axis``'s tick labels are numbers (plain, or mathtext powers such as 10^2)."""
    labels = [t.get_text() for t in _drawn_tick_labels(axis) if t.get_text()]
    bare = [re.sub(r"\\mathdefault|\\times|[${}^\s%−+\-]", "", label) for label in labels]
    return bool(bare) and all(re.fullmatch(r"[0-9.,eE]*[0-9][0-9.,eE]*", label) for label in bare)


def _labelled_alongside(ax, name: str) -> bool:
    """True when another panel in ``ax``'s row (for y) or column (for x) carries the label: small multiples label a
    row or a column once."""
    box = ax.get_position()
    for other in ax.figure.axes:
        if other is ax or not other.get_visible() or _is_colorbar(other):
            continue
        theirs = other.get_position()
        aligned = (abs(theirs.y0 - box.y0) < 1e-3 and abs(theirs.y1 - box.y1) < 1e-3) if name == "y" else \
            (abs(theirs.x0 - box.x0) < 1e-3 and abs(theirs.x1 - box.x1) < 1e-3)
        if aligned and (other.get_ylabel() if name == "y" else other.get_xlabel()).strip():
            return True
    return False


def _label_problems(ax, where: str) -> list[str]:
    problems = []
    for name, axis in [("x", ax.xaxis), ("y", ax.yaxis)]:
        label = axis.get_label().get_text().strip()
        if not axis.get_visible() or not any(t.get_text() for t in _drawn_tick_labels(axis)):
            continue
        shown = "colour bar's" if _is_colorbar(ax) else name
        if not label and _numeric_ticks(axis) and (_is_colorbar(ax) or not _labelled_alongside(ax, name)):
            problems.append(f"{where}: the {shown} axis has numbers but no label")
        elif label.lower() in PLACEHOLDER_LABELS or re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", label):
            problems.append(f"{where}: the {shown} axis label {label!r} is a placeholder or a column name")
    return problems


def _zero_bars_unmarked(ax, container) -> int:
    """How many of ``container``'s bars have zero height (or width) with nothing drawn where they stand: no other
    bar there (a stacked bar's empty part is not missing), no text and no marker of ``ax`` over them."""
    vertical = container.orientation == "vertical"

    def span(patch):
        return sorted((patch.get_x(), patch.get_x() + patch.get_width()) if vertical else
                      (patch.get_y(), patch.get_y() + patch.get_height()))

    def size(patch):
        return patch.get_height() if vertical else patch.get_width()

    drawn = [span(p) for c in ax.containers if isinstance(c, BarContainer) for p in c.patches if size(p)]
    placed = [text.get_position()[0 if vertical else 1] for text in ax.texts if text.get_text().strip()]
    placed += [float(v) for line in ax.lines if line.get_visible() and line.get_marker() not in ("None", "", " ", None)
               and not _spans_axes(line, ax) for v in (line.get_xdata() if vertical else line.get_ydata())]
    unmarked = 0
    for patch in container.patches:
        if size(patch) != 0:
            continue
        low, high = span(patch)
        covered = any(a < high and low < b for a, b in drawn) or any(low <= at <= high for at in placed)
        unmarked += not covered
    return unmarked


def _bar_problems(ax, where: str) -> list[str]:
    problems = []
    for container in ax.containers:
        if not isinstance(container, BarContainer) or not len(container.patches):
            continue
        zero = _zero_bars_unmarked(ax, container)
        if zero:
            problems.append(f"{where}: {zero} bar(s) of height zero are not drawn; mark each (ax.text(x, 0, '0'))")
        vertical = container.orientation == "vertical"
        scale = ax.get_yscale() if vertical else ax.get_xscale()
        low, high = sorted(ax.get_ylim() if vertical else ax.get_xlim())
        if scale != "linear":
            problems.append(f"{where}: bars on a {scale} axis do not start at zero; draw points")
        elif not low <= 0 <= high:
            problems.append(f"{where}: the bars' axis runs {low:.3g}..{high:.3g}, not from zero")
    return problems


def _data_extents(ax, renderer):
    """Display-space points and boxes of ``ax``'s data: line vertices, scatter points, bars (reference lines drawn
    across the whole axes are not data a legend must avoid)."""
    points, boxes = [], []
    for line in ax.lines:
        if line.get_visible() and len(line.get_xydata()) and not _spans_axes(line, ax):
            vertices = line.get_transform().transform(line.get_xydata())
            points.append(vertices)
            if line.get_linestyle() not in ("None", "", " ") and len(vertices) > 1:  # the segments between them
                steps = np.linspace(0, 1, 17)[1:-1, None, None]
                points.append((vertices[:-1] + steps * (vertices[1:] - vertices[:-1])).reshape(-1, 2))
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and collection.get_visible() and len(collection.get_offsets()):
            points.append(collection.get_offset_transform().transform(collection.get_offsets()))
    for container in ax.containers:
        if isinstance(container, BarContainer):
            boxes += [patch.get_window_extent(renderer) for patch in container.patches
                      if patch.get_height() and patch.get_width()]
    return points, boxes


def _spans_axes(line, ax) -> bool:
    """True for an axhline/axvline (drawn in axes coordinates along one direction)."""
    return line.get_transform() in (ax.get_xaxis_transform(), ax.get_yaxis_transform())


def _colour_of(artist) -> str | None:
    """The colour ``artist`` is drawn in, as hex: a line's colour, a bar's or scatter's face (its edge where the face
    is transparent, as for an error bar's lines); None for none."""
    if isinstance(artist, Line2D):
        return matplotlib.colors.to_hex(artist.get_color(), keep_alpha=False)
    colours = np.atleast_2d(artist.get_facecolor()) if hasattr(artist, "get_facecolor") else np.empty((0, 4))
    if (not len(colours) or colours[0][3] == 0) and hasattr(artist, "get_edgecolor"):
        colours = np.atleast_2d(artist.get_edgecolor())
    return matplotlib.colors.to_hex(colours[0], keep_alpha=False) if len(colours) else None


def _draws_something(line: Line2D) -> bool:
    return line.get_visible() and (line.get_linestyle() not in ("None", "", " ")
                                   or line.get_marker() not in ("None", "none", "", " ", None))


def _legend_keys(legend):
    """Each entry of ``legend`` as (the artists its key draws, its text): an error bar's key is its bars, its line
    and its marker, of which ``legend.legend_handles`` holds only the first."""
    areas, stack = [], [getattr(legend, "_legend_handle_box", None)]
    while stack:
        box = stack.pop()
        if isinstance(box, DrawingArea):
            areas.append(box)
        elif box is not None and not isinstance(box, TextArea):
            stack += box.get_children()
    for handle, text in zip(legend.legend_handles, legend.get_texts()):
        area = next((a for a in areas if handle in a.get_children()), None)
        yield (area.get_children() if area is not None else [handle]), text


def _key_look(artists) -> tuple[str | None, str, str, str]:
    """What tells a legend entry apart: its colour, opacity, line style (or hatch) and marker. The colour is its line
    or marker's where it draws one (an error bar's), else its patch's or collection's."""
    lines = [a for a in artists if isinstance(a, Line2D) and _draws_something(a)]
    main = lines[0] if lines else artists[0]
    alpha = str(main.get_alpha()) if hasattr(main, "get_alpha") else ""
    if lines:
        return (_colour_of(main), alpha, ",".join(str(a.get_linestyle()) for a in lines),
                ",".join(str(a.get_marker()) for a in lines))
    style = str(main.get_linestyle()) if hasattr(main, "get_linestyle") else ""
    hatch = str(main.get_hatch()) if hasattr(main, "get_hatch") else ""
    return _colour_of(main), alpha, style + hatch, ""


def _legends(fig):
    """Every legend of ``fig`` with the panel it belongs to (None: the figure's)."""
    return [(ax, ax.get_legend()) for ax in fig.axes if ax.get_legend()] + [(None, leg) for leg in fig.legends]


def _legend_colours(fig) -> set[str]:
    """The colours the visible legends of ``fig`` name."""
    return {_key_look(artists)[0] for _, legend in _legends(fig) if legend.get_visible()
            for artists, text in _legend_keys(legend) if text.get_text().strip()}


def _finite(xy: np.ndarray) -> np.ndarray:
    """The points of ``xy`` that are drawn (seaborn pads a hue's line with NaN at the other categories)."""
    return xy[np.isfinite(xy).all(axis=1)]


def _series_lines(ax) -> list[Line2D]:
    """``ax``'s data lines: visible, drawn, not across the whole axes (a reference) and of more than two drawn points
    (two are an error bar, a cap or a guide such as y = x)."""
    return [line for line in ax.lines if _draws_something(line) and len(_finite(line.get_xydata())) > 2
            and not _spans_axes(line, ax)]


def _at_one_category(ax, xy) -> bool:
    """True when the points ``xy`` (data coordinates) all sit at one labelled tick of a categorical axis: a colour
    given per category, which that tick label names."""
    for column, axis in ((0, ax.xaxis), (1, ax.yaxis)):
        if _numeric_ticks(axis):
            continue
        ticks = [t.get_loc() for t in axis.get_major_ticks() if t.label1.get_visible() and t.label1.get_text()]
        if ticks and len(xy) and any(np.all(np.abs(xy[:, column] - tick) < 0.5) for tick in ticks):
            return True
    return False


def _series_colours(ax) -> set[str]:
    """The colours ``ax`` draws its series in: its data lines, its scatters not coloured by a colour map, its bar
    groups of one colour (a group coloured bar by bar is named by its tick labels, as is a line or scatter at one
    category of a categorical axis). The reference grey draws the paper's values, not a series."""
    colours = {_colour_of(line) for line in _series_lines(ax) if not _at_one_category(ax, _finite(line.get_xydata()))}
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and collection.get_visible() and len(collection.get_offsets()) \
                and collection.get_array() is None:
            offsets = _finite(ax.transData.inverted().transform(collection.get_offset_transform().transform(
                collection.get_offsets())))
            if _at_one_category(ax, offsets):
                continue
            faces = np.atleast_2d(collection.get_facecolor())
            faces = faces if len(faces) and faces[0][3] > 0 else np.atleast_2d(collection.get_edgecolor())
            colours |= {matplotlib.colors.to_hex(face, keep_alpha=False) for face in faces}
    for container in ax.containers:
        if isinstance(container, BarContainer) and len(container.patches):
            group = {_colour_of(patch) for patch in container.patches}
            colours |= group if len(group) == 1 else set()
    return colours - {matplotlib.colors.to_hex(REFERENCE_COLOUR), None}


def _unlabelled_problems(fig) -> list[str]:
    """Panels of two or more series colours that leave one unnamed: each is named by a legend of the figure or by
    the panel's direct labels (at least one text per unnamed colour). A panel of one series is named by its axis
    label."""
    named = _legend_colours(fig)
    problems = []
    for ax in fig.axes:
        if not ax.get_visible() or _is_colorbar(ax):
            continue
        colours = _series_colours(ax)
        unnamed = colours - named
        texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
        if unnamed and len(colours) > 1 and len(texts) < len(unnamed):
            problems.append(f"{_where(ax)} draws {len(unnamed)} series that no legend or direct label names "
                            f"({', '.join(sorted(unnamed))}); label them (label=..., then a legend)")
    return problems


def _stroke(line: Line2D) -> tuple[str, str, str]:
    """How ``line`` is stroked, colour aside: its line style, its dash pattern (seaborn's ``style=`` gives each level
    its own dashes under the one style "--") and its marker."""
    return str(line.get_linestyle()), str(getattr(line, "_unscaled_dash_pattern", "")), str(line.get_marker())


def _hidden_difference_problems(ax) -> list[str]:
    """Pairs of ``ax``'s line series on the same x, drawn in the same line style and marker, whose data differ but
    which are never drawn :data:`MIN_SEPARATION_PX` apart: the axis hides their difference, and the series drawn
    last hides the other. (A dashed line over a solid one shows both, and that they coincide.)"""
    problems = []
    for first, second in combinations(_series_lines(ax), 2):
        a, b = first.get_xydata(), second.get_xydata()
        if a.shape != b.shape or not np.array_equal(a[:, 0], b[:, 0]) or np.array_equal(a[:, 1], b[:, 1]) \
                or _colour_of(first) == _colour_of(second) \
                or _stroke(first) != _stroke(second):
            continue
        gap = np.abs(first.get_transform().transform(a)[:, 1] - second.get_transform().transform(b)[:, 1])
        if np.nanmax(gap) < MIN_SEPARATION_PX:
            names = [line.get_label() for line in (first, second)]
            named = " and ".join(repr(n) for n in names if not n.startswith("_")) or "two series"
            problems.append(f"{_where(ax)}: {named} differ in their data but are never {MIN_SEPARATION_PX:g} px "
                            f"apart ({np.nanmax(gap):.1f} px at most), drawn alike: the axis hides their difference "
                            "and one hides the other; zoom in (a panel of their own), draw the difference, or give "
                            "one its own line style")
    return problems


def _legend_problems(fig, renderer) -> list[str]:
    problems = []
    for owner, legend in _legends(fig):
        if not legend.get_visible():
            continue
        name = f"the legend of {_where(owner)}" if owner is not None else "the figure's legend"
        reference = matplotlib.colors.to_hex(REFERENCE_COLOUR)  # the paper's values are not a category
        entries = [(look, text.get_text()) for artists, text in _legend_keys(legend)
                   for look in [_key_look(artists)]
                   if look[0] not in (None, reference, "#ffffff") and text.get_text().strip()
                   and any(a.get_visible() for a in artists)]  # seaborn's section titles have white, invisible handles
        colours = {look[0] for look, _ in entries}
        if len(colours) > MAX_HUES:
            problems.append(f"{name} names {len(colours)} colours (at most {MAX_HUES}: use direct labels or small "
                            "multiples)")
        for look in sorted(set(look for look, _ in entries)):
            alike = [label for other, label in entries if other == look]
            if len(alike) > 1:
                problems.append(f"{name} draws {len(alike)} series alike ({look[0]}, the same line and marker: "
                                f"{', '.join(alike)}); give each its own colour")
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            if not ax.get_visible() or _is_colorbar(ax):
                continue
            if ax is not owner and box.overlaps(ax.get_window_extent(renderer)):
                problems.append(f"{name} overlaps {_where(ax)}")
                continue
            points, boxes = _data_extents(ax, renderer)
            inside = sum(int(((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1))
                             .sum()) for xy in points) + sum(box.overlaps(bar) for bar in boxes)
            if inside:
                problems.append(f"{name} covers {inside} data point(s) or bar(s) of {_where(ax)}")
    return problems


def _texts(fig):
    """Every visible, non-empty text of ``fig`` with a name for error messages."""
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        where = _where(ax)
        for axis_name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if not axis.get_visible() or not ax.axison:
                continue
            yield f"{where} {axis_name} label", axis.get_label()
            for tick in _drawn_tick_labels(axis):
                yield f"{where} {axis_name} tick {tick.get_text()!r}", tick
        for title in (ax.title, ax._left_title, ax._right_title):
            yield f"{where} title", title
        for text in ax.texts:
            yield f"{where} text {text.get_text()[:20]!r}", text
        if ax.get_legend():
            for text in ax.get_legend().get_texts():
                yield f"{where} legend entry {text.get_text()!r}", text
            yield f"{where} legend title", ax.get_legend().get_title()
    if fig._suptitle is not None:
        yield "the figure title", fig._suptitle
    for legend in fig.legends:
        for text in legend.get_texts():
            yield f"figure legend entry {text.get_text()!r}", text


def _drawn_tick_labels(axis):
    """The tick labels matplotlib draws: those inside the view interval, on either side of the axes."""
    low, high = sorted(axis.get_view_interval())
    slack = 1e-9 * max(abs(low), abs(high), 1.0)
    return [label for tick in axis.get_major_ticks() + axis.get_minor_ticks()
            if low - slack <= tick.get_loc() <= high + slack
            for label in (tick.label1, tick.label2) if label.get_visible()]


def _where(ax) -> str:
    title = ax.get_title() or ax.get_ylabel() or ax.get_xlabel()
    return f"panel {title!r}" if title else "a panel"


def _text_problems(fig, renderer) -> list[str]:
    problems, placed = [], []
    for name, text in _texts(fig):
        if not text.get_visible() or not text.get_text().strip():
            continue
        if text.get_fontsize() < MIN_FONT_PT:
            problems.append(f"{name} is {text.get_fontsize():.1f} pt (at least {MIN_FONT_PT:g})")
        placed.append((name, text.get_window_extent(renderer), text.get_rotation() % 90 != 0))
    for (first, a, tilted_a), (second, b, tilted_b) in combinations(placed, 2):
        if tilted_a and tilted_b:  # the boxes of two tilted labels overlap where their texts do not
            continue
        side_by_side = min(a.y1, b.y1) - max(a.y0, b.y0) > 1
        if a.width and b.width and side_by_side and min(a.x1, b.x1) - max(a.x0, b.x0) > -MIN_GAP_PX:
            problems.append(f"{first} overlaps (or touches) {second}")
    return problems


def style_problems(fig) -> list[str]:
    """What in ``fig`` breaks the collection's figure checklist (the module docstring), as sentences; empty when
    it passes. Draws the figure to measure where its texts and legends landed."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    if not PAPER_REFERENCE.search(_title(fig)):
        problems.append("no title names the paper's figure, table or section (or says 'beyond the paper'); "
                        f"titles: {_title(fig).strip()!r}")
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison or not (_has_data(ax) or _is_colorbar(ax)):
            continue
        problems += _label_problems(ax, _where(ax)) + _bar_problems(ax, _where(ax)) + _hidden_difference_problems(ax)
    return (problems + _unlabelled_problems(fig) + _legend_problems(fig, renderer)
            + _text_problems(fig, renderer))
