import shutil
from collections import OrderedDict

import numpy as np
import pandas as pd
import pytest
import torch

from mlsysrepro.core import cached, resolve
from mlsysrepro.core import cache as cache_module
from mlsysrepro.core.cache import cache_path, cached_parts, decode, encode, read_entry, source_hash

PRESETS = {"smoke": dict(n=1, workers=1), "default": dict(n=2, workers=2), "paper": dict(n=3, workers=4)}


def counting(calls):
    def compute():
        calls.append(1)
        return {"w": torch.arange(3.0) * len(calls)}

    return compute


def test_second_call_loads_instead_of_computing():
    calls = []
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 11})
    first = cached("weights", settings, counting(calls), knobs=["n"])
    again = cached("weights", settings, counting(calls), knobs=["n"])
    assert len(calls) == 1 and torch.equal(first["w"], again["w"])
    assert cache_path("weights", settings, ["n"]).exists()


def test_a_listed_knob_the_seed_or_the_code_recompute(monkeypatch):
    from mlsysrepro.core import cache

    calls = []
    a = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 12})
    b = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 12, "n": 5})
    c = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 13})
    for settings in (a, b, c):
        cached("weights", settings, counting(calls), knobs=["n"])
    monkeypatch.setattr(cache, "source_hash", lambda module=None: "the code after an edit")
    cached("weights", a, counting(calls), knobs=["n"])
    assert len(calls) == 4


def test_a_machine_whose_cpu_kernels_differ_never_reads_the_entry(monkeypatch):
    calls = []
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 41})
    cached("weights", settings, counting(calls), knobs=["n"])
    here = cache_module.cpu_kernels()
    assert here == torch.backends.cpu.get_cpu_capability()
    monkeypatch.setattr(cache_module, "cpu_kernels", lambda: "AVX512" if here != "AVX512" else "AVX2")
    cached("weights", settings, counting(calls), knobs=["n"])
    assert len(calls) == 2
    monkeypatch.setattr(cache_module, "cpu_kernels", lambda: here)
    cached("weights", settings, counting(calls), knobs=["n"])  # back on this machine's kernels: its own entry
    assert len(calls) == 2


def test_a_knob_left_out_of_the_list_never_invalidates_the_cache():
    calls = []
    one = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 14, "workers": 1})
    four = resolve("cache_test", PRESETS, {"scale": "default", "seed": 14, "n": 1, "workers": 4})
    cached("weights", one, counting(calls), knobs=["n"])
    cached("weights", four, counting(calls), knobs=["n"])  # another scale and worker count, the same n
    assert len(calls) == 1
    cached("weights", four, counting(calls), knobs=["n", "workers"])
    assert len(calls) == 2


def test_a_computation_that_reads_a_knob_its_key_omits_is_refused_and_never_cached(monkeypatch):
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 15})

    def reads_n_and_workers():
        return {"w": torch.tensor([float(settings.n), float(settings.workers)])}

    monkeypatch.setenv("MLSYSREPRO_STRICT_KEYS", "1")
    with pytest.raises(cache_module.IncompleteKey, match=r"read the knobs \['n'\], which its key omits"):
        cached("unkeyed", settings, reads_n_and_workers, knobs=[])
    assert not cache_path("unkeyed", settings, []).exists()
    monkeypatch.delenv("MLSYSREPRO_STRICT_KEYS")
    with pytest.warns(UserWarning, match="not cached"):
        value = cached("unkeyed", settings, reads_n_and_workers, knobs=[])
    assert value["w"].tolist() == [1.0, 1.0] and not cache_path("unkeyed", settings, []).exists()
    cached("unkeyed", settings, reads_n_and_workers, knobs=["n"])  # workers says how, never what: unkeyed
    assert cache_path("unkeyed", settings, ["n"]).exists()


def test_a_computation_reads_what_the_computations_it_calls_read(monkeypatch):
    monkeypatch.setenv("MLSYSREPRO_STRICT_KEYS", "1")
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 16})

    def inner():
        return {"n": torch.tensor(float(settings.n))}

    def outer():  # its result depends on n through inner's, so its key must hold n too
        return {"twice": 2 * cached("inner", settings, inner, knobs=["n"])["n"]}

    with pytest.raises(cache_module.IncompleteKey, match="'outer'"):
        cached("outer", settings, outer, knobs=[])
    assert cached("outer", settings, outer, knobs=["n"])["twice"].item() == 2.0


def test_an_unknown_knob_is_named():
    settings = resolve("cache_test", PRESETS, {"scale": "smoke"})
    with pytest.raises(ValueError, match=r"knobs \['m'\] are not parameters of cache_test; "
                                         r"parameters: \['n', 'workers'\]"):
        cached("weights", settings, counting([]), knobs=["m"])


