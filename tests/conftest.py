"""Test-wide environment: outputs of non-default runs and cached artifacts go to a temporary
folder, so the tests never touch figures/, build/ or data/cache/ of the checkout."""

import os
import re

import pytest

# Under pytest-xdist (``run_all.sh test`` runs ``-n 2``) the test processes split the cores as ``run_all.sh --jobs``
# splits them between notebooks: each gets ``cores // processes`` torch threads and task workers, inherited by the
# notebook kernels and workers it starts, so that two test processes never oversubscribe the machine.
_PROCESSES = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
if _PROCESSES > 1:
    _SHARE = str(max(1, (os.cpu_count() or 1) // _PROCESSES))
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MLSYSREPRO_CORES"):
        os.environ.setdefault(_name, _SHARE)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` (``run_all.sh test``) with one scope per notebook: its smoke run, its checks and its
    same-seed rerun go to one test process, which runs the notebook once; other tests are scoped by module, as
    loadscope scopes them, so that module-scoped fixtures are built once."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class NotebookScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            notebook = re.fullmatch(r"tests/notebooks/test_notebooks\.py::\w+\[(\w+)\]", nodeid)
            return f"notebook {notebook[1]}" if notebook else super()._split_scope(nodeid)

    return NotebookScopes(config, log)


@pytest.fixture(scope="session", autouse=True)
def isolated_outputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlsysrepro")
    saved = {k: os.environ.get(k) for k in ("MLSYSREPRO_BUILD_DIR", "MLSYSREPRO_CACHE_DIR", "MLSYSREPRO_NO_PROGRESS",
                                            "MLSYSREPRO_STRICT_KEYS")}
    os.environ["MLSYSREPRO_STRICT_KEYS"] = "1"  # every cached computation the tests run (notebooks too) checks its key
    os.environ["MLSYSREPRO_BUILD_DIR"] = str(root / "build")
    os.environ["MLSYSREPRO_CACHE_DIR"] = str(root / "cache")
    os.environ["MLSYSREPRO_NO_PROGRESS"] = "1"
    yield root
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module", autouse=True)
def module_cache(tmp_path_factory):
    """Each test module computes into a cache of its own, so that what one module's tests compute (on hand-made
    inputs, say) is never served to a notebook run in another: under pytest-xdist the order of modules in a process
    is not fixed, and a context-use entry of ``test_baklava``'s random model, written under the smoke preset's key
    before BaKlaVa keyed its evaluations by their inputs, was served to the notebook's smoke run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLSYSREPRO_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def tiny_llama():
    """The transformer and KV-cache tests' model: a seeded 2-layer Llama (width 32, 4 query heads, 2 KV heads,
    vocabulary 50) in float64, so cached and uncached decoding can be compared to 1e-10."""
    import torch

    from mlsysrepro.transformer.llama import Llama, LlamaConfig

    torch.manual_seed(0)
    return Llama(LlamaConfig(vocab=50, dim=32, layers=2, heads=4, kv_heads=2, ffn=64)).double().eval()
