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
each check's numbers and seconds. ``--budget`` is the wall-clock limit in seconds (the collection asks for under 8
minutes); a check that ends past it fails the run. A paper that adds a CUDA path adds its check to :data:`CHECKS`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
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


def structured_dropout_notebook() -> dict:
    """The structured-dropout notebook at smoke on CUDA, through papermill like every other run."""
    from mlsysrepro import runner

    error = runner.run_one(paths.REPO_ROOT / "notebooks" / "structured_dropout.ipynb", "smoke", 900,
                           {"device": "cuda"})
    if error is not None:
        raise RuntimeError(f"notebooks/structured_dropout.ipynb with device=cuda at smoke failed: {error}")
    return {"executed": str(paths.build_dir() / "executed" / "smoke" / "structured_dropout.ipynb")}


def structured_dropout_speed() -> list[dict]:
    """The speed table (mlsysrepro.papers.structured_dropout.speed_table) at the paper's sizes on CUDA."""
    from mlsysrepro.core.settings import resolve
    from mlsysrepro.papers import structured_dropout

    settings = resolve("structured_dropout", structured_dropout.PRESETS, {"scale": "paper", "device": "cuda"})
    return structured_dropout.speed_table(settings).to_dict("records")


def ddl_profiler() -> dict:
    """RUN0 and RUN1 of ResNet-18 on one NCCL process: the profiler's stage clocks, synchronised with the GPU."""
    from mlsysrepro.ddl.emulation import EmulatedCluster
    from mlsysrepro.ddl.profiler import STAGES, RunSpec, profile

    specs = [RunSpec(run, "resnet18", 64, EmulatedCluster(), iterations=20, warmup=3, label=run, width=64)
             for run in ("RUN0", "RUN1")]
    results = profile(specs, processes=1, backend="nccl", timeout=300)
    return {r.spec.run: {stage: float(np.median(r.times[stage])) for stage in STAGES if stage in r.times}
            for r in results}


def baklava_hf() -> dict:
    """Our caches inside a HuggingFace Llama on CUDA decode as HuggingFace's own cache does (float64, 1e-6)."""
    try:
        import transformers
    except ImportError:
        return {"skipped": "transformers is not installed (the optional extra `hf`)"}
    from mlsysrepro.kvcache.cache import BudgetedCache, FullCache
    from mlsysrepro.kvcache.hf import ATTENTION, HFCache
    from mlsysrepro.kvcache.policies import SnapKV

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config).double().eval().cuda()
    tokens = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1)).cuda()

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
        budgeted = decode(HFCache(BudgetedCache(torch.full((2, 2), 8).cuda(), SnapKV(window=4)), model))
    gap = float((ours - reference).abs().max())
    if gap > 1e-6 or not torch.isfinite(budgeted).all():
        raise AssertionError(f"our full cache on CUDA differs from HuggingFace's by {gap:.3g} (allowed 1e-6)")
    return {"max_abs_gap_vs_huggingface": gap, "transformers": transformers.__version__}


def dlrm_gpu() -> dict:
    """The DLRM embedding stage on CUDA at the artifact's batch and pooling (4 tables of 500K x 128): torch's
    EmbeddingBag and our kernels (baseline, register cap, prefetching, L2 pinning, combined; each first checked
    against torch), then DLRM end to end; per-round seconds (mlsysrepro.papers.dlrm_gpu.gpu_benchmark)."""
    from mlsysrepro.core.settings import resolve
    from mlsysrepro.papers import dlrm_gpu as paper

    settings = resolve("dlrm_gpu", paper.PRESETS, {"scale": "default", "repeats": 10})
    return paper.gpu_benchmark(settings)


#: (name, check) in the order they run; each returns JSON-ready numbers.
CHECKS = [("structured_dropout_notebook", structured_dropout_notebook),
          ("structured_dropout_speed", structured_dropout_speed),
          ("ddl_profiler", ddl_profiler),
          ("baklava_hf", baklava_hf),
          ("dlrm_gpu", dlrm_gpu)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=paths.gpu_results_file())
    parser.add_argument("--budget", type=float, default=480.0, help="seconds the whole check may take")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_check: skipped, torch sees no CUDA device here (nothing written)")
        return 0
    device = torch.device("cuda")
    results = {"gpu": torch.cuda.get_device_name(device), "torch": torch.__version__, "cuda": torch.version.cuda,
               "date": datetime.date.today().isoformat(), "machine": machine(device), "sections": {}, "seconds": {}}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as build:
        for name, check in CHECKS:
            print(f"gpu_check: {name} ...", flush=True)
            t0 = time.monotonic()
            try:
                with mock.patch.dict(os.environ, {"MLSYSREPRO_BUILD_DIR": build}):
                    results["sections"][name] = check()
                results["seconds"][name] = round(time.monotonic() - t0, 1)
                print(f"gpu_check: {name} passed in {results['seconds'][name]:.0f} s", flush=True)
                if time.monotonic() - start > args.budget:
                    raise TimeoutError(f"the check is past its budget of {args.budget:.0f} s after {name}")
            except Exception:
                traceback.print_exc()
                partial = args.out.with_suffix(".partial.json")
                partial.parent.mkdir(parents=True, exist_ok=True)
                partial.write_text(json.dumps({**results, "failed": name, "error": traceback.format_exc()},
                                              indent=1, sort_keys=True, default=str) + "\n")
                print(f"gpu_check: FAILED at {name}; what passed is in {partial}", file=sys.stderr)
                return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, sort_keys=True, default=str) + "\n")
    print(f"gpu_check: every check passed in {time.monotonic() - start:.0f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
