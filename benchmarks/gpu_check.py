"""The collection's GPU check: every CUDA path at smoke scale, then the GPU benchmarks, in one run of a few minutes.

    benchmarks/gpu_check.sh [--out benchmarks/gpu/gpu_check.json] [--budget 480]

Without CUDA it says so and exits 0, writing nothing (CI runs it so, to keep it runnable). With CUDA it runs every
check of :data:`CHECKS` in order, each timed:

- ``structured_dropout_notebook``: the structured-dropout notebook at ``smoke`` with ``device=cuda`` (papermill;
  its outputs go under ``build/``);
- ``structured_dropout_speed``: that notebook's speed table at the paper's sizes on CUDA (PTB medium at batches 20
  and 64, the tagger, four dropout rates, case III under every kernel): the rows the notebook judges C1-C4 on;
- ``ddl_profiler``: the DDL stall profiler on CUDA (one NCCL process, RUN0 and RUN1 of ResNet-18 with its
  CUDA-synchronised clocks): seconds per iteration and per stage;
- ``baklava_hf``: BaKlaVa's HuggingFace adapter on CUDA (a tiny random Llama decoded through our full and budgeted
  caches against HuggingFace's own cache), where ``transformers`` is installed; otherwise recorded as skipped.
- ``dlrm_gpu``: the DLRM embedding stage on CUDA (torch's EmbeddingBag and our CUDA kernels under the register
  cap, prefetching, L2 pinning and all three, built with nvcc; DLRM end to end), which the DLRM notebook's GPU
  claims read.

Any error stops the check loudly: the traceback, exit status 1, and what had passed written to
``<out>.partial.json``, never to ``<out>``. When every check passes, ``<out>`` (committed; the notebooks read it
through :mod:`mlsysrepro.core.gpu_results`) holds the GPU's name, torch and CUDA versions, the date, the machine and
each check's numbers and seconds; the executed notebook is kept beside it (``<out stem>.structured_dropout.ipynb``).
``--budget`` is the wall-clock limit in seconds (the collection asks for under 8 minutes); a check that ends past it
fails the run. A paper that adds a CUDA path adds its check to :data:`CHECKS` and the datasets it reads to
:data:`DATASETS` (the GPU kit carries those, ``benchmarks/gpu_kit.sh``).

``--dry-run`` is the GPU kit's proof on a CPU: every check runs with ``device=cpu`` as far as a CPU can take it
(the notebook through papermill, the profiler's process group on gloo, the HuggingFace adapter end to end) and stops
before its CUDA-only work (the GPU speed table, our nvcc kernels), so that every import, dataset read and kernel start
that the GPU machine will see is exercised; it writes ``<out>`` with ``"dry_run": true``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from mlsysrepro.core import paths
from mlsysrepro.core.timing import machine


def structured_dropout_notebook(device: torch.device, keep: Path) -> dict:
    """The structured-dropout notebook at smoke on ``device``, through papermill like every other run; the executed
    notebook is copied to ``keep``."""
    from mlsysrepro import runner

    error = runner.run_one(paths.REPO_ROOT / "notebooks" / "structured_dropout.ipynb", "smoke", 900,
                           {"device": device.type})
    if error is not None:
        raise RuntimeError(f"notebooks/structured_dropout.ipynb with device={device.type} at smoke failed: {error}")
    shutil.copyfile(paths.build_dir() / "executed" / "smoke" / "structured_dropout.ipynb", keep)
    return {"executed": keep.name}


def structured_dropout_speed(device: torch.device, keep: Path) -> list[dict] | dict:
    """The speed table (mlsysrepro.papers.structured_dropout.speed_table) at the paper's sizes on CUDA."""
    from mlsysrepro.core.settings import resolve
    from mlsysrepro.papers import structured_dropout

    settings = resolve("structured_dropout", structured_dropout.PRESETS, {"scale": "paper", "device": device.type})
    if device.type != "cuda":
        return {"dry_run": f"paper-size speed table left out on {device.type}"}
    return structured_dropout.speed_table(settings).to_dict("records")


def ddl_profiler(device: torch.device, keep: Path) -> dict:
    """RUN0 and RUN1 of ResNet-18 on one NCCL process (gloo off CUDA): the profiler's stage clocks, synchronised
    with the GPU."""
    from mlsysrepro.ddl.emulation import EmulatedCluster
    from mlsysrepro.ddl.profiler import STAGES, RunSpec, profile

    iterations, warmup = (20, 3) if device.type == "cuda" else (2, 1)
    specs = [RunSpec(run, "resnet18", 64, EmulatedCluster(), iterations=iterations, warmup=warmup, label=run,
                     width=64) for run in ("RUN0", "RUN1")]
    results = profile(specs, processes=1, backend="nccl" if device.type == "cuda" else "gloo", timeout=300)
    return {r.spec.run: {stage: float(np.median(r.times[stage])) for stage in STAGES if stage in r.times}
            for r in results}


