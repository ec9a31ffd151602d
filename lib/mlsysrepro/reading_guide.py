"""The readers' start page, ``notebooks/README.md``: where to start, what each notebook needs, a glossary and a
reading-group plan.

The page is generated (``python -m mlsysrepro.reproduction`` writes it, ``--check`` fails when it is stale), so what
it says about a notebook is read from the notebook and the collection's records, never typed: the cold and warm
runtimes of the last ``default`` runs (``figures/runtimes.json``), whether the notebook reads the GPU check's results
(it calls :mod:`mlsysrepro.core.gpu_results`), the notebooks each glossary term appears in, and each meeting's
questions (the "Questions for a reading group" paragraph of the notebook's "Try this" cell). The prose kept here is
the part no run can compute: which notebook to read first for a topic, and what the terms mean.
"""

from __future__ import annotations

import re

import nbformat

from .catalog import PAPERS, TEMPLATE, Paper, by_name
from .core import paths, runtimes

PAGE = paths.REPO_ROOT / "notebooks" / "README.md"
AUTHORS_GUIDE = "docs/NOTEBOOK_GUIDE.md"
QUESTIONS = "Questions for a reading group:"

#: Where to start for each topic: (topic, notebooks in reading order, why that order).
START_HERE: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("How the notebooks work", ("_template",),
     "the template reproduces a textbook fact (gradient noise falls as 1/B) with every convention the papers use: "
     "declared claims, a figure, a finding, the claims table."),
    ("Graph learning", ("mvs_gnn", "llcg"),
     "MVS-GNN is about the variance of one sampled mini-batch on one machine; LLCG then splits the graph across "
     "machines and corrects the drift on a server."),
    ("Transformer inference", ("baklava", "asymvlm"),
     "BaKlaVa shrinks the KV cache of a language model per head; AsymVLM prunes the image tokens a vision-language "
     "model prefills."),
    ("Recommendation", ("dlrm_gpu", "pifs_rec"),
     "the DLRM notebook measures the embedding stage on one device; PIFS-Rec moves it into a CXL switch and models "
     "the fabric."),
    ("Training efficiency", ("grad_sparsity", "structured_dropout"),
     "both skip work in backpropagation: zeros in the output gradients of a CNN, dropped neurons of an LSTM."),
    ("Cloud and clusters", ("ddl_stalls", "dally", "cocktail"),
     "from one training job's stalls, to placing many jobs on a cluster's network, to serving an ensemble on "
     "rented machines."),
)

#: Terms the notebooks use without expanding them.
GLOSSARY: dict[str, str] = {
    "2D-LAS": "two-dimensional least attained service: a job's priority falls with the GPU time it has received "
              "(GPUs x seconds), so short and small jobs go first (Tiresias' scheduler).",
    "BPTT": "backpropagation through time: an RNN's gradient, computed by unrolling it over the sequence's steps.",
    "CXL": "Compute Express Link: a cache-coherent link over PCIe that attaches memory (and switches of memory) "
           "to a host.",
    "GQA": "grouped-query attention: several query heads share one key/value head, so the KV cache is smaller.",
    "JCT": "job completion time: from a job's arrival to its end, waiting included.",
    "KV cache": "the keys and values a transformer keeps for every past token, so decoding a new token attends to "
                "them without recomputing them.",
    "MACs": "multiply-accumulate operations, the unit of a layer's arithmetic (one MAC is two FLOPs).",
    "makespan": "the time from the first job's arrival to the last job's end.",
    "perplexity": "the exponential of a language model's mean negative log-likelihood per token; lower is better.",
    "RoPE": "rotary position embedding: positions enter attention by rotating each query and key by an angle that "
            "grows with the position.",
    "SLO": "service-level objective: the latency (or accuracy) a request must meet.",
    "SwiGLU": "the gated feed-forward block of Llama models: SiLU(x W1) * (x W3), projected by W2.",
}


