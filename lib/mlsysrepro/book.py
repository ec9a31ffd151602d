"""The collection as a static HTML book, ``build/book/``: ``./run_all.sh book`` (``python -m mlsysrepro.book``).

The pages are the README (``index.html``), REPRODUCTION.md, the readers' start page, the two documents under
``docs/`` and every notebook, executed:
each notebook's ``default`` run from ``build/executed/default/`` (left there by ``./run_all.sh``), with every output
(tables, figures, progress), or, for a notebook not run here at ``default``, the committed notebook, whose findings,
tables and figures are filled in from the committed run (the page says which). Markdown goes through mistune and
notebooks through nbconvert's ``basic`` template, inside one page frame of our own with its stylesheet inline:
nothing is fetched from the network at build time or when a page is read (no MathJax or require.js from a CDN,
so formulas show as their TeX source). ``figures/`` is copied beside the pages, so every image the markdown embeds
resolves, and links between the repository's markdown files and notebooks point at their pages.

Each page ends with a small script that writes to the browser console, as an error, any image that did not load;
``tests/test_book.py`` opens every page in headless Chromium where it is installed and fails on any console error.
To publish: push ``build/book/`` to a ``gh-pages`` branch (or upload it as a GitHub Pages artifact); every link
in it is relative.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
from pathlib import Path

import nbformat

from .catalog import PAPERS, TEMPLATE
from .core import paths

BOOK = "book"
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5;
       color: #222; }
nav { border-bottom: 1px solid #ddd; padding-bottom: .5rem; margin-bottom: 1rem; }
nav a { margin-right: 1rem; }
img { max-width: 100%; }
table { border-collapse: collapse; margin: 1rem 0; font-size: .9rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; text-align: left; }
pre, code { background: #f6f8fa; font-size: .85rem; }
pre { padding: .5rem; overflow-x: auto; }
.jp-InputArea, .input_area { border-left: 3px solid #0173b2; margin: .5rem 0; }
.note { background: #fff8e1; padding: .5rem; }
"""
#: Reports, on the console, every image of the page that did not load (the browser test reads the console).
IMAGE_CHECK = """<script>
window.addEventListener("load", () => {
  for (const img of document.images) {
    if (!(img.complete && img.naturalWidth > 0)) console.error("image did not load: " + img.getAttribute("src"));
  }
  document.body.dataset.imagesChecked = String(document.images.length);
});
</script>"""


def book_dir() -> Path:
    return paths.build_dir() / BOOK


def page(title: str, body: str, depth: int) -> str:
    """One HTML page: ``body`` in the book's frame, with links ``depth`` folders below the book's root."""
    up = "../" * depth
    nav = (f'<nav><a href="{up}index.html">README</a><a href="{up}notebooks/index.html">Reading the notebooks</a>'
           f'<a href="{up}REPRODUCTION.html">REPRODUCTION</a></nav>')
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head>\n<body>\n{nav}\n{body}\n{IMAGE_CHECK}\n</body></html>\n")


def _relink(text: str) -> str:
    """Links between the repository's files, as links between the book's pages: ``*.md`` to ``*.html`` (README to
    index), ``*.ipynb`` to its page."""
    def target(match: re.Match) -> str:
        url = match.group(2)
        if re.match(r"[a-z]+:", url) or url.startswith("#"):
            return match.group(0)
        path, _, anchor = url.partition("#")
        if path.endswith("README.md"):
            path = path[: -len("README.md")] + "index.html"
        elif path.endswith(".md") or path.endswith(".ipynb"):
            path = path.rsplit(".", 1)[0] + ".html"
        return f'{match.group(1)}="{path}{"#" + anchor if anchor else ""}"'

    return re.sub(r'(href|src)="([^"]*)"', target, text)


def markdown_html(markdown: str) -> str:
    """GitHub-flavoured markdown (tables, raw HTML kept) as HTML."""
    import mistune

    render = mistune.create_markdown(escape=False, plugins=["table", "strikethrough", "url"])
    return _relink(render(markdown))


def notebook_html(notebook: nbformat.NotebookNode) -> str:
    """A notebook's cells and outputs as an HTML fragment (nbconvert's ``basic`` template: no scripts from a CDN)."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="basic")
    body, _ = exporter.from_notebook_node(notebook)
    return _relink(body)


def build(out: Path | None = None) -> list[Path]:
    """Write the book under ``out`` (``build/book/``), replacing what was there; returns the pages written."""
    out = out or book_dir()
    staging = out.with_name(out.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "notebooks").mkdir(parents=True)
    (staging / "docs").mkdir()
    shutil.copytree(paths.REPO_ROOT / "figures", staging / "figures")
    pages = []
    for source, target, title, depth in (
            (paths.REPO_ROOT / "README.md", "index.html", "mlsysrepro", 0),
            (paths.REPO_ROOT / "REPRODUCTION.md", "REPRODUCTION.html", "What the collection reproduces", 0),
            (paths.REPO_ROOT / "notebooks" / "README.md", "notebooks/index.html", "Reading the notebooks", 1),
            (paths.REPO_ROOT / "docs" / "NOTEBOOK_GUIDE.md", "docs/NOTEBOOK_GUIDE.html", "Writing a notebook", 1),
            (paths.REPO_ROOT / "docs" / "ARCHITECTURE.md", "docs/ARCHITECTURE.html", "Architecture", 1)):
        (staging / target).write_text(page(title, markdown_html(source.read_text()), depth))
        pages.append(target)
    executed = paths.build_dir() / "executed" / paths.COMMITTED_SCALE
    for paper in (TEMPLATE, *PAPERS):
        run = executed / paper.notebook.name
        chosen = run if run.exists() else paper.notebook
        note = ("" if run.exists() else
                '<p class="note">Not executed here at <code>default</code>: the committed notebook, its findings, '
                "tables and figures from the committed run, without the cells' outputs.</p>")
        nb = nbformat.read(chosen, as_version=4)
        target = f"notebooks/{paper.name}.html"
        (staging / target).write_text(page(paper.title, note + notebook_html(nb), 1))
        pages.append(target)
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return [out / p for p in pages]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the book (default: build/book/)")
    args = parser.parse_args(argv)
    pages = build(args.out)
    print(f"wrote {len(pages)} pages under {pages[0].parent}; open {pages[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
