import matplotlib.pyplot as plt
import numpy as np
import pytest

from mlsysrepro.core import plots, savefig, style


def draw():
    style()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [3, 1, 2], label="a line")
    ax.legend()
    return fig


def test_same_figure_gives_byte_identical_png_and_svg(tmp_path):
    savefig(draw(), tmp_path / "one", "fig1_line")
    savefig(draw(), tmp_path / "two", "fig1_line")
    for ext in ("png", "svg"):
        one, two = (tmp_path / d / f"fig1_line.{ext}" for d in ("one", "two"))
        assert one.read_bytes() == two.read_bytes()
    svg = (tmp_path / "one" / "fig1_line.svg").read_text()
    assert "<dc:date>" not in svg


def test_figure_content_changes_the_bytes(tmp_path):
    savefig(draw(), tmp_path, "a")
    fig = draw()
    fig.axes[0].plot([1, 2], [2, 2])
    savefig(fig, tmp_path, "b")
    assert (tmp_path / "a.png").read_bytes() != (tmp_path / "b.png").read_bytes()


@pytest.mark.parametrize("bad", ["", "sub/fig", "fig1.png"])
def test_bad_figure_name_is_rejected(tmp_path, bad):
    with pytest.raises(ValueError, match="figure name must be a bare name"):
        savefig(draw(), tmp_path, bad)


# --- the figure checklist: each rule flags the figure that breaks it, and a figure made to pass passes -------

def good_figure():
    style()
    fig, ax = plt.subplots(layout="constrained")
    ax.plot([1, 2, 3], [3.0, 1.0, 2.0], label="MVS-GNN")
    ax.plot([1, 2, 3], [2.0, 2.5, 2.8], label="GraphSAGE")
    plots.reference_line(ax, 2.2, "paper")
    ax.set(xlabel="step", ylabel="training loss (nats)", title="Fig. 4: training loss")
    plots.legend_outside(ax)
    return fig, ax


def test_a_figure_made_to_the_checklist_passes():
    fig, _ = good_figure()
    assert plots.style_problems(fig) == []


def test_a_figure_without_a_title_naming_the_paper_fails():
    fig, ax = good_figure()
    ax.set_title("training loss")
    assert any("names the paper's figure" in p for p in plots.style_problems(fig))
    ax.set_title("training loss (beyond the paper)")
    assert plots.style_problems(fig) == []


@pytest.mark.parametrize("label", ["", "value", "jct_mean_s"])
def test_an_unlabelled_or_column_named_axis_fails(label):
    fig, ax = good_figure()
    ax.set_ylabel(label)
    assert any("the y axis" in p for p in plots.style_problems(fig))


def test_categorical_ticks_need_no_axis_label_but_a_colour_bar_needs_one():
    import seaborn as sns

    style()
    fig, ax = plt.subplots(layout="constrained")
    sns.heatmap([[0.1, 0.2], [0.3, 0.4]], xticklabels=["a", "b"], yticklabels=["c", "d"], ax=ax)
    ax.set_title("Table 2")
    assert plots.style_problems(fig) == ["a panel: the colour bar's axis has numbers but no label"]
    fig.axes[1].set_ylabel("accuracy")
    assert plots.style_problems(fig) == []


def test_bars_must_start_at_zero_on_a_linear_axis():
    style()
    fig, ax = plt.subplots(layout="constrained")
    ax.bar(["GCN", "SAGE"], [62.0, 64.0])
    ax.set(ylabel="accuracy (%)", title="Table 1", ylim=(60, 65))
    assert any("not from zero" in p for p in plots.style_problems(fig))
    ax.set(ylim=(0, 70))
    assert plots.style_problems(fig) == []
    ax.set(yscale="log")
    assert any("log axis" in p for p in plots.style_problems(fig))


def test_a_legend_over_the_data_or_with_too_many_colours_fails():
    fig, ax = good_figure()
    ax.plot([1, 3], [1.0, 3.0], label="diagonal")  # through the middle of the axes
    ax.legend(loc="center")  # over it
    assert any("covers" in p for p in plots.style_problems(fig))
    fig, ax = good_figure()
    for offset in range(6):
        ax.plot([1, 2, 3], [offset, offset, offset], label=f"curve {offset}")
    plots.legend_outside(ax)
    assert any("colours (at most 6" in p for p in plots.style_problems(fig))


def test_small_or_overlapping_text_fails():
    fig, ax = good_figure()
    ax.xaxis.label.set_fontsize(6)
    assert any("6.0 pt" in p for p in plots.style_problems(fig))
    fig, ax = good_figure()
    ax.text(2, 3.0, "a long note right on the title", transform=ax.transData, fontsize=10)
    ax.text(2, 3.0, "a long note right on the title", transform=ax.transData, fontsize=10)
    assert any("overlaps" in p for p in plots.style_problems(fig))