def test_use_cache_false_recomputes_and_overwrites():
    calls = []
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 15})
    cached("weights", settings, counting(calls), knobs=["n"])
    fresh = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 15, "use_cache": False})
    second = cached("weights", fresh, counting(calls), knobs=["n"])
    assert len(calls) == 2 and torch.equal(second["w"], torch.arange(3.0) * 2)
    assert torch.equal(cached("weights", settings, counting(calls), knobs=["n"])["w"], second["w"])
    assert not list(cache_path("weights", settings, ["n"]).parent.glob("*.tmp"))


def test_use_cache_false_recomputes_once_per_process_then_reads_its_own_entry(monkeypatch):
    from mlsysrepro.core import cache

    calls = []
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 23})
    cached("weights", settings, counting(calls), knobs=["n"])  # an entry from "before"
    monkeypatch.setattr(cache, "_WRITTEN", set())  # a new process: it wrote nothing yet
    fresh = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 23, "use_cache": False})
    cached("weights", fresh, counting(calls), knobs=["n"])
    cached("weights", fresh, counting(calls), knobs=["n"])
    assert len(calls) == 2, "the old entry is recomputed once, then this process's own is read"


def _entry(calls, seed):
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": seed})
    cached("weights", settings, counting(calls), knobs=["n"])
    return settings, cache_path("weights", settings, ["n"])


def test_a_flipped_byte_is_caught_and_recomputed_with_a_warning_naming_the_file():
    calls = []
    settings, path = _entry(calls, 16)
    blob = bytearray(path.read_bytes())
    blob[-40] ^= 0x01  # one bit of the payload
    path.write_bytes(bytes(blob))
    with pytest.warns(UserWarning, match=f"cache entry {path} is not usable .*SHA-256 does not match"):
        value = cached("weights", settings, counting(calls), knobs=["n"])
    assert len(calls) == 2 and torch.equal(value["w"], torch.arange(3.0) * 2)  # the fresh value, not the corrupt one
    assert torch.equal(read_entry(path)["w"], value["w"])  # and the entry is whole again


def test_a_cache_that_cannot_be_written_keeps_the_result_and_warns_once_with_the_path(monkeypatch):
    import warnings

    def full_disk(path, value):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_module, "write_entry", full_disk)
    monkeypatch.setattr(cache_module, "_WARNED_UNWRITABLE", False)
    calls = []
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 23})
    path = cache_path("unwritable", settings, ["n"])
    with pytest.warns(UserWarning, match=f"cannot write the cache entry {path} .*No space left on device"):
        value = cached("unwritable", settings, counting(calls), knobs=["n"])
    assert len(calls) == 1 and torch.equal(value["w"], torch.arange(3.0))  # the run keeps what it computed
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process: a second entry that fails is silent
        assert torch.equal(cached("unwritable too", settings, counting(calls), knobs=["n"])["w"], torch.arange(3.0) * 2)
    assert not path.exists()


def test_a_truncated_entry_is_recomputed():
    calls = []
    settings, path = _entry(calls, 17)
    path.write_bytes(path.read_bytes()[:50])
    with pytest.warns(UserWarning, match=f"cache entry {path} is not usable"):
        cached("weights", settings, counting(calls), knobs=["n"])
    assert len(calls) == 2


class _Planted:
    def __reduce__(self):
        return (shutil.rmtree, ("/nonexistent/planted",))


def test_a_planted_pickle_with_a_valid_hash_is_never_run(monkeypatch):
    """An entry written by someone else, with a correct header, still loads only as tensors and plain data."""
    calls, ran = [], []
    settings, path = _entry(calls, 18)
    monkeypatch.setattr(cache_module, "encode", lambda value: value)  # write the object itself, as torch.save would
    cache_module.write_entry(path, {"w": _Planted()})
    monkeypatch.undo()
    monkeypatch.setattr(shutil, "rmtree", lambda *args: ran.append(args))  # what loading it unsafely would call
    with pytest.warns(UserWarning, match="does not load as plain data"):
        cached("weights", settings, counting(calls), knobs=["n"])
    assert ran == [] and len(calls) == 2


def test_frames_series_and_arrays_round_trip_exactly():
    frame = pd.DataFrame({"graph": ["a", "b", None], "k": [1, 2, 3], "x": [0.5, np.nan, 2.0],
                          "ok": [True, False, True]})
    wide = frame.set_index(["graph", "k"])
    value = (frame, wide, wide.x, OrderedDict(w=torch.ones(2)), np.arange(6.0).reshape(2, 3), [np.int64(3), "s"])
    back = decode(torch.load(_saved(encode(value)), weights_only=True))
    pd.testing.assert_frame_equal(back[0], frame, check_exact=True)
    pd.testing.assert_frame_equal(back[1], wide, check_exact=True)
    pd.testing.assert_series_equal(back[2], wide.x, check_exact=True)
    assert isinstance(back[3], OrderedDict) and torch.equal(back[3]["w"], torch.ones(2))
    assert np.array_equal(back[4], value[4]) and back[5] == [3, "s"] and isinstance(back, tuple)
    with pytest.raises(TypeError, match="cannot cache a set"):
        encode({1, 2})


