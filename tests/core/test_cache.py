import torch

from mlsysrepro.core import cached, resolve
from mlsysrepro.core.cache import cache_path

PRESETS = {"smoke": dict(n=1), "default": dict(n=2), "paper": dict(n=3)}


def counting(calls):
    def compute():
        calls.append(1)
        return {"w": torch.arange(3.0) * len(calls)}

    return compute


def test_second_call_loads_instead_of_computing():
    calls = []
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 11})
    first = cached("weights", settings, counting(calls))
    again = cached("weights", settings, counting(calls))
    assert len(calls) == 1 and torch.equal(first["w"], again["w"])
    assert cache_path("weights", settings).exists()


def test_other_settings_or_version_recompute():
    calls = []
    a = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 12})
    b = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 12, "n": 5})
    cached("weights", a, counting(calls))
    cached("weights", b, counting(calls))
    cached("weights", a, counting(calls), version=2)
    assert len(calls) == 3


def test_use_cache_false_recomputes_and_overwrites():
    calls = []
    settings = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 13})
    cached("weights", settings, counting(calls))
    fresh = resolve("cache_test", PRESETS, {"scale": "smoke", "seed": 13, "use_cache": False})
    second = cached("weights", fresh, counting(calls))
    assert len(calls) == 2 and torch.equal(second["w"], torch.arange(3.0) * 2)
    assert torch.equal(cached("weights", settings, counting(calls))["w"], second["w"])
    assert not list(cache_path("weights", settings).parent.glob("*.tmp"))
