"""The numbers the collection's GPU check measured (``benchmarks/gpu_check.sh``), read where the notebooks use them.

The check runs every CUDA path of the collection on a machine with a GPU and writes one JSON file
(:func:`mlsysrepro.core.paths.gpu_results_file`, committed): the GPU's name, the software that ran, the date, and one
section per check (``structured_dropout_speed``, ``ddl_profiler``, ...). A notebook asks for its section with
:func:`section`, gets ``None`` where nothing was measured on a GPU, and says so with :func:`provenance`::

    speed = gpu_results.section("structured_dropout_speed")
    print(gpu_results.provenance("structured_dropout_speed"))  # "measured on NVIDIA H200 (...)" or "not measured ..."
"""

from __future__ import annotations

import json
from typing import Any

from . import paths

NOT_MEASURED = "Not measured on a GPU: no GPU measurement is committed (run benchmarks/gpu_check.sh where CUDA is)"
#: The fields every results file has besides its sections.
HEADER = ("gpu", "torch", "cuda", "date", "sections")


def load() -> dict[str, Any] | None:
    """The whole results file, or None where there is none; a file without the :data:`HEADER` fields is an error."""
    path = paths.gpu_results_file()
    if not path.exists():
        return None
    results = json.loads(path.read_text())
    missing = [field for field in HEADER if field not in results]
    if missing:
        raise ValueError(f"{path} lacks {missing}: rerun benchmarks/gpu_check.sh to write it again")
    return results


def section(name: str) -> Any | None:
    """One check's numbers (as the check wrote them), or None where no GPU measured it."""
    results = load()
    return None if results is None else results["sections"].get(name)


def provenance(name: str) -> str:
    """Where ``name``'s numbers come from: the GPU, torch and CUDA versions and the date, or :data:`NOT_MEASURED`."""
    results = load()
    if results is None or name not in results["sections"]:
        return NOT_MEASURED
    return f"measured on {results['gpu']} (torch {results['torch']}, CUDA {results['cuda']}) on {results['date']}"
