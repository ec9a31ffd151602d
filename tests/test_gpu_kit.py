"""The GPU kit (benchmarks/gpu_kit.py) and the GPU check's entry points (benchmarks/gpu_check.sh / .py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from mlsysrepro.core import paths
from mlsysrepro.core.data import load_registry

BENCHMARKS = paths.REPO_ROOT / "benchmarks"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_kit = _module("gpu_kit")


def test_the_kit_carries_no_package_the_image_holds_and_pins_every_wheel():
    normal = gpu_kit._normal
    assert not {normal(n) for n in gpu_kit.KIT} & {normal(n) for n in gpu_kit.IMAGE}
    assert all(version and version[0].isdigit() for version in gpu_kit.KIT.values())
    # what papermill needs to start a kernel, and what the image is known to lack
    assert {"papermill", "nbclient", "ipykernel", "jupyter-client", "pymetis"} <= set(gpu_kit.KIT)
    assert set(gpu_kit.STAND_IN) <= set(gpu_kit.IMAGE)


def test_the_checks_datasets_are_registered():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from gpu_check import CHECKS, DATASETS
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert set(DATASETS) <= set(load_registry())
    assert [name for name, _ in CHECKS][0] == "structured_dropout_notebook"


def test_the_gpu_command_fits_one_device_call_and_writes_under_out():
    command = gpu_kit.gpu_command()
    assert len(command) <= 2000  # the device tool's limit on a command
    assert "--target /tmp/kit-site .gpu_kit/wheels/*.whl" in command and "--no-index" in command
    assert "PYTHONPATH=/tmp/kit-site:$PWD/lib" in command and "MLSYSREPRO_DATA_DIR=$PWD/.gpu_kit/data" in command
    assert "--out $OUT/gpu_check.json" in command and "pip install -e" not in command
    assert "/.gpu_kit/" in (paths.REPO_ROOT / ".gitignore").read_text().split()  # carried, never committed


def test_gpu_check_sh_runs_the_python_whose_torch_sees_a_gpu(tmp_path):
    fake = tmp_path / "python3"  # a python3 whose "torch" sees CUDA, as the GPU image's does
    fake.write_text('#!/usr/bin/env bash\nif [[ "$1" == "-c" ]]; then exit 0; fi\necho "FAKE $*"\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"} | {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(["bash", str(BENCHMARKS / "gpu_check.sh"), "--budget", "1"], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "FAKE benchmarks/gpu_check.py --budget 1"


def test_gpu_check_dry_run_refuses_to_overwrite_the_committed_measurements():
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "lib")}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_check.py"), "--dry-run", "--out",
                           str(paths.gpu_results_file())], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "--dry-run needs an --out other than" in done.stderr


@pytest.mark.slow
def test_dry_run_in_a_stand_in_of_the_gpu_image():
    """The kit is complete: the check runs in a Python 3.12 environment holding only the image's packages (at its
    versions) plus the kit's wheels. Building the stand-in downloads about 4 GB, so this runs where
    ``benchmarks/gpu_kit.sh --dry-run`` built it before, and skips elsewhere."""
    stamp = gpu_kit.STAND_IN_DIR / "image.stamp"
    wheels = sorted((gpu_kit.KIT_DIR / "wheels").glob("*.whl"))
    if not stamp.exists() or len(wheels) != len(gpu_kit.KIT):
        pytest.skip("no stand-in of the GPU image here: run benchmarks/gpu_kit.sh --dry-run once (a few minutes)")
    result = gpu_kit.dry_run(gpu_kit.KIT_DIR / "wheels", gpu_kit.KIT_DIR / "data")
    import json

    written = json.loads(open(result["result"]).read())
    assert written["dry_run"] is True and written["torch"].startswith(gpu_kit.IMAGE["torch"])
    assert set(written["sections"]) == {"structured_dropout_notebook", "structured_dropout_speed", "ddl_profiler",
                                        "baklava_hf", "dlrm_gpu"}
    assert written["sections"]["baklava_hf"]["transformers"] == gpu_kit.IMAGE["transformers"]
