import pytest
import torch

from mlsysrepro.core import cached, resolve
from mlsysrepro.core.cache import cache_path

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


def test_a_listed_knob_the_seed_or_the_version_recompute():
    calls = []
    a = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 12})
    b = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 12, "n": 5})
    c = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 13})
    for settings in (a, b, c):
        cached("weights", settings, counting(calls), knobs=["n"])
    cached("weights", a, counting(calls), knobs=["n"], version=2)
    assert len(calls) == 4


def test_a_knob_left_out_of_the_list_never_invalidates_the_cache():
    calls = []
    one = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 14, "workers": 1})
    four = resolve("cache_test", PRESETS, {"scale": "default", "seed": 14, "n": 1, "workers": 4})
    cached("weights", one, counting(calls), knobs=["n"])
    cached("weights", four, counting(calls), knobs=["n"])  # another scale and worker count, the same n
    assert len(calls) == 1
    cached("weights", four, counting(calls), knobs=["n", "workers"])
    assert len(calls) == 2


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
