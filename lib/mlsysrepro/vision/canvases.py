"""Canvases of real handwritten digits with questions whose answers are known: the data of the tiny VLM.

A canvas is a G×G grid of 8×8 cells, each blank or holding one real digit glyph: scikit-learn's bundled digits
(UCI, 1,797 glyphs of 8×8) and MNIST's test set from the registry (``mnist_test10k``, cropped to 24×24 and
average-pooled to 8×8). The glyphs are split once into a train and a held-out test bank, so test canvases are
drawn with glyphs the model never saw.

Questions come in families that differ in where the answer lies (the split the AsymVLM paper reports):

- *localised, query-specific* (the document / chart-QA analogue): ``cell`` "digit at row<r> col<c> ?" (a row or column is one word, ``row2``),
  ``row_has`` "is there a d in row r ?", and on a rendered bar chart (G bars of distinct heights 1..2G, 4 pixels
  a unit) ``bar_height`` "height of bar c ?";
- *holistic*: ``count`` "how many d ?" (the canvas is redrawn so that the count is uniform over 1 to
  :data:`MAX_COUNT`: the answer cannot be guessed from how often digits repeat), ``largest`` "largest digit ?",
  and on a bar chart ``tallest`` "which bar is tallest ?";
- *text-dominated*: ``recall`` "remember row r col c ." then a history of filler turns, then
  "what digit was at the remembered cell ?".

Every question is one word-level token sequence and its answer one token of :data:`VOCAB`. :func:`read_grid` is
an independent decoder: it recovers each cell's digit from the canvas pixels alone (blank, or the label of the
bank glyph the pixels equal), so every answer can be checked against the image rather than the generator's record
(:func:`answers_from_pixels`); a bar's height is read by counting its lit pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..core.mnist import mnist_test10k

CELL = 8  # pixels per cell side
MAX_GRID = 8  # cells a side, at most (a place word per row and per column: "row0".."row7", "col0".."col7")
MAX_ANSWER = 2 * MAX_GRID  # number tokens 0..MAX_ANSWER (the tallest bar of an 8-bar chart is 16 units)
MAX_COUNT = 5  # a count question's answer is drawn uniformly from 1..MAX_COUNT
WORDS = ("<pad>", "<bos>", "digit", "at", "row", "col", "is", "there", "a", "in", "of", "how", "many",
         "largest", "yes", "no", "blank", "remember", "what", "was", "the", "remembered", "cell", "?", ".",
         "ok", "user", "says", "thanks", "and", "then", "next", "please", "wait", "sure", "height", "bar", "which",
         "tallest") + tuple(f"row{i}" for i in range(MAX_GRID)) + tuple(f"col{i}" for i in range(MAX_GRID)) \
    + tuple(f"cell{r}{c}" for r in range(MAX_GRID) for c in range(MAX_GRID))
VOCAB = WORDS + tuple(str(i) for i in range(MAX_ANSWER + 1))
TOKEN = {word: i for i, word in enumerate(VOCAB)}
FILLER = ("ok", "user", "says", "thanks", "and", "then", "next", "please", "wait", "sure", "the", "a")
FAMILIES = {"cell": "localised", "row_has": "localised", "bar_height": "localised",
            "count": "holistic", "largest": "holistic", "tallest": "holistic", "recall": "text"}
CHARTS = ("bar_height", "tallest")  # families asked of a bar chart instead of a digit canvas


@dataclass(frozen=True)
class GlyphBank:
    """Digit glyphs (N, 8, 8) in [0, 1] and their labels (N,)."""

    images: torch.Tensor
    labels: torch.Tensor


def glyph_banks(test_fraction: float = 0.2, seed: int = 0) -> tuple[GlyphBank, GlyphBank]:
    """The train and held-out test glyph banks: scikit-learn's digits and MNIST's test set, shuffled once by
    ``seed`` and split so that ``test_fraction`` of the glyphs appear only in test canvases."""
    from sklearn.datasets import load_digits

    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    digits = load_digits()
    small = torch.tensor(digits.images, dtype=torch.float32) / 16.0
    images, labels = mnist_test10k()
    mnist = torch.tensor(images[:, 2:26, 2:26], dtype=torch.float32)[:, None] / 255.0
    mnist = F.avg_pool2d(mnist, 3)[:, 0]
    glyphs = torch.cat((small, mnist)).clamp(0, 1)
    glyphs = (glyphs * 255).round() / 255  # 8-bit pixels, so equal glyphs compare equal after any reshaping
    all_labels = torch.cat((torch.tensor(digits.target), torch.tensor(labels.astype(np.int64))))
    keep = glyphs.flatten(1).amax(1) > 0  # a glyph must differ from a blank cell
    glyphs, all_labels = glyphs[keep], all_labels[keep]
    # one copy of each distinct image, so a cell's pixels name one glyph (and train and test share no image)
    _, identity = torch.unique((glyphs.flatten(1) * 255).round().to(torch.uint8), dim=0, return_inverse=True)
    first = torch.full((int(identity.max()) + 1,), len(identity)).scatter_reduce(
        0, identity, torch.arange(len(identity)), "amin")
    glyphs, all_labels = glyphs[first.sort().values], all_labels[first.sort().values]
    order = torch.randperm(len(glyphs), generator=torch.Generator().manual_seed(seed))
    n_test = int(len(glyphs) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return GlyphBank(glyphs[train], all_labels[train]), GlyphBank(glyphs[test], all_labels[test])


@dataclass(frozen=True)
class Batch:
    """A batch of canvases and questions.

    ``pixels`` (B, G*8, G*8); ``grid`` (B, G, G) the digit in each cell, -1 blank (the generator's record);
    ``question`` (B, L) token ids, left-padded with ``<pad>``; ``answer`` (B,) one token id each; ``family`` the
    family of every row; ``cells`` (B, G, G) True where the answer lies (the oracle's cells)."""

    pixels: torch.Tensor
    grid: torch.Tensor
    question: torch.Tensor
    answer: torch.Tensor
    family: tuple[str, ...]
    cells: torch.Tensor


def canvases(bank: GlyphBank, n: int, grid: int, blank: float, generator: torch.Generator
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` canvases (n, grid*8, grid*8) and their digit grids (n, grid, grid), each cell blank with probability
    ``blank`` (every canvas holds at least one digit)."""
    if not 2 <= grid <= MAX_GRID:
        raise ValueError(f"grid must be 2 to {MAX_GRID} cells a side, got {grid}")
    if not 0 <= blank < 1:
        raise ValueError(f"blank must be in [0, 1), got {blank}")
    pick = torch.randint(len(bank.labels), (n, grid, grid), generator=generator)
    empty = torch.rand(n, grid, grid, generator=generator) < blank
    empty[:, 0, 0] &= empty.flatten(1).sum(1) < grid * grid  # never an empty canvas
    labels = bank.labels[pick].masked_fill(empty, -1)
    cells = bank.images[pick] * (~empty)[..., None, None]  # (n, G, G, 8, 8)
    pixels = cells.permute(0, 1, 3, 2, 4).reshape(n, grid * CELL, grid * CELL)
    return pixels, labels


BAR_UNIT = 4  # pixels per unit of bar height


def bar_charts(n: int, grid: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` bar charts (n, grid*8, grid*8): ``grid`` bars, one per column of cells, 6 pixels wide, of distinct
    heights drawn from 1..2*grid units of :data:`BAR_UNIT` pixels (so the tallest is unique); and the heights
    (n, grid)."""
    side = grid * CELL
    heights = torch.rand(n, 2 * grid, generator=generator).argsort(-1)[:, :grid] + 1
    rows = torch.arange(side)
    lit = (side - 1 - rows)[None, None, :] < heights[..., None] * BAR_UNIT  # (n, grid, side): bar c covers row y
    column = torch.zeros(CELL, dtype=torch.bool)
    column[1:CELL - 1] = True  # a one-pixel gap on each side of a bar
    pixels = (lit[..., None] & column).permute(0, 2, 1, 3).reshape(n, side, side)
    return pixels.float(), heights


def read_bars(pixels: torch.Tensor) -> torch.Tensor:
    """The independent decoder of a bar chart: each bar's height (n, grid) from its lit pixels."""
    n, side, _ = pixels.shape
    lit = pixels.view(n, side, side // CELL, CELL).sum((1, 3))
    return (lit / (BAR_UNIT * (CELL - 2))).round().long()


def read_grid(pixels: torch.Tensor, bank: GlyphBank) -> torch.Tensor:
    """The independent decoder: each cell's digit read from the pixels (-1 for a blank cell), by exact match of its
    8-bit pixels against the glyphs of ``bank`` (a glyph the bank lacks is an error)."""
    n, side, _ = pixels.shape
    grid = side // CELL
    cells = pixels.view(n, grid, CELL, grid, CELL).permute(0, 1, 3, 2, 4).reshape(n * grid * grid, CELL * CELL)
    blank = cells.amax(1) == 0
    as_bytes = lambda x: (x * 255).round().to(torch.uint8)  # noqa: E731
    rows = torch.cat((as_bytes(bank.images.flatten(1)), as_bytes(cells)))
    _, identity = torch.unique(rows, dim=0, return_inverse=True)  # equal rows, equal identity
    label_of = torch.full((len(rows),), -2, dtype=torch.long)
    label_of[identity[:len(bank.labels)]] = bank.labels
    labels = label_of[identity[len(bank.labels):]]
    if (labels[~blank] == -2).any():
        raise ValueError("read_grid: a cell matches no glyph of the bank (pass the bank the canvases were drawn from)")
    return labels.masked_fill(blank, -1).view(n, grid, grid)


def _question(family: str, grid: torch.Tensor, generator: torch.Generator, history: int, counted: int | None = None):
    """One question's words, its answer word and the cells holding the answer, for one digit grid (G, G);
    ``counted``: the digit a count question asks about (None: a digit the canvas holds, drawn)."""
    g = grid.shape[0]
    r, c = (int(v) for v in torch.randint(g, (2,), generator=generator))
    d = int(torch.randint(10, (1,), generator=generator))
    where = torch.zeros(g, g, dtype=torch.bool)
    if family == "cell":
        where[r, c] = True
        value = int(grid[r, c])
        return ["digit", "at", f"row{r}", f"col{c}", f"cell{r}{c}"], str(value) if value >= 0 else "blank", where
    if family == "row_has":
        present = grid[r][grid[r] >= 0]
        if len(present) and bool(torch.rand(1, generator=generator) < 0.5):  # half the questions ask for a digit there
            d = int(present[torch.randint(len(present), (1,), generator=generator)])
        where[r] = grid[r] >= 0
        return ["is", "there", "a", str(d), "in", f"row{r}"], "yes" if (grid[r] == d).any() else "no", where
    if family == "count":  # the digit :func:`balance_counts` set the count of, else one the canvas holds
        present = grid[grid >= 0]
        d = int(present[torch.randint(len(present), (1,), generator=generator)]) if counted is None else counted
        where = grid == d
        return ["how", "many", str(d)], str(int(where.sum())), where
    if family == "largest":
        top = int(grid.max())
        return ["largest", "digit"], str(top), grid == top
    if family == "bar_height":
        where[:, c] = True
        return ["height", "of", "bar", f"col{c}"], str(int(grid[0, c])), where
    if family == "tallest":
        top = int(grid[0].argmax())
        where[:, top] = True
        return ["which", "bar", "is", "tallest"], str(top), where
    if family == "recall":
        where[r, c] = True
        value = int(grid[r, c])
        filler = [FILLER[i] for i in torch.randint(len(FILLER), (history,), generator=generator).tolist()]
        words = (["remember", f"row{r}", f"col{c}", f"cell{r}{c}", "."] + filler
                 + ["what", "digit", "was", "at", "the", "remembered", "cell"])
        return words, str(value) if value >= 0 else "blank", where
    raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")


def balance_counts(bank: GlyphBank, pixels: torch.Tensor, grids: torch.Tensor, rows: torch.Tensor,
                   generator: torch.Generator) -> torch.Tensor:
    """For the canvases of ``rows`` (a count question each), in place: a digit d and a count k uniform over
    1..min(:data:`MAX_COUNT`, the canvas's digits) drawn, k of its digit cells redrawn as glyphs of d and every other
    cell that held d redrawn as another digit, so the answer's prior is flat and only the image tells it. Returns
    the digit per canvas (-1 for the others)."""
    digits = torch.full((len(grids),), -1)
    g = grids.shape[1]
    for i in rows.nonzero().flatten().tolist():
        filled = (grids[i].flatten() >= 0).nonzero().flatten()
        d = int(torch.randint(10, (1,), generator=generator))
        k = int(torch.randint(1, min(MAX_COUNT, len(filled)) + 1, (1,), generator=generator))
        chosen = filled[torch.randperm(len(filled), generator=generator)[:k]]
        labels = grids[i].flatten().clone()
        others = (labels == d).nonzero().flatten()
        labels[others] = (d + torch.randint(1, 10, (len(others),), generator=generator)) % 10
        labels[chosen] = d
        changed = (labels != grids[i].flatten()).nonzero().flatten()
        for cell in changed.tolist():
            same = (bank.labels == labels[cell]).nonzero().flatten()
            glyph = bank.images[same[torch.randint(len(same), (1,), generator=generator)]][0]
            r, c = divmod(cell, g)
            pixels[i, r * CELL:(r + 1) * CELL, c * CELL:(c + 1) * CELL] = glyph
        grids[i] = labels.view(g, g)
        digits[i] = d
    return digits


def make_batch(bank: GlyphBank, families: list[str], grid: int, blank: float, generator: torch.Generator,
               history: tuple[int, int] = (0, 0), width: int = 0) -> Batch:
    """One canvas and one question per entry of ``families``; a ``recall`` question carries a history of filler
    words drawn uniformly from ``history`` (inclusive). Questions are left-padded to the longest of them and at
    least ``width`` tokens, so the answer is always predicted at the last position (and, with a ``width`` every
    question fits, at the same position in every batch)."""
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"families must be among {sorted(FAMILIES)}, got {unknown}")
    pixels, grids = canvases(bank, len(families), grid, blank, generator)
    counted = balance_counts(bank, pixels, grids, torch.tensor([f == "count" for f in families]), generator)
    chart = torch.tensor([f in CHARTS for f in families])
    if chart.any():  # a chart's heights sit in row 0 of its grid, the other rows -1
        chart_pixels, heights = bar_charts(int(chart.sum()), grid, generator)
        pixels[chart] = chart_pixels
        grids[chart] = -1
        grids[chart, 0] = heights
    words, answers, cells = [], [], []
    for family, digits, digit in zip(families, grids, counted.tolist()):
        length = int(torch.randint(history[0], history[1] + 1, (1,), generator=generator))
        w, a, where = _question(family, digits, generator, length, digit if family == "count" else None)
        words.append(["<bos>"] + w)
        answers.append(TOKEN[a])
        cells.append(where)
    width = max(width, max(len(w) for w in words))
    question = torch.tensor([[TOKEN["<pad>"]] * (width - len(w)) + [TOKEN[x] for x in w] for w in words])
    return Batch(pixels, grids, question, torch.tensor(answers), tuple(families), torch.stack(cells))


def training_sequences(bank: GlyphBank, families: list[str], grid: int, blank: float, generator: torch.Generator,
                       history: tuple[int, int] = (0, 0), width: int = 0, questions: int = 1
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Training sequences: each canvas of :func:`make_batch` with ``questions`` questions of its family (a recall
    question: one), each but the last followed by its answer, so one image teaches several answers. Returns the
    pixels, the tokens (B, L), the targets (B, L): -100 except at each question's last token, where its answer is
    the target, and each cell's glyph class (:func:`cell_glyphs`). The first question sits
    where :func:`make_batch` puts it (left-padded to ``width``); the rest follow it, right-padded."""
    if questions < 1:
        raise ValueError(f"questions must be >= 1, got {questions}")
    first = make_batch(bank, families, grid, blank, generator, history, width)
    rows, targets = [], []
    for tokens, answer, family, digits in zip(first.question.tolist(), first.answer.tolist(), first.family,
                                              first.grid):
        row, target = list(tokens), [-100] * (len(tokens) - 1) + [answer]
        for _ in range(questions - 1 if family != "recall" else 0):
            words, word, _ = _question(family, digits, generator, 0)
            row += [answer] + [TOKEN[w] for w in words]
            target += [-100] + [-100] * (len(words) - 1) + [TOKEN[word]]
            answer = TOKEN[word]
        rows.append(row)
        targets.append(target)
    length = max(len(r) for r in rows)
    tokens = torch.tensor([r + [TOKEN["<pad>"]] * (length - len(r)) for r in rows])
    target = torch.tensor([t + [-100] * (length - len(t)) for t in targets])
    return first.pixels, tokens, target, cell_glyphs(first)


def place(words: list[str], kind: str) -> int:
    """The row or column a question names (``kind`` "row" or "col"): the number of its first ``row<i>`` word."""
    return int(next(w for w in words if w.startswith(kind) and w[len(kind):].isdigit())[len(kind):])


def place_tokens(grid: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The token ids of the words ``row0``.., ``col0``.. and ``cell00``.. (raster order) for a ``grid``: what a
    model ties the image's 2-D positions to."""
    return (tuple(TOKEN[f"row{i}"] for i in range(grid)), tuple(TOKEN[f"col{i}"] for i in range(grid)),
            tuple(TOKEN[f"cell{r}{c}"] for r in range(grid) for c in range(grid)))


def answers_from_pixels(batch: Batch, bank: GlyphBank) -> bool:
    """Whether every answer of ``batch`` equals the one its question asks of the grid :func:`read_grid` recovers
    from the pixels (question templates re-read from the tokens)."""
    chart = torch.tensor([f in CHARTS for f in batch.family])
    grids = torch.full_like(batch.grid, -1)
    if (~chart).any():
        grids[~chart] = read_grid(batch.pixels[~chart], bank)
    if chart.any():
        grids[chart, 0] = read_bars(batch.pixels[chart])
    for row, grid, answer, family in zip(batch.question.tolist(), grids, batch.answer.tolist(), batch.family):
        words = [VOCAB[i] for i in row if VOCAB[i] not in ("<pad>", "<bos>")]
        if family == "bar_height":
            expected = str(int(grid[0, place(words, "col")]))
        elif family == "tallest":
            expected = str(int(grid[0].argmax()))
        elif family in ("cell", "recall"):
            r, c = place(words, "row"), place(words, "col")
            expected = str(int(grid[r, c])) if grid[r, c] >= 0 else "blank"
        elif family == "row_has":
            d, r = int(words[3]), place(words, "row")
            expected = "yes" if (grid[r] == d).any() else "no"
        elif family == "count":
            expected = str(int((grid == int(words[2])).sum()))
        else:
            expected = str(int(grid.max()))
        if VOCAB[answer] != expected:
            return False
    return True


def cell_glyphs(batch: Batch) -> torch.Tensor:
    """(B, G*G) the class of every cell of ``batch`` in raster order: its digit (0-9), 10 for a blank cell, -100
    (ignored) on bar charts."""
    classes = batch.grid.masked_fill(batch.grid < 0, 10)
    classes[torch.tensor([f in CHARTS for f in batch.family])] = -100
    return classes.flatten(1)
