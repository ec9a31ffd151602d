"""The runtime table is measured: each successful default run is recorded, cold or warm, and nothing else is."""

import datetime
import json

import pytest
import torch

from mlsysrepro import runner
from mlsysrepro.core import paths, runtimes


@pytest.fixture
def runtimes_file(tmp_path, monkeypatch):
    path = tmp_path / "runtimes.json"
    monkeypatch.setenv("MLSYSREPRO_RUNTIMES", str(path))
    return path


def test_each_kind_keeps_its_latest_time(runtimes_file):
    day = datetime.date(2026, 12, 3)
    runtimes.record("llcg", 600.0, cold=True, jobs=1, date=day)
    runtimes.record("llcg", 120.0, cold=False, jobs=1, date=day)
    runtimes.record("llcg", 540.0, cold=True, jobs=2, date=day)
    entries = json.loads(runtimes_file.read_text())["llcg"]
    assert entries["cold"]["seconds"] == 540.0 and entries["cold"]["jobs"] == 2
    assert entries["warm"]["seconds"] == 120.0 and entries["warm"]["date"] == "2026-12-03"


def test_bad_input_names_the_parameter(runtimes_file):
    with pytest.raises(ValueError, match="seconds"):
        runtimes.record("llcg", -1.0, cold=True, jobs=1)
    with pytest.raises(ValueError, match="jobs"):
        runtimes.record("llcg", 1.0, cold=True, jobs=0)
    assert not runtimes_file.exists()


def test_cache_entries_are_what_the_notebook_s_folder_holds():
    assert runtimes.cache_entries("runtime_probe") == frozenset()
    folder = paths.cache_dir() / "runtime_probe"
    folder.mkdir(parents=True)
    (folder / "entry.pt").write_bytes(b"x")
    assert runtimes.cache_entries("runtime_probe") == {"entry.pt"}


def test_a_run_is_cold_from_nothing_warm_when_it_computes_nothing_and_neither_on_a_stale_cache():
    nothing, one, two = frozenset(), frozenset({"a.pt"}), frozenset({"a.pt", "b.pt"})
    assert runtimes.run_kind(nothing, two) == ("cold",)
    assert runtimes.run_kind(two, two) == ("warm",)
    assert runtimes.run_kind(nothing, nothing) == ("cold", "warm")  # caches nothing: every run is both
    assert runtimes.run_kind(one, two) == ()  # a stale entry recomputed: neither label would be true


def test_the_table_totals_what_was_measured_and_counts_what_was_not(runtimes_file):
    day = datetime.date(2026, 12, 3)
    runtimes.record("a", 600.0, cold=True, jobs=1, date=day)
    runtimes.record("b", 1200.0, cold=True, jobs=2, date=day)
    runtimes.record("a", 60.0, cold=False, jobs=1, date=day)
    kernels = json.loads(runtimes_file.read_text())["a"]["cold"]["kernels"]
    assert kernels == torch.backends.cpu.get_cpu_capability()  # which machine: "AVX2" and "AVX512" differ 2x
    table = runtimes.markdown_table(["a", "b"])
    assert f"| `a` | 10.0 min (2026-12-03, {kernels}) | 1.0 min (2026-12-03, {kernels}) |" in table
    assert f"| `b` | 20.0 min (2026-12-03, {kernels}, 2 at once) | not measured |" in table
    assert "| **all** | **30 min** | **1 min** (1 not measured) |" in table


@pytest.mark.parametrize("fails", [False, True])
def test_the_runner_records_a_successful_default_run_only(runtimes_file, monkeypatch, tmp_path, fails):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "probe.ipynb").write_text("{}")
    monkeypatch.setattr(runner, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(runner, "run_one", lambda *args: "broken" if fails else None)
    monkeypatch.setattr(runner.reproduction, "main", lambda argv: 0)
    monkeypatch.setattr(paths, "failure_marker", lambda name, scale: tmp_path / f".{name}.failed")
    runner.main(["--scale", "default"])
    recorded = runtimes.load()
    assert (recorded == {}) == fails
    if not fails:
        assert recorded["probe"]["cold"]["jobs"] == 1
    runner.main(["--scale", "smoke"])
    assert runtimes.load() == recorded


def test_record_run_files_a_run_under_each_kind_it_is(runtimes_file):
    folder = paths.cache_dir() / "caches_something"
    runtimes.record_run("caches_nothing", 70.0, frozenset(), jobs=1)
    folder.mkdir(parents=True)
    (folder / "entry.pt").write_bytes(b"x")
    assert runtimes.record_run("caches_something", 300.0, frozenset(), jobs=1) == ("cold",)
    (folder / "other.pt").write_bytes(b"x")
    assert runtimes.record_run("caches_something", 200.0, frozenset({"entry.pt"}), jobs=1) == ()
    table = runtimes.load()
    assert table["caches_nothing"]["cold"]["seconds"] == table["caches_nothing"]["warm"]["seconds"] == 70.0
    assert table["caches_something"] == {"cold": table["caches_something"]["cold"]}
    assert table["caches_something"]["cold"]["seconds"] == 300.0
