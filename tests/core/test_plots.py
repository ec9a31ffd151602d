import matplotlib.pyplot as plt
import pytest

from mlsysrepro.core import savefig, style


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
