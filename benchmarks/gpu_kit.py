"""The GPU kit: what the collection's GPU check needs on a bare lent GPU machine, in one folder that travels with it.

    benchmarks/gpu_kit.sh              # here: fetch the wheels and datasets, check the size, print the GPU command
    benchmarks/gpu_kit.sh --dry-run    # and prove the kit complete: run the check in a stand-in of the GPU image

The lent machine (one H200) runs Python 3.12 with its own CUDA build of torch 2.11 and the packages of
:data:`IMAGE`; it has no papermill, Jupyter kernel or pymetis, and nothing can be downloaded there. So the kit,
``.gpu_kit/`` (ignored by git, carried to the machine), holds

- ``wheels/``: :data:`KIT`, every wheel the image lacks, each named with its version (``--no-deps``: nothing is
  pulled implicitly, so the list is the whole story);
- ``data/``: the datasets the check reads (``gpu_check.DATASETS``), verified, laid out as ``data/`` is.

There, the wheels install with ``--target`` into a temporary folder; that folder and ``lib/`` go on ``PYTHONPATH``
(the project is not installed: ``pip install -e .`` would ask for torch 2.13) and ``benchmarks/gpu_check.sh`` writes
the JSON and the executed notebook under ``$OUT`` (:func:`gpu_command`).

The dry run builds the stand-in once (``build/gpu_kit/image/``, a Python 3.12 environment holding :data:`STAND_IN`
at the image's versions, and nothing that :data:`IMAGE` does not name), installs the kit exactly as the GPU machine
will, and runs ``gpu_check.py --dry-run`` there with the same environment variables: every import, every dataset
read and the papermill kernel's start are exercised, only the CUDA work is left out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KIT_DIR = REPO / ".gpu_kit"
STAND_IN_DIR = REPO / "build" / "gpu_kit"
#: What one device call may carry: the working tree and the kit together (the device tool's limit).
CARRY_LIMIT = 64 * 2**20
#: The image's interpreter, for which the wheels are chosen.
PYTHON = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")

#: The GPU image's Python packages as the workplace describes it (read on a machine running it, 2026-11-17); the
#: version where a session's ``pip list`` there gave one, else None.
IMAGE: dict[str, str | None] = {name: None for name in """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft
pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy
seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers statsmodels sympy
tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer
typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split()}
IMAGE.update({"accelerate": "1.15.0", "huggingface-hub": "1.33.0", "numpy": "2.5.2", "safetensors": "0.8.0",
              "tokenizers": "0.23.2", "torch": "2.11.0", "torch-geometric": "2.8.0.post1", "transformers": "5.17.0",
              "triton": "3.6.0", "torchvision": "0.26.0", "sentencepiece": "0.2.2"})

#: What the stand-in installs of the image: the collection's imports (pip adds their needs, which must be in IMAGE).
#: numpy 2.5.2 is not on the package index here, so the stand-in takes the newest numpy there is (a documented gap).
STAND_IN = ["torch", "torch-geometric", "transformers", "tokenizers", "huggingface-hub", "safetensors", "triton",
            "numpy", "pandas", "scipy", "matplotlib", "seaborn", "scikit-learn", "statsmodels", "tqdm", "pyyaml",
            "requests", "psutil"]
NOT_ON_INDEX = {"numpy"}

#: The wheels the image lacks, pinned: papermill and the Jupyter kernel it starts (with what they import that the
#: image does not hold), and pymetis (gnn.partition). No name here may be in IMAGE: two versions of one package stop
#: the install.
KIT: dict[str, str] = {
    "papermill": "2.7.0", "nbclient": "0.11.0", "nbformat": "5.11.1", "jupyter-client": "8.10.0",
    "jupyter-core": "5.9.1", "ipykernel": "7.4.0", "ipython": "9.18.1", "ipython-pygments-lexers": "1.1.1",
    "traitlets": "5.16.1", "pyzmq": "27.3.0", "tornado": "6.6.1", "comm": "0.2.3", "debugpy": "1.8.22",
    "matplotlib-inline": "0.2.2", "nest-asyncio2": "1.7.4", "jedi": "0.20.1", "parso": "0.8.7", "pexpect": "4.9.0",
    "ptyprocess": "0.7.0", "prompt-toolkit": "3.0.53", "wcwidth": "0.9.4", "stack-data": "0.6.3",
    "asttokens": "3.0.2", "executing": "2.3.0", "pure-eval": "0.2.4", "platformdirs": "4.14.9",
    "fastjsonschema": "2.22.3", "jsonschema": "4.26.0", "jsonschema-specifications": "2025.9.1",
    "referencing": "0.37.0", "rpds-py": "2026.9.1", "entrypoints": "0.4.2", "tenacity": "9.2.1",
    "pymetis": "2025.2.2",
}


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(str(c) for c in command), flush=True)
    return subprocess.run(command, check=True, **kwargs)


