"""The notebook's bookkeeping: the search keeps the lowest calibration perplexity (ties to uniform), undefined
allocator x policy pairs are skipped, bad choices are named."""

import pandas as pd
import pytest

from mlsysrepro.core import resolve
from mlsysrepro.core.cache import cache_key
from mlsysrepro.papers import baklava


def test_the_search_keeps_the_lowest_calibration_perplexity_and_breaks_ties_towards_uniform():
    search = pd.DataFrame([(0.7, "h2o", 0.0, 0.0, 5.0), (0.7, "h2o", 1.0, 0.0, 4.0), (0.7, "h2o", 2.0, 1.0, 4.5),
                           (0.9, "h2o", 0.0, 0.0, 6.0), (0.9, "h2o", 1.0, 0.0, 6.0)],
                          columns=["compression", "policy", "gamma", "layer_exponent", "calib_ppl"])
    best = baklava.chosen(search)
    assert best.loc[(0.7, "h2o"), "gamma"] == 1.0
    assert best.loc[(0.9, "h2o"), "gamma"] == 0.0  # a tie: gamma 0 (uniform) came first


def test_adakv_is_not_paired_with_streamingllm():
    settings = resolve("baklava", baklava.PRESETS, {"scale": "smoke"})
    pairs = baklava.pairs(settings)
    assert ("streamingllm", "adakv") not in pairs and ("snapkv", "adakv") in pairs
    assert ("snapkv", "reversed") in pairs  # the control is evaluated beside every method
    settings = settings.with_values(policies=["streamingllm", "snapkv"])
    assert len(baklava.pairs(settings)) == 2 * 6 - 1


def test_evaluation_caches_ignore_the_speed_knobs():
    a = resolve("baklava", baklava.PRESETS, {"scale": "smoke"})
    b = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "speed_context": 64, "decode_workers": 1})
    c = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "floor": 2})
    d = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "models": 5})  # model i's evaluations stay valid

    def key(settings):
        return cache_key("quality_grid", settings, baklava.EVALUATION_KNOBS)

    assert key(a) == key(b) == key(d) != key(c)


def test_unknown_choices_are_named():
    settings = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "tokenizer": "words"})
    with pytest.raises(ValueError, match="tokenizer must be"):
        baklava.make_tokenizer(settings, {"x": {"train": "ab"}})
