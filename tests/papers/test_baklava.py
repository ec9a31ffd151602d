"""The notebook's bookkeeping: the search keeps the lowest calibration perplexity (ties to uniform), undefined
allocator x policy pairs are skipped, bad choices are named, the context-use check cuts the context it says."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from mlsysrepro.core import resolve
from mlsysrepro.core.cache import cache_key
from mlsysrepro.core.tasks import TaskRunner
from mlsysrepro.kvcache.cache import FullCache
from mlsysrepro.kvcache.evaluation import continuation_nll
from mlsysrepro.papers import baklava
from mlsysrepro.transformer.llama import Llama, LlamaConfig


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
    b = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "speed_context": 64, "workers": 1})
    c = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "floor": 2})
    d = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "models": 5})  # model i's evaluations stay valid

    def key(settings):
        return cache_key("quality_grid", settings, baklava.EVALUATION_KNOBS)

    assert key(a) == key(b) == key(d) != key(c)


def test_unknown_choices_are_named():
    settings = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "tokenizer": "words"})
    with pytest.raises(ValueError, match="tokenizer must be"):
        baklava.make_tokenizer(settings, {"x": {"train": "ab"}})


def test_context_use_reads_only_the_last_tokens_of_each_context():
    """The power check ``uses_context`` really cuts the context: each row equals the continuation's NLL read after
    the last ``kept`` tokens alone, and the uncut row after the whole context."""
    settings = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "use_cache": False})
    torch.manual_seed(0)
    model = Llama(LlamaConfig(vocab=32, dim=32, layers=1, heads=2, kv_heads=1, ffn=64)).eval()
    windows = torch.randint(0, 32, (3, settings.length))
    lab = baklava.Lab(settings, model, None, {}, [], 0.0, windows, windows, None, None, TaskRunner(1))
    use = baklava.context_use(lab)
    assert list(use.compression) == [0.0] + list(settings.compressions)
    assert list(use.kept) == [lab.context] + [round((1 - c) * lab.context) for c in settings.compressions]
    for row in use.itertuples():
        with torch.no_grad():
            expected = continuation_nll(model, windows[:, lab.context - row.kept:], row.kept, FullCache).mean(1)
        assert np.allclose(row.nll, expected.numpy(), atol=1e-5)
    assert use.ppl.iloc[0] != use.ppl.iloc[-1]  # a random model still reads its context


def test_a_hand_built_lab_is_not_served_the_entries_of_the_run_it_imitates(tmp_path, monkeypatch):
    """An evaluation is cached under its settings, its seed and a digest of what it reads: a second model under
    the same settings and seed computes its own context use (the cache of the first would serve the first's), and
    the same model reads its entries back with the cache on."""
    monkeypatch.setenv("MLSYSREPRO_CACHE_DIR", str(tmp_path))
    settings = resolve("baklava", baklava.PRESETS, {"scale": "smoke"})
    windows = torch.randint(0, 32, (3, settings.length), generator=torch.Generator().manual_seed(0))

    def lab(model_seed):
        torch.manual_seed(model_seed)
        model = Llama(LlamaConfig(vocab=32, dim=32, layers=1, heads=2, kv_heads=1, ffn=64)).eval()
        return baklava.Lab(settings, model, None, {}, [], 0.0, windows, windows, None, None, TaskRunner(1))

    first, second = baklava.context_use(lab(0)), baklava.context_use(lab(1))
    assert not np.allclose(first.ppl, second.ppl)
    assert np.array_equal(baklava.context_use(lab(0)).ppl, first.ppl)
    assert len(list(tmp_path.rglob("context_use-*.pt"))) == 2 * len(first)
    task = baklava.EvalTask(lab(0).cfg, lab(0).model.state_dict(), "ppl", windows, 8)
    assert baklava.inputs_digest([task]) == baklava.inputs_digest([task])
    assert baklava.inputs_digest([task]) != baklava.inputs_digest([replace(task, context=9)])


def test_the_context_cost_is_the_cut_context_over_the_whole_one_per_model():
    use = pd.DataFrame(dict(model=[0, 0, 0, 1, 1, 1], compression=[0.0, 0.5, 0.9] * 2, kept=[100, 50, 10] * 2,
                            ppl=[10.0, 10.5, 12.0, 20.0, 20.0, 20.2]))
    cost = baklava.context_cost(use)
    assert cost.per_setting == pytest.approx({"model 0": 0.2, "model 1": 0.01})
    assert cost.note == "context cut to its last 10 of 100 tokens: model 0 +20.0%, model 1 +1.0%"


def test_the_answer_loss_is_the_log_loss_of_the_answer_digits_read_after_the_query():
    """The ablation's ground truth (``answer_nll``): with the full cache, each query's mean NLL of its
    ``VALUE_DIGITS`` answer digits, as one causal pass over the sequence gives it; a shrunk cache changes it."""
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab=32, dim=32, layers=1, heads=2, kv_heads=1, ffn=64)
    model = Llama(cfg).eval()
    tokens, context, answer_start = torch.randint(0, 32, (3, 40)), 30, 34
    shrunk = baklava.allocators.Allocation(torch.full((1, 1), 2))
    task = baklava.EvalTask(cfg, model.state_dict(), "answer_nll", tokens, context, answer_start, (None, shrunk))
    full, small = baklava._run(task)
    end = answer_start + baklava.VALUE_DIGITS
    with torch.no_grad():
        logits = model(tokens[:, :end - 1])[:, answer_start - 1:]
    expected = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tokens[:, answer_start:end],
                                                 reduction="none").mean(1)
    assert full.shape == (3,) and torch.allclose(full, expected, atol=1e-5)
    assert not torch.allclose(small, full)


def test_a_model_trains_to_the_same_weights_in_a_worker_as_in_this_process():
    """Training runs on one thread wherever it runs, so a worker and this process give the same bits, whatever
    the core count; two seeds give two models, each cached."""
    from mlsysrepro.transformer.retrieval import TASK_ALPHABET
    from mlsysrepro.transformer.tokenizer import CharTokenizer

    settings = resolve("baklava", baklava.PRESETS, {"scale": "smoke", "use_cache": False, "layers": 1, "dim": 32,
                                                    "ffn": 64, "length": 128, "curriculum_length": 64, "steps": 3,
                                                    "curriculum_steps": 2})
    tokenizer = CharTokenizer("the cat sat on a mat. " + TASK_ALPHABET)
    train_ids = [tokenizer.encode("the cat sat on a mat. " * 400)]
    tasks = [baklava.TrainingTask(replace(settings, seed=seed), tokenizer, train_ids) for seed in (0, 1)]
    with TaskRunner(2) as workers:
        there = workers.map(baklava._trained, tasks)
    here = TaskRunner(1).map(baklava._trained, tasks)
    for a, b in zip(there, here):
        assert a["losses"] == b["losses"] and len(a["losses"]) == 5
        assert all(torch.equal(a["state"][name], b["state"][name]) for name in a["state"])
    assert there[0]["losses"] != there[1]["losses"]
    # a later run reads them here, without starting workers, unless told not to use the cache
    assert not baklava._untrained(replace(tasks[0].settings, use_cache=True)) and baklava._untrained(tasks[0].settings)
    assert baklava._untrained(replace(tasks[0].settings, use_cache=True, seed=2))
