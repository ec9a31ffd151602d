import json
import os
import subprocess
import sys

import pytest

from mlsysrepro.core import gpu_results, paths


def test_without_a_results_file_every_section_is_not_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("MLSYSREPRO_GPU_RESULTS", str(tmp_path / "gpu_check.json"))
    assert gpu_results.load() is None and gpu_results.section("structured_dropout_speed") is None
    assert gpu_results.provenance("structured_dropout_speed") == gpu_results.NOT_MEASURED


def test_a_results_file_names_its_gpu_and_a_broken_one_is_an_error(tmp_path, monkeypatch):
    path = tmp_path / "gpu_check.json"
    monkeypatch.setenv("MLSYSREPRO_GPU_RESULTS", str(path))
    path.write_text(json.dumps({"gpu": "NVIDIA H200", "torch": "2.13.0", "cuda": "12.8", "date": "2026-12-01",
                                "sections": {"ddl_profiler": {"RUN0": {"iteration": 0.01}}}}))
    assert gpu_results.section("ddl_profiler") == {"RUN0": {"iteration": 0.01}}
    assert gpu_results.provenance("ddl_profiler").startswith("measured on NVIDIA H200 (torch 2.13.0, CUDA 12.8)")
    assert gpu_results.provenance("baklava_hf") == gpu_results.NOT_MEASURED
    path.write_text(json.dumps({"sections": {}}))
    with pytest.raises(ValueError, match="lacks"):
        gpu_results.load()


def test_the_gpu_check_skips_cleanly_without_cuda(tmp_path):
    """CI has no GPU: the check must say so, exit 0 and write nothing."""
    out = tmp_path / "gpu_check.json"
    done = subprocess.run([sys.executable, str(paths.REPO_ROOT / "benchmarks" / "gpu_check.py"), "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "skipped" in done.stdout and not out.exists()
