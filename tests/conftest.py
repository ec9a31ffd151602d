"""Test-wide environment: outputs of non-default runs and cached artifacts go to a temporary
folder, so the tests never touch figures/, build/ or data/cache/ of the checkout."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def isolated_outputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlsysrepro")
    saved = {k: os.environ.get(k) for k in ("MLSYSREPRO_BUILD_DIR", "MLSYSREPRO_CACHE_DIR", "MLSYSREPRO_NO_PROGRESS")}
    os.environ["MLSYSREPRO_BUILD_DIR"] = str(root / "build")
    os.environ["MLSYSREPRO_CACHE_DIR"] = str(root / "cache")
    os.environ["MLSYSREPRO_NO_PROGRESS"] = "1"
    yield root
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
