"""Test-wide environment: outputs of non-default runs and cached artifacts go to a temporary
folder, so the tests never touch figures/, build/ or data/cache/ of the checkout."""

import os

import pytest


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


@pytest.fixture(scope="module")
def tiny_llama():
    """The transformer and KV-cache tests' model: a seeded 2-layer Llama (width 32, 4 query heads, 2 KV heads,
    vocabulary 50) in float64, so cached and uncached decoding can be compared to 1e-10."""
    import torch

    from mlsysrepro.transformer.llama import Llama, LlamaConfig

    torch.manual_seed(0)
    return Llama(LlamaConfig(vocab=50, dim=32, layers=2, heads=4, kv_heads=2, ffn=64)).double().eval()
