"""The HTML book: every page built, every image it embeds on disk, nothing fetched from the network; and, where
Chromium is installed, every page loads in it without a console error (a missing image is one), with a
screenshot of each saved under build/book-screenshots/ in the checkout."""

import re
import shutil
import subprocess

import pytest

from mlsysrepro import book
from mlsysrepro.catalog import PAPERS, TEMPLATE
from mlsysrepro.core import paths


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    return book.build(tmp_path_factory.mktemp("book") / "book")


def test_the_book_has_a_page_per_notebook_and_document_and_every_image_is_there(pages):
    root = pages[0].parent
    names = {str(p.relative_to(root)) for p in pages}
    assert {"index.html", "REPRODUCTION.html", "notebooks/index.html"} <= names
    assert {f"notebooks/{paper.name}.html" for paper in (TEMPLATE, *PAPERS)} <= names
    for page in pages:
        text = page.read_text()
        assert not re.search(r'<(script|link)[^>]+(src|href)="https?:', text), f"{page.name} fetches from the network"
        for src in re.findall(r'<img[^>]+src="([^"]+)"', text):
            if not src.startswith("data:"):
                assert (page.parent / src).resolve().exists(), f"{page.relative_to(root)}: image {src} is missing"
    assert 'href="notebooks/index.html"' in (root / "index.html").read_text()  # README's .md links became pages


def test_a_repository_link_becomes_a_link_between_pages():
    assert book._relink('<a href="notebooks/README.md">x</a> <a href="../REPRODUCTION.md#llcg">y</a>') == \
        '<a href="notebooks/index.html">x</a> <a href="../REPRODUCTION.html#llcg">y</a>'
    assert book._relink('<a href="dally.ipynb">d</a> <a href="https://arxiv.org/x.md">a</a>') == \
        '<a href="dally.html">d</a> <a href="https://arxiv.org/x.md">a</a>'


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(*arguments, timeout=60):
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", "--virtual-time-budget=5000", *arguments], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt install chromium)")
def test_every_page_loads_in_headless_chromium_without_console_errors(pages):
    root = pages[0].parent
    shots = paths.REPO_ROOT / "build" / "book-screenshots"  # in the checkout, kept after the run
    shots.mkdir(parents=True, exist_ok=True)
    broken = root / "broken.html"  # the check itself must catch a missing image
    broken.write_text(book.page("broken", '<img src="missing.png">', 0))
    run = chromium("--dump-dom", broken.as_uri())
    assert "image did not load: missing.png" in run.stderr
    assert "data-images-checked=" in chromium("--dump-dom", pages[0].as_uri()).stdout  # the pages' check runs
    for page in pages:  # one load per page: its screenshot, and the console it wrote
        name = str(page.relative_to(root)).replace("/", "_").replace(".html", ".png")
        run = chromium(f"--screenshot={shots / name}", "--window-size=1280,1600", page.as_uri())
        console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
        assert not console, f"{page.relative_to(root)}: {console}"
        assert (shots / name).stat().st_size > 0