def baklava_hf(device: torch.device, keep: Path) -> dict:
    """Our caches inside a HuggingFace Llama on ``device`` decode as HuggingFace's own cache does (float64, 1e-6)."""
    try:
        import transformers
    except ImportError:  # the GPU image holds it; a machine of one's own may not
        return {"skipped": "transformers is not installed (the optional extra `hf`)"}

    from mlsysrepro.kvcache.cache import BudgetedCache, FullCache
    from mlsysrepro.kvcache.hf import ATTENTION, HFCache
    from mlsysrepro.kvcache.policies import SnapKV

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config).double().eval().to(device)
    tokens = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1)).to(device)

    def decode(past, prefill=6):
        out = [model(tokens[:, :prefill], past_key_values=past, use_cache=True).logits]
        out += [model(tokens[:, t:t + 1], past_key_values=past, use_cache=True).logits
                for t in range(prefill, tokens.shape[1])]
        return torch.cat(out, 1)

    with torch.no_grad():
        model.set_attn_implementation("eager")
        reference = decode(transformers.DynamicCache())
        model.set_attn_implementation(ATTENTION)
        ours = decode(HFCache(FullCache(), model))
        budgeted = decode(HFCache(BudgetedCache(torch.full((2, 2), 8).to(device), SnapKV(window=4)), model))
    gap = float((ours - reference).abs().max())
    if gap > 1e-6 or not torch.isfinite(budgeted).all():
        raise AssertionError(f"our full cache on {device.type} differs from HuggingFace's by {gap:.3g} (allowed 1e-6)")
    return {"max_abs_gap_vs_huggingface": gap, "transformers": transformers.__version__}


def dlrm_gpu(device: torch.device, keep: Path) -> dict:
    """The DLRM embedding stage on CUDA at the artifact's batch and pooling (4 tables of 500K x 128): torch's
    EmbeddingBag and our kernels (baseline, register cap, prefetching, L2 pinning, combined; each first checked
    against torch), then DLRM end to end; per-round seconds (mlsysrepro.papers.dlrm_gpu.gpu_benchmark)."""
    from mlsysrepro.core.settings import resolve
    from mlsysrepro.papers import dlrm_gpu as paper

    settings = resolve("dlrm_gpu", paper.PRESETS, {"scale": "default", "repeats": 10})
    if device.type != "cuda":
        return {"dry_run": f"nvcc kernels and timing left out on {device.type}",
                "hot_rows": {name: len(paper.hot_rows(settings, name, paper.trace_ids(settings, name)))
                             for name in paper.traces.TRACES}}
    return paper.gpu_benchmark(settings)


#: (name, check) in the order they run; each takes the device and a path where it may keep a file, and returns
#: JSON-ready numbers.
CHECKS = [("structured_dropout_notebook", structured_dropout_notebook),
          ("structured_dropout_speed", structured_dropout_speed),
          ("ddl_profiler", ddl_profiler),
          ("baklava_hf", baklava_hf),
          ("dlrm_gpu", dlrm_gpu)]
#: The registry's datasets the checks read (the GPU kit carries them; its dry run fails on one left out).
DATASETS = ["ptb", "conll2003", "dlrm_micro24_traces", "meta_dlrm_datasets_stats"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=paths.gpu_results_file())
    parser.add_argument("--budget", type=float, default=480.0, help="seconds the whole check may take")
    parser.add_argument("--dry-run", action="store_true", help="on the CPU, every check up to its CUDA-only work")
    args = parser.parse_args(argv)
    if args.dry_run and args.out.resolve() == paths.gpu_results_file().resolve():
        parser.error(f"--dry-run needs an --out other than {args.out} (that file holds GPU measurements)")
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: skipped, torch sees no CUDA device here (nothing written)")
        return 0
    device = torch.device("cpu" if args.dry_run else "cuda")
    results = {"gpu": "none (dry run)" if args.dry_run else torch.cuda.get_device_name(device),
               "torch": torch.__version__, "cuda": torch.version.cuda, "dry_run": args.dry_run,
               "date": datetime.date.today().isoformat(), "machine": machine(device), "sections": {}, "seconds": {}}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as build:
        for name, check in CHECKS:
            print(f"gpu_check: {name} ...", flush=True)
            t0 = time.monotonic()
            try:
                keep = args.out.parent / f"{args.out.stem}.{name.removesuffix('_notebook')}.ipynb"
                keep.parent.mkdir(parents=True, exist_ok=True)
                with mock.patch.dict(os.environ, {"MLSYSREPRO_BUILD_DIR": build}):
                    results["sections"][name] = check(device, keep)
                results["seconds"][name] = round(time.monotonic() - t0, 1)
                print(f"gpu_check: {name} passed in {results['seconds'][name]:.0f} s", flush=True)
                if time.monotonic() - start > args.budget:
                    raise TimeoutError(f"the check is past its budget of {args.budget:.0f} s after {name}")
            except Exception:
                traceback.print_exc()
                partial = args.out.with_suffix(".partial.json")
                partial.write_text(json.dumps({**results, "failed": name, "error": traceback.format_exc()},
                                              indent=1, sort_keys=True, default=str) + "\n")
                print(f"gpu_check: FAILED at {name}; what passed is in {partial}", file=sys.stderr)
                return 1
    args.out.write_text(json.dumps(results, indent=1, sort_keys=True, default=str) + "\n")
    print(f"gpu_check: every check passed in {time.monotonic() - start:.0f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