def _saved(value):
    import io

    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return buffer


def test_the_code_hash_follows_the_modules_a_producer_imports(tmp_path, monkeypatch):
    """Editing the template's module or a module it imports changes its key; editing another paper's does not."""
    package = tmp_path / "mlsysrepro"
    shutil.copytree(cache_module.PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache_module, "PACKAGE_DIR", package)
    template = "mlsysrepro.papers.template"

    def fresh():  # read at call time: no cache to clear, as in a live kernel after an edit
        return source_hash(template)

    before = fresh()
    (package / "papers" / "dally.py").write_text((package / "papers" / "dally.py").read_text() + "\n# an edit\n")
    assert fresh() == before
    edited = (package / "papers" / "template.py").read_text().replace("lr: float = 0.5", "lr: float = 0.4")
    (package / "papers" / "template.py").write_text(edited)
    after_template = fresh()
    assert after_template != before
    (package / "core" / "plots.py").write_text((package / "core" / "plots.py").read_text() + "\n# a new colour\n")
    assert fresh() == after_template  # a drawing module computes nothing a cache holds
    (package / "core" / "progress.py").write_text((package / "core" / "progress.py").read_text() + "\n# edit\n")
    assert fresh() != after_template  # the template imports core.progress
    after_progress = fresh()
    (package / "core" / "tasks.py").write_text((package / "core" / "tasks.py").read_text() + "\n# edit\n")
    assert fresh() != after_progress  # `from ..core import cached`: core's names load lazily, but their code is keyed


def test_core_loads_its_names_on_first_use_so_a_worker_never_loads_matplotlib():
    import subprocess
    import sys

    probe = ("import sys; import mlsysrepro.core.tasks, mlsysrepro.core.dist, mlsysrepro.core.claims; "
             "loaded = 'matplotlib' in sys.modules; import mlsysrepro.core.progress; "
             "from mlsysrepro.core import progress, style, Report; "
             "print(loaded, callable(progress), 'matplotlib' in sys.modules, Report.__module__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "True", "mlsysrepro.core.claims"]
    import mlsysrepro.core as core

    assert set(core.__all__) <= set(dir(core)) and all(getattr(core, name) is not None for name in core.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'plot'"):
        core.plot


def test_a_sweep_keeps_each_part_it_finished_and_computes_only_the_others_next_time():
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 31})
    asked = []

    def sweep(fail_at=None):
        def compute(missing):
            asked.append(list(missing))
            for i in missing:
                if i == fail_at:
                    raise RuntimeError("killed half-way")
                yield {"part": torch.tensor(float(10 * i))}
        return compute

    with pytest.raises(RuntimeError, match="killed half-way"):
        cached_parts("sweep", settings, sweep(fail_at=2), 4, knobs=["n"])
    values = cached_parts("sweep", settings, sweep(), 4, knobs=["n"])
    assert asked == [[0, 1, 2, 3], [2, 3]]  # parts 0 and 1 were kept from the run that stopped
    assert [v["part"].item() for v in values] == [0.0, 10.0, 20.0, 30.0]
    assert cached_parts("sweep", settings, sweep(), 4, knobs=["n"]) == values and len(asked) == 2
    folder = cache_path("sweep", settings, ["n"]).parent
    assert len(list(folder.glob(cache_path("sweep", settings, ["n"]).stem + "-*of4.pt"))) == 4


def test_a_sweep_that_reads_a_knob_its_key_omits_leaves_no_part_behind(monkeypatch):
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 32})

    def compute(missing):
        for i in missing:
            yield {"part": torch.tensor(float(settings.n if i == 2 else i))}  # part 2 reads n

    monkeypatch.setenv("MLSYSREPRO_STRICT_KEYS", "1")
    with pytest.raises(cache_module.IncompleteKey, match="'sweep'"):
        cached_parts("sweep", settings, compute, 3, knobs=[])
    stem = cache_path("sweep", settings, []).stem
    assert not list(cache_path("sweep", settings, []).parent.glob(stem + "-*")), "parts 0 and 1 must go too"


def test_a_sweep_that_yields_too_few_parts_is_an_error():
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 33})
    with pytest.raises(RuntimeError, match="yielded 1 parts for the 2 asked for"):
        cached_parts("short", settings, lambda missing: iter([{"part": torch.zeros(1)}]), 2, knobs=["n"])
