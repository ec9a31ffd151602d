import math

import pandas as pd
import pytest
import torch

from mlsysrepro.core.settings import resolve
from mlsysrepro.papers import structured_dropout
from mlsysrepro.sparsity.masks import kept_count
from mlsysrepro.recurrent.reference import TorchTagger
from mlsysrepro.text.corpora import load_ptb
from mlsysrepro.recurrent.training import train_lm


def settings(**changes):
    return resolve("structured_dropout", structured_dropout.PRESETS, {"scale": "smoke", "use_cache": False, **changes})


def test_fig1_masks_show_the_sharing_of_each_case():
    masks = structured_dropout.mask_cases(steps=5, batch=6, hidden=20, p=0.5, seed=1)
    structured, fixed, locked = masks["structured (III)"], masks["fixed (IV)"], masks["locked (II)"]
    assert torch.equal(structured, structured[:, :1].expand_as(structured))  # whole columns
    assert not torch.equal(structured[0], structured[1])  # re-drawn every step
    assert torch.equal(fixed, fixed[:1, :1].expand_as(fixed))
    assert torch.equal(locked, locked[:1].expand_as(locked)) and not torch.equal(locked[:, 0], locked[:, 1])


def test_the_accuracy_table_is_the_mean_and_std_over_seeds():
    results = pd.DataFrame({"task": ["ptb"] * 3, "mode": ["standard (I)"] * 3, "seed": [0, 1, 2],
                            "valid": [100.0, 110.0, 120.0], "test": [90.0, 90.0, 96.0]})
    row = structured_dropout.accuracy_table(results).iloc[0]
    assert row["valid mean"] == 110.0 and row["valid std"] == pytest.approx(10.0)
    assert row["test mean"] == 92.0 and row["test std"] == pytest.approx(math.sqrt(12.0))


def test_without_dropout_every_mode_trains_the_same_model():
    """At p = 0 the modes differ in nothing but their (absent) masks, so each seed gives identical metrics:
    the runs draw all their randomness from their own seed, whatever process runs them."""
    results, curves = structured_dropout.accuracy_runs(settings(p=0.0, ptb_fraction=0.002, conll_fraction=0.005,
                                               conll_eval_sentences=50), workers=2)
    for task, group in results.groupby("task"):
        assert len(group) == len(structured_dropout.ACCURACY_MODES)
        assert group.test.nunique() == 1 and group.valid.nunique() == 1, task
    assert set(curves.epoch) == {1}


def test_speed_rows_are_ratios_to_standard_dropout_in_the_same_table():
    s = settings(speed_ps=[0.5], speed_batches=[2, 3], speed_hidden=8, speed_tagger_hidden=4, speed_periods=[5])
    speed = structured_dropout.speed_table(s)
    assert (speed[speed.variant == "standard (I)"].speedup_vs_standard == 1.0).all()
    assert set(speed.variant) == {"standard (I)", "structured (III)", "structured (III), period 5", "fixed (IV)",
                                  "torch.nn.LSTM"}
    assert (speed[speed.variant == "torch.nn.LSTM"].ideal_speedup == 1.0).all()
    structured = speed[(speed.variant == "structured (III)") & (speed.task == "ptb")]
    assert (structured.ideal_speedup == 8 / kept_count(8, 0.5)).all()
    windows = math.ceil((load_ptb().train.numel() // 3 - 1) / s.bptt)
    row = speed[(speed.task == "ptb") & (speed.batch == 3)].iloc[0]
    assert row.epoch_s == pytest.approx(row.step_s * windows)
    assert set(speed[speed.task == "ptb"].batch) == {2, 3}


def test_the_torch_tagger_ignores_padding():
    """A sentence's tag scores do not change when it is padded next to a longer sentence (packed sequences)."""
    torch.manual_seed(0)
    model = TorchTagger(20, 5, embedding=6, hidden=7, p=0.5).eval()
    short = torch.tensor([[3], [4], [5]])
    alone = model(short, torch.tensor([3]))
    padded = torch.cat([short, torch.zeros(2, 1, dtype=torch.long)])
    batch = torch.cat([padded, torch.randint(1, 20, (5, 1))], 1)
    together = model(batch, torch.tensor([3, 5]))
    assert torch.allclose(alone[:, 0], together[:3, 0], atol=1e-6)


def test_an_unknown_optimizer_is_rejected():
    with pytest.raises(ValueError, match="optimizer must be one of"):
        train_lm(None, torch.zeros(4, 2, dtype=torch.long), None, 1, torch.Generator(), optimizer="lbfgs")


def test_translation_is_off_below_paper_scale_and_says_what_it_needs(monkeypatch):
    assert structured_dropout.translation_runs(settings()) is None
    monkeypatch.setattr(structured_dropout, "load_registry", lambda: {})
    with pytest.raises(structured_dropout.DatasetError,
                       match="'iwslt14_de_en'.*prepare-iwslt14.sh.*'iwslt15_en_vi'.*Stanford"):
        structured_dropout.translation_runs(settings(translation=True))
    monkeypatch.setattr(structured_dropout, "load_registry", lambda: {"iwslt15_en_vi": None})
    with pytest.raises(structured_dropout.DatasetError) as missing:
        structured_dropout.translation_runs(settings(translation=True))
    assert "iwslt14_de_en" in str(missing.value) and "iwslt15_en_vi" not in str(missing.value)


@pytest.mark.parametrize("pairs", [["fr-en"], []])
def test_the_translation_pairs_name_their_allowed_values(pairs):
    with pytest.raises(ValueError, match=r"parameter 'mt_pairs' must be a non-empty list of \['de-en', 'en-vi'\]"):
        structured_dropout.translation_runs(settings(mt_pairs=pairs))


def test_a_translation_run_reports_dev_and_test_bleu(tmp_path, monkeypatch):
    """The whole IWSLT path on a tiny parallel corpus in De-En's file layout (targets = reversed sources)."""
    g = torch.Generator().manual_seed(0)
    words = "a b c d e f".split()
    for split, n in zip(structured_dropout.IWSLT["de-en"].splits, (300, 20, 20)):
        sources = [[words[i] for i in torch.randint(6, (4,), generator=g).tolist()] for _ in range(n)]
        (tmp_path / f"{split}.de").write_text("\n".join(" ".join(s) for s in sources))
        (tmp_path / f"{split}.en").write_text("\n".join(" ".join(w.upper() for w in reversed(s)) for s in sources))
    monkeypatch.setattr(structured_dropout, "fetch", lambda name: tmp_path if name == "iwslt14_de_en" else None)
    knobs = {"seeds": 1, "p": 0.1, "mt_hidden": 16, "mt_epochs": 2, "mt_batch": 16, "device": "cpu"}
    out = structured_dropout._train_translation(structured_dropout.Task("de-en", "structured", 0, knobs))
    assert [row["epoch"] for row in out["curve"]] == [1, 2]
    assert 0.0 <= out["test"] <= 100.0 and out["valid"] == out["curve"][-1]["metric"]


def test_the_device_knob_names_its_allowed_values():
    assert structured_dropout.check_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"parameter 'device' must be one of \['cpu', 'cuda'\]"):
        structured_dropout.check_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no GPU"):
            structured_dropout.check_device("cuda")