def test_small_multiples_may_label_a_row_once_but_a_lone_panel_may_not_go_unlabelled():
    style()
    fig, axes = plt.subplots(2, 2, layout="constrained")
    for ax in axes.flat:
        ax.plot([1, 2], [3.0, 4.0])
    for ax in axes[:, 0]:
        ax.set_ylabel("loss (nats)")
    for ax in axes[-1]:
        ax.set_xlabel("step")
    fig.suptitle("Fig. 3: small multiples")
    assert plots.style_problems(fig) == []
    axes[1, 0].set_ylabel("")
    assert plots.style_problems(fig) == ["panel 'step': the y axis has numbers but no label"] * 2


def test_a_log_axis_labels_one_two_five_and_never_its_minor_ticks():
    import matplotlib.pyplot as plt

    from mlsysrepro.core.plots import log_axis, style_problems

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([0.04, 0.07], [0, 1])  # under a decade: matplotlib's default would label the minor ticks
    log_axis(ax)
    ax.set(xlabel="latency (ms, log)", ylabel="share", title="Fig. 1 (test)")
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and not any("$" in label for label in labels), "plain numbers, no mathtext powers of ten"
    assert not [t for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    assert not [p for p in style_problems(fig) if "overlaps" in p]
    plt.close(fig)


@pytest.mark.parametrize("low, high", [(0.318, 0.36), (0.3, 0.42), (3.0, 4.5)])
def test_a_log_axis_over_a_narrow_range_keeps_a_few_plain_ticks_that_never_touch(low, high):
    # no 1, 2 or 5 times a power of ten in view (a latency CDF timed on a fast machine): matplotlib's fallback put
    # ticks every 0.025, whose labels ('0.325', '0.35') touched
    fig, ax = plt.subplots(figsize=(7, 3.6), layout="constrained")
    ax.plot(np.linspace(low, high, 50), np.linspace(0, 1, 50))
    plots.log_axis(ax)
    ax.set(xlabel="request latency (ms, log)", ylabel="share", title="Fig. 1 (test)")
    fig.canvas.draw()
    shown = [tick for tick in ax.get_xticks() if low * 0.97 <= tick <= high * 1.03]
    assert 2 <= len(shown) <= 5
    assert not [p for p in plots.style_problems(fig) if "overlaps" in p]
    plt.close(fig)


def test_two_legend_entries_drawn_alike_fail_but_a_line_style_or_opacity_tells_them_apart():
    fig, ax = good_figure()
    ax.plot([1, 2, 3], [1, 2, 3], "o-", color="#0173b2", label="Dally (auto-tuned)")
    ax.plot([1, 2, 3], [2, 3, 1], "o-", color="#0173b2", label="Dally (fixed timers)")
    plots.legend_outside(ax)
    assert any("draws 2 series alike" in p and "Dally (fixed timers)" in p for p in plots.style_problems(fig))
    fig, ax = good_figure()
    ax.plot([1, 2, 3], [1, 2, 3], "o-", color="#0173b2", label="unpinned")
    ax.plot([1, 2, 3], [2, 3, 1], "o--", color="#0173b2", label="pinned")
    ax.bar([1.5], [1.0], color="#de8f05", alpha=0.5, label="a bar")
    ax.bar([2.5], [1.0], color="#de8f05", label="another bar")
    plots.legend_outside(ax)
    assert not [p for p in plots.style_problems(fig) if "alike" in p]


def test_a_bar_of_height_zero_must_be_marked_unless_a_stacked_bar_or_a_point_stands_there():
    fig, ax = good_figure()
    ax.bar([1, 2, 3], [1.0, 0.0, 2.0])
    assert any("1 bar(s) of height zero are not drawn" in p for p in plots.style_problems(fig))
    ax.text(2, 0.01, "0", ha="center", fontsize=8)
    assert not [p for p in plots.style_problems(fig) if "height zero" in p]
    fig, ax = good_figure()
    ax.bar([1, 2], [1.0, 0.0])
    ax.bar([1, 2], [0.0, 1.0], bottom=[1.0, 0.0])  # stacked: the empty parts are not missing bars
    assert not [p for p in plots.style_problems(fig) if "height zero" in p]


def test_texts_side_by_side_that_touch_fail():
    fig, ax = good_figure()
    fig.set_size_inches(2.5, 2.5)
    ax.set_xticks([1, 2, 3], ["a long tick", "another long", "and one more"])
    assert any("overlaps (or touches)" in p for p in plots.style_problems(fig))


def test_a_series_no_legend_names_fails_but_direct_labels_or_category_ticks_name_it():
    fig, ax = good_figure()
    ax.plot([1, 2, 3], [1.0, 1.5, 1.2], color="#029e73")  # drawn beside a legend, named in none
    assert any("series that no legend or direct label names" in p for p in plots.style_problems(fig))
    fig, ax = good_figure()
    ax.plot([1, 2, 3], [1.0, 1.5, 1.2], color="#029e73")
    ax.text(3, 1.2, "local DRAM", color="#029e73")  # a direct label names it
    assert plots.style_problems(fig) == []
    style()
    fig, ax = plt.subplots(layout="constrained")  # two colours and no legend at all
    ax.plot([1, 2, 3], [3.0, 1.0, 2.0])
    ax.plot([1, 2, 3], [1.0, 2.0, 3.0])
    ax.set(xlabel="step", ylabel="loss (nats)", title="Fig. 4: loss")
    assert any("2 series" in p for p in plots.style_problems(fig))
    fig, ax = plt.subplots(layout="constrained")  # one series needs no legend; bars coloured by their categories
    ax.plot([1, 2, 3], [3.0, 1.0, 2.0])
    ax.set(xlabel="step", ylabel="loss (nats)", title="Fig. 4: loss")
    fig2, ax2 = plt.subplots(layout="constrained")
    ax2.bar(["a", "b", "c"], [1.0, 2.0, 3.0], color=["#0173b2", "#de8f05", "#029e73"])
    ax2.set(ylabel="speed-up (x)", title="Fig. 5: speed-up")
    assert plots.style_problems(fig) == [] and plots.style_problems(fig2) == []


def test_error_bar_entries_carry_their_colour_for_the_hue_checks():
    style()
    fig, ax = plt.subplots(layout="constrained")
    for i, label in enumerate(["ours", "paper's code"]):
        ax.errorbar([1, 2], [1.0 + i, 2.0 + i], yerr=[0.1, 0.1], fmt="o", color="#0173b2", label=label)
    ax.set(xlabel="seed", ylabel="accuracy (%)", title="Table 2: accuracy")
    plots.legend_outside(ax)
    assert any("draws 2 series alike" in p for p in plots.style_problems(fig))
    ax.containers[1].lines[0].set_color("#de8f05")
    ax.get_legend().remove()
    plots.legend_outside(ax)
    assert plots.style_problems(fig) == []


def test_an_axis_that_hides_the_gap_between_two_series_fails_and_a_zoom_passes():
    fig, ax = good_figure()
    ax.plot([1, 2, 3], [2.0, 2.5, 2.801], label="LLCG")  # 0.001 from GraphSAGE on an axis of about 2
    plots.legend_outside(ax)
    found = plots.style_problems(fig)
    assert any("'GraphSAGE' and 'LLCG' differ in their data" in p for p in found), found
    ax.lines[-1].set_linestyle((0, (4, 1.5)))  # dashed over the solid line: both show, and that they nearly meet
    assert not any("differ in their data" in p for p in plots.style_problems(fig))
    ax.lines[-1].set_linestyle("-")
    ax.set_ylim(2.799, 2.802)  # zoomed onto the gap
    ax.set_xlim(2.9, 3.05)
    assert not any("differ in their data" in p for p in plots.style_problems(fig))
    fig, ax = good_figure()
    ax.plot([1, 2, 3], [2.0, 2.5, 2.8], label="LLCG")  # the same data: nothing hidden
    plots.legend_outside(ax)
    assert not any("differ in their data" in p for p in plots.style_problems(fig))


def test_series_coloured_per_category_are_named_by_the_tick_labels_and_two_point_guides_are_no_series():
    style()
    fig, ax = plt.subplots(layout="constrained")
    for i, colour in enumerate(["#949494", "#0173b2", "#029e73"]):
        ax.scatter([i] * 4, [1.0, 1.2, 0.9, 1.1], color=colour)
    ax.set_xticks(range(3), ["no dropout (control)", "standard (I)", "structured (III)"])
    ax.plot([0, 2], [0.9, 1.2], color="k", linestyle="--")  # a guide line
    ax.set(ylabel="test perplexity", title="Table 2: accuracy per mode")
    assert plots.style_problems(fig) == []
    ax.scatter([0, 1, 2], [1.0, 1.1, 1.0], color="#d55e00")  # across the categories: two series of their own
    ax.scatter([0, 1, 2], [1.1, 1.0, 1.1], color="#cc78bc")
    assert any("2 series that no legend" in p for p in plots.style_problems(fig))
