import functools
import hashlib
import http.server
import os
import threading
from pathlib import Path

import pytest

from mlsysrepro.core import data
from mlsysrepro.core.data import ChecksumError, Dataset, DatasetError, FileEntry, Registry

CONTENT = {"raw/a.txt": b"alpha\n" * 100, "raw/sub/b.bin": bytes(range(256)) * 10}


def make_dataset(url_base: str | None = None, corrupt: str | None = None) -> Dataset:
    files = {}
    for rel, blob in CONTENT.items():
        sha = hashlib.sha256(blob + (b"x" if rel == corrupt else b"")).hexdigest()
        files[rel] = FileEntry(sha256=sha, size=len(blob), url=f"{url_base}/{rel}" if url_base else None)
    return Dataset("toy", "a toy dataset", "toy_mirror", "MIT", "nobody", ("_template",), "", files)


def write_tree(root: Path) -> Path:
    for rel, blob in CONTENT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(blob)
    return root


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A mirror holding the toy dataset, an empty data dir, downloads disabled by default."""
    mirror = tmp_path / "mirror"
    write_tree(mirror / "toy_mirror")
    monkeypatch.setenv(data.MIRROR_ENV, str(mirror))
    monkeypatch.setenv(data.OFFLINE_ENV, "1")
    return tmp_path


def files_in(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_mirror_hit_copies_verified_files(env):
    registry = Registry({"toy": make_dataset()}, env / "data")
    path = registry.fetch("toy")
    assert path == env / "data" / "toy"
    assert files_in(path) == set(CONTENT)
    assert all((path / rel).read_bytes() == blob for rel, blob in CONTENT.items())


def test_cache_hit_needs_no_mirror(env, monkeypatch):
    registry = Registry({"toy": make_dataset()}, env / "data")
    registry.fetch("toy")
    monkeypatch.delenv(data.MIRROR_ENV)
    assert files_in(registry.fetch("toy")) == set(CONTENT)


def test_corrupt_cached_copy_is_replaced_from_the_mirror(env):
    registry = Registry({"toy": make_dataset()}, env / "data")
    path = registry.fetch("toy")
    (path / "raw/a.txt").write_bytes(b"tampered")
    registry.fetch("toy")
    assert (path / "raw/a.txt").read_bytes() == CONTENT["raw/a.txt"]


def test_a_corrupt_copy_with_no_other_source_is_reported_as_corrupt_not_missing(env, monkeypatch):
    registry = Registry({"toy": make_dataset()}, env / "data")
    path = registry.fetch("toy")
    (path / "raw/a.txt").write_bytes(b"tampered")
    monkeypatch.delenv(data.MIRROR_ENV)
    with pytest.raises(DatasetError) as info:
        registry.fetch("toy")
    message = str(info.value)
    assert f"{path / 'raw/a.txt'} (corrupt: sha256 {hashlib.sha256(b'tampered').hexdigest()}" in message
    assert "(missing)" not in message


def test_checksum_mismatch_names_file_and_hashes_and_leaves_nothing(env):
    registry = Registry({"toy": make_dataset(corrupt="raw/sub/b.bin")}, env / "data")
    expected = registry.datasets["toy"].files["raw/sub/b.bin"].sha256
    actual = hashlib.sha256(CONTENT["raw/sub/b.bin"]).hexdigest()
    with pytest.raises(ChecksumError) as info:
        registry.fetch("toy")
    message = str(info.value)
    assert "'raw/sub/b.bin'" in message and expected in message and actual in message
    assert "raw/sub/b.bin" not in files_in(env / "data")
    assert not any(name.endswith(".part") for name in files_in(env / "data"))


def test_missing_everywhere_names_dataset_places_and_fix(env, monkeypatch):
    monkeypatch.setenv(data.MIRROR_ENV, str(env / "empty_mirror"))
    registry = Registry({"toy": make_dataset(url_base="http://127.0.0.1:9")}, env / "data")
    with pytest.raises(DatasetError) as info:
        registry.fetch("toy")
    message = str(info.value)
    assert "dataset 'toy'" in message
    assert str(env / "data" / "toy" / "raw/a.txt") in message
    assert str(env / "empty_mirror" / "toy_mirror" / "raw/a.txt") in message
    assert "download (disabled" in message
    assert data.MIRROR_ENV in message and f"unset {data.OFFLINE_ENV}" in message


def test_unset_mirror_is_reported(env, monkeypatch):
    monkeypatch.delenv(data.MIRROR_ENV)
    with pytest.raises(DatasetError, match=r"\$MLSYSREPRO_DATA_MIRROR \(unset\)"):
        Registry({"toy": make_dataset()}, env / "data").fetch("toy")


def test_unknown_dataset_lists_registered_ones(env):
    with pytest.raises(DatasetError, match=r"unknown dataset 'toys'; registered datasets: \['toy'\]"):
        Registry({"toy": make_dataset()}, env / "data").fetch("toys")


@pytest.fixture
def http_server(tmp_path):
    """An HTTP server on 127.0.0.1 serving a temporary folder holding the toy files."""
    served = write_tree(tmp_path / "served")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_download_path(env, monkeypatch, http_server):
    monkeypatch.setenv(data.MIRROR_ENV, str(env / "empty_mirror"))
    monkeypatch.delenv(data.OFFLINE_ENV)
    registry = Registry({"toy": make_dataset(url_base=http_server)}, env / "data")
    path = registry.fetch("toy")
    assert all((path / rel).read_bytes() == blob for rel, blob in CONTENT.items())


def test_download_with_wrong_checksum_leaves_nothing(env, monkeypatch, http_server):
    monkeypatch.delenv(data.MIRROR_ENV)
    monkeypatch.delenv(data.OFFLINE_ENV)
    registry = Registry({"toy": make_dataset(url_base=http_server, corrupt="raw/a.txt")}, env / "data")
    with pytest.raises(ChecksumError, match=f"raw/a.txt' from {http_server}/raw/a.txt"):
        registry.fetch("toy")
    assert files_in(env / "data") <= {"toy/raw/sub/b.bin"}


def test_failed_download_is_reported(env, monkeypatch, http_server):
    monkeypatch.delenv(data.MIRROR_ENV)
    monkeypatch.delenv(data.OFFLINE_ENV)
    registry = Registry({"toy": make_dataset(url_base=http_server + "/nowhere")}, env / "data")
    with pytest.raises(DatasetError, match="download failed: HTTP Error 404"):
        registry.fetch("toy")


def test_registry_declares_every_dataset_with_licence_citation_and_hash():
    registry = data.load_registry()
    for name, d in registry.items():
        assert d.title and d.licence and d.citation and d.used_by and d.files, name
        for rel, f in d.files.items():
            assert len(f.sha256) == 64 and f.size > 0, (name, rel)
            assert f.url is None or f.url.startswith("https://"), (name, rel)


def test_registry_matches_the_shared_mirror():
    """Every file in the mirror is declared, and every declared file is there with its hash."""
    mirror = os.environ.get(data.MIRROR_ENV)
    if not mirror or not Path(mirror).is_dir():
        pytest.skip(f"{data.MIRROR_ENV} is not set")
    registry = data.load_registry()
    declared = {f"{d.mirror}/{rel}": f for d in registry.values() for rel, f in d.files.items()}
    present = {p.relative_to(mirror).as_posix() for p in Path(mirror).rglob("*")
               if p.is_file() and p.name != "SOURCE.md"}
    assert present == set(declared)
    for rel, entry in declared.items():
        assert data.sha256_of(Path(mirror) / rel) == entry.sha256, rel


def test_data_readme_lists_the_registry():
    readme = (Path(data.__file__).parents[3] / "data" / "README.md").read_text()
    assert data.datasets_markdown(data.load_registry()) in readme