def questions(paper: Paper) -> str:
    """The notebook's questions for a reading group: the paragraph of its "Try this" cell that starts with
    :data:`QUESTIONS` (ValueError when it has none)."""
    nb = nbformat.read(paper.notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## Try this") and QUESTIONS in cell.source:
            paragraph = " ".join(cell.source.split(QUESTIONS, 1)[1].split("\n\n", 1)[0].split())
            return paragraph[:1].upper() + paragraph[1:]
    raise ValueError(f"{paper.notebook.name}: no '{QUESTIONS}' paragraph in its '## Try this' cell")


def reads_gpu_results(paper: Paper) -> bool:
    """Whether the notebook shows the GPU check's results (it or its paper module reads
    :mod:`mlsysrepro.core.gpu_results`)."""
    module = paths.REPO_ROOT / "lib" / "mlsysrepro" / "papers" / f"{paper.name.lstrip('_')}.py"
    sources = [paper.notebook.read_text()] + ([module.read_text()] if module.exists() else [])
    return any("gpu_results" in source for source in sources)


#: Other spellings the notebooks use for a glossary term.
SPELLINGS: dict[str, tuple[str, ...]] = {"GQA": ("grouped-query attention",), "KV cache": ("KV-cache",),
                                         "BPTT": ("backpropagation through time",)}


def used_in(term: str) -> list[str]:
    """The notebooks whose text (markdown and code) uses ``term`` (or one of its :data:`SPELLINGS`) as a word; a
    lower-case term in any case."""
    spellings = "|".join(re.escape(s) for s in (term, *SPELLINGS.get(term, ())))
    pattern = re.compile(rf"(?<![\w-])(?:{spellings})(?![\w-])", re.IGNORECASE if term.islower() else 0)
    return [paper.name for paper in (TEMPLATE, *PAPERS) if pattern.search(paper.notebook.read_text())]


def _minutes(entry: dict | None) -> str:
    return "not measured" if entry is None else f"{entry['seconds'] / 60:.1f} min"


def _link(name: str) -> str:
    return f"[`{name}`]({name}.ipynb)"


def page() -> str:
    """The whole of ``notebooks/README.md``."""
    recorded = runtimes.load()
    lines = [
        "# Reading the notebooks",
        "",
        "<!-- Generated by `python -m mlsysrepro.reproduction` (mlsysrepro/reading_guide.py); edit that, not this. -->",
        "",
        "Each notebook reproduces one paper as a lesson: the idea, the paper's algorithm as the library code that runs, "
        "the experiments with their figures, what we found (numbers computed by the run), and which of the paper's "
        "claims hold at this scale. On GitHub every figure, finding and table of the committed `default` run is on "
        "the page; in JupyterLab, run the notebook to recompute them (`scale = \"smoke\"` takes under a minute). "
        "What the whole collection found is in [REPRODUCTION.md](../REPRODUCTION.md). Writing a notebook: "
        f"[the authors' guide](../{AUTHORS_GUIDE}).",
        "",
        "## Where to start",
        "",
        "| topic | read in this order | why |",
        "|---|---|---|",
    ]
    for topic, names, why in START_HERE:
        lines.append(f"| {topic} | {', then '.join(_link(n) for n in names)} | {why} |")
    lines += [
        "",
        "## What each notebook needs",
        "",
        "Runtimes of the last `default` runs on this project's 2-core CPU machine (cold: every model trained and "
        "every experiment computed; warm: the cache of trained models read back), from `figures/runtimes.json`. "
        "No notebook needs a GPU; the ones marked read the GPU check's committed results "
        "(`benchmarks/gpu_check.sh`, see the README) and say \"not measured on a GPU\" without them.",
        "",
        "| notebook | paper | cold | warm | GPU results |",
        "|---|---|---|---|---|",
    ]
    for paper in (TEMPLATE, *PAPERS):
        entries = recorded.get(paper.name, {})
        lines.append(f"| {_link(paper.name)} | {paper.title} | {_minutes(entries.get('cold'))} | "
                     f"{_minutes(entries.get('warm'))} | {'shown' if reads_gpu_results(paper) else '-'} |")
    lines += ["", "## Glossary", "", "| term | meaning | used in |", "|---|---|---|"]
    for term in sorted(GLOSSARY, key=str.lower):
        where = ", ".join(_link(n) for n in used_in(term)) or "-"
        lines.append(f"| {term} | {GLOSSARY[term]} | {where} |")
    lines += [
        "",
        "## A reading-group plan",
        "",
        "One meeting per notebook, in the order of *Where to start*. Before each meeting, read the notebook on "
        "GitHub (or run it at `smoke`) and its paper's abstract; in the meeting, take the questions below (from the "
        "notebook's *Try this*) and one of its knobs.",
        "",
    ]
    order = [name for _, names, _ in START_HERE for name in names]
    for meeting, name in enumerate(order, 1):
        paper = by_name(name)
        lines += [f"{meeting}. **{_link(name)}** ({paper.title}). {questions(paper)}", ""]
    return "\n".join(lines).rstrip() + "\n"


def missing_from_plan() -> list[str]:
    """Notebooks of the collection that the plan leaves out (it must hold every one)."""
    planned = {name for _, names, _ in START_HERE for name in names}
    return [paper.name for paper in (TEMPLATE, *PAPERS) if paper.name not in planned]