def _quiet_pip_env() -> dict:
    """pip's environment without this machine's constraint file (it caps torch for the project's own install)."""
    return {**os.environ, "PIP_CONSTRAINT": "", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def download_wheels(folder: Path) -> list[Path]:
    """Every wheel of :data:`KIT` for CPython 3.12 on manylinux x86-64 into ``folder`` (one version each)."""
    overlap = sorted(set(KIT) & set(IMAGE))
    if overlap:
        raise ValueError(f"KIT names packages the image already holds: {overlap} (two versions stop the install)")
    folder.mkdir(parents=True, exist_ok=True)
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
          "--python-version", PYTHON, "--implementation", "cp", *platforms, "-d", str(folder),
          *[f"{name}=={version}" for name, version in KIT.items()]], env=_quiet_pip_env())
    wheels = sorted(folder.glob("*.whl"))
    wanted = {_normal(name) for name in KIT}
    stale = [w for w in wheels if _normal(w.name.split("-")[0]) not in wanted
             or w.name.split("-")[1] != KIT[_kit_name(w)]]
    for wheel in stale:  # a wheel of an older kit
        wheel.unlink()
    return sorted(set(wheels) - set(stale))


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _kit_name(wheel: Path) -> str:
    return next((name for name in KIT if _normal(name) == _normal(wheel.name.split("-")[0])), "")


def copy_datasets(folder: Path, names: list[str]) -> None:
    """The datasets ``names`` into ``folder`` as ``data/`` lays them out, each file verified by the registry."""
    sys.path.insert(0, str(REPO / "lib"))
    from mlsysrepro.core.data import Registry, load_registry

    shared = REPO.parent / "shared" / "datasets"  # where CI's mirror is; the registry falls back to the web
    if shared.is_dir():
        os.environ.setdefault("MLSYSREPRO_DATA_MIRROR", str(shared))
    registry = Registry(load_registry(), folder)
    for name in names:
        registry.fetch(name)


def tree_bytes() -> int:
    """Bytes of what a device call sends besides the carried kit: tracked files and untracked ones git does not
    ignore (as the device tool counts them)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            check=True, capture_output=True).stdout.split(b"\0")
    return sum((REPO / name.decode()).stat().st_size for name in listed if name and (REPO / name.decode()).is_file())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def environment(site: str, lib: str, data: str, scratch: str) -> dict[str, str]:
    """The variables the check runs under, on the GPU machine and in the dry run alike: the kit's site folder and
    ``lib/`` on the path, the kit's datasets (offline), caches and builds in scratch space, plain output."""
    return {"PYTHONPATH": f"{site}:{lib}",
            "MLSYSREPRO_DATA_DIR": data, "MLSYSREPRO_CACHE_DIR": f"{scratch}/cache",
            "MLSYSREPRO_BUILD_DIR": f"{scratch}/build", "MLSYSREPRO_OFFLINE": "1", "MLSYSREPRO_NO_PROGRESS": "1",
            "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}


def gpu_command() -> str:
    """The one command for the lent GPU machine (the device tool's ``run``, with ``carry: [".gpu_kit"]``)."""
    variables = " ".join(f"{k}={v}" for k, v in environment("/tmp/kit-site", "$PWD/lib",
                                                               "$PWD/.gpu_kit/data", "/tmp/mlsysrepro").items())
    return ("python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/kit-site "
            ".gpu_kit/wheels/*.whl || exit 1; "
            f"export {variables}; "
            "benchmarks/gpu_check.sh --out $OUT/gpu_check.json --budget 450 2>&1 | tee $OUT/gpu_check.log; "
            "exit ${PIPESTATUS[0]}")


def image_python() -> str | None:
    """An interpreter of the image's Python version here (on PATH, or one pyenv holds), or None."""
    candidates = [shutil.which(f"python{PYTHON}"), *map(str, sorted(Path.home().glob(
        f".pyenv/versions/{PYTHON}*/bin/python{PYTHON}")))]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "--version"], capture_output=True).returncode == 0:
            return candidate
    return None


