"""Canvases of real digits and bar charts: answers are correct by construction (an independent decoder of the
pixels agrees), a wrong answer is caught, test glyphs are held out, and bad input is refused by name."""

import pytest
import torch

from mlsysrepro.vision.canvases import (CHARTS, FAMILIES, TOKEN, VOCAB, Batch, answers_from_pixels, bar_charts,
                                        MAX_COUNT, cell_glyphs, glyph_banks, make_batch, read_bars, read_grid)


@pytest.fixture(scope="module")
def banks():
    return glyph_banks()


def test_the_banks_are_real_digits_split_without_a_shared_image(banks):
    train, test = banks
    assert len(train.labels) > 5000 and len(test.labels) > 1000
    assert set(train.labels.tolist()) == set(range(10)) == set(test.labels.tolist())
    both = torch.cat((train.images, test.images)).flatten(1)
    assert len(torch.unique((both * 255).round().to(torch.uint8), dim=0)) == len(both)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_is_answered_correctly_by_construction(banks, family):
    g = torch.Generator().manual_seed(0)
    batch = make_batch(banks[1], [family] * 64, 4, 0.3, g, history=(3, 9), width=10)
    assert answers_from_pixels(batch, banks[1])
    wrong = Batch(batch.pixels, batch.grid, batch.question, (batch.answer + 1) % len(VOCAB), batch.family,
                  batch.cells)
    assert not answers_from_pixels(wrong, banks[1])


def test_the_decoder_reads_the_grid_from_the_pixels_alone(banks):
    g = torch.Generator().manual_seed(1)
    batch = make_batch(banks[1], ["cell"] * 32, 4, 0.3, g)
    assert torch.equal(read_grid(batch.pixels, banks[1]), batch.grid)
    with pytest.raises(ValueError, match="matches no glyph"):
        read_grid(batch.pixels, banks[0])  # test canvases use held-out glyphs


def test_bar_charts_have_distinct_heights_that_the_decoder_reads():
    pixels, heights = bar_charts(50, 4, torch.Generator().manual_seed(2))
    assert torch.equal(read_bars(pixels), heights)
    assert all(len(set(row.tolist())) == 4 for row in heights) and heights.min() >= 1 and heights.max() <= 8


def test_questions_are_padded_to_the_width_and_the_answer_cells_are_marked(banks):
    g = torch.Generator().manual_seed(3)
    batch = make_batch(banks[0], ["cell", "count", "bar_height"], 4, 0.3, g, width=10)
    assert batch.question.shape == (3, 10) and (batch.question[:, 0] == TOKEN["<pad>"]).all()
    assert batch.cells[0].sum() == 1 and batch.cells[2].sum() == 4  # one cell; one bar's column
    glyphs = cell_glyphs(batch)
    assert glyphs.shape == (3, 16) and (glyphs[2] == -100).all() and glyphs[0].max() <= 10


def test_a_question_ends_with_the_word_that_names_what_it_asks(banks):
    g = torch.Generator().manual_seed(4)
    batch = make_batch(banks[0], ["cell"] * 16 + ["bar_height"] * 16 + ["row_has"] * 16, 6, 0.3, g)
    last = [VOCAB[t] for t in batch.question[:, -1].tolist()]
    for words, cells, family in zip(last, batch.cells, batch.family):
        if family == "cell":  # the answer is read at the cell's own word: "digit at row r col c cellrc"
            r, c = (int(i) for i in cells.nonzero()[0])
            assert words == f"cell{r}{c}"
        else:
            assert words.startswith("col" if family == "bar_height" else "row")
    assert TOKEN["?"] not in batch.question


def test_count_answers_are_uniform_so_only_the_image_tells_them(banks):
    g = torch.Generator().manual_seed(5)
    batch = make_batch(banks[1], ["count"] * 2000, 6, 0.3, g)
    counts = torch.tensor([int(VOCAB[a]) for a in batch.answer.tolist()])
    shares = torch.bincount(counts, minlength=MAX_COUNT + 1)[1:] / len(counts)
    assert counts.min() >= 1 and counts.max() <= MAX_COUNT
    assert shares.max() - shares.min() < 0.05  # about a fifth each, where the unbalanced prior put most on 1
    assert answers_from_pixels(batch, banks[1])  # the redrawn cells are real glyphs the decoder reads


def test_bad_input_is_refused_by_name(banks):
    g = torch.Generator().manual_seed(4)
    with pytest.raises(ValueError, match="families"):
        make_batch(banks[0], ["cells"], 4, 0.3, g)
    with pytest.raises(ValueError, match="blank"):
        make_batch(banks[0], ["cell"], 4, 1.0, g)
    with pytest.raises(ValueError, match="test_fraction"):
        glyph_banks(test_fraction=0)
    assert set(CHARTS) <= set(FAMILIES)