def _stand_in_python() -> Path:
    """The stand-in's interpreter, built once per :data:`STAND_IN` spec (a stamp holds the spec's hash)."""
    venv, stamp = STAND_IN_DIR / "image", STAND_IN_DIR / "image.stamp"
    requirements = [f"{name}=={IMAGE[name]}" if IMAGE[name] and name not in NOT_ON_INDEX else name
                    for name in STAND_IN]
    spec = hashlib.sha256(json.dumps([PYTHON, requirements]).encode()).hexdigest()
    python = venv / "bin" / "python"
    if stamp.exists() and stamp.read_text() == spec and python.exists():
        return python
    interpreter = image_python()
    if interpreter is None:
        raise RuntimeError(f"the dry run needs Python {PYTHON} (the GPU image's): none found on PATH or in pyenv")
    shutil.rmtree(venv, ignore_errors=True)
    _run([interpreter, "-m", "venv", str(venv)])
    _run([str(python), "-m", "pip", "install", "--quiet", *requirements], env=_quiet_pip_env())
    installed = json.loads(subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], check=True,
                                          capture_output=True, text=True).stdout)
    implied = sorted(p["name"] for p in installed if _normal(p["name"]) not in {_normal(n) for n in IMAGE})
    # The image's list names what was asked for, not every need (matplotlib's pyparsing is not named): what pip
    # pulled here is needed by an image package, so the image holds it too. Said, so that a reader can check.
    print(f"gpu_kit: the stand-in also holds needs of the image's packages that its list does not name: {implied}")
    stamp.write_text(spec)
    return python


def dry_run(wheels: Path, data: Path) -> dict:
    """Install the kit into the stand-in as the GPU machine will, then run ``gpu_check.py --dry-run`` there."""
    start = time.monotonic()
    python = _stand_in_python()
    built = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu-kit-dry-run-") as scratch:
        site = f"{scratch}/site"
        _run([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
              "--no-cache-dir", "--target", site, *map(str, sorted(wheels.glob("*.whl")))])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MLSYSREPRO_", "PYTHON", "VIRTUAL_ENV"))}
        env.update(environment(site, str(REPO / "lib"), str(data), scratch), PYTHON=str(python))
        out = STAND_IN_DIR / "dry_run.json"
        _run(["bash", "benchmarks/gpu_check.sh", "--dry-run", "--out", str(out)], cwd=REPO, env=env)
    return {"stand_in_seconds": round(built - start, 1), "dry_run_seconds": round(time.monotonic() - built, 1),
            "result": str(out)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="then run the check in a stand-in of the GPU image")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "benchmarks"))
    from gpu_check import DATASETS

    start = time.monotonic()
    wheels = download_wheels(KIT_DIR / "wheels")
    copy_datasets(KIT_DIR / "data", DATASETS)
    kit, tree = folder_bytes(KIT_DIR), tree_bytes()
    print(f"gpu_kit: {len(wheels)} wheels ({folder_bytes(KIT_DIR / 'wheels') / 2**20:.1f} MiB) and "
          f"{len(DATASETS)} datasets ({folder_bytes(KIT_DIR / 'data') / 2**20:.1f} MiB) in {KIT_DIR.name}/ "
          f"in {time.monotonic() - start:.0f} s; with the working tree ({tree / 2**20:.1f} MiB) a call carries "
          f"{(kit + tree) / 2**20:.1f} of {CARRY_LIMIT / 2**20:.0f} MiB")
    if kit + tree > CARRY_LIMIT:
        print("gpu_kit: too large for one device call; ignore what the check does not need", file=sys.stderr)
        return 1
    if args.dry_run:
        print(f"gpu_kit: dry run passed: {json.dumps(dry_run(KIT_DIR / 'wheels', KIT_DIR / 'data'))}")
    print("\nOn the GPU machine (device run, carry [\".gpu_kit\"], timeout_s 540):\n\n" + gpu_command() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
