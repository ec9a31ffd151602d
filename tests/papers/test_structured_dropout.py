import json
import math

import pandas as pd
import pytest
import torch

from mlsysrepro.core.settings import resolve
from mlsysrepro.papers import structured_dropout
from mlsysrepro.sparsity.compaction import KERNELS
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


def test_the_language_model_drops_at_its_own_rate_and_the_control_at_none():
    knobs = {"p": 0.5, "ptb_p": 0.3}
    rate = {(task, mode): structured_dropout._dropout(structured_dropout.Task(task, mode, 0, knobs), knobs)
            for task in ("ptb", "conll") for mode in ("none", "structured")}
    assert rate == {("ptb", "none"): (0.0, "standard"), ("ptb", "structured"): (0.3, "structured"),
                    ("conll", "none"): (0.0, "standard"), ("conll", "structured"): (0.5, "structured")}


def test_without_dropout_every_mode_trains_the_same_model():
    """At p = 0 the modes differ in nothing but their (absent) masks, so each seed gives identical metrics:
    the runs draw all their randomness from their own seed, whatever process runs them."""
    results, curves = structured_dropout.accuracy_runs(settings(p=0.0, ptb_p=0.0, ptb_fraction=0.002,
                                                                conll_fraction=0.005, conll_eval_sentences=50),
                                                       workers=2)
    for (task, seed), group in results.groupby(["task", "seed"]):
        assert len(group) == len(settings().modes)  # at p = 0 the control is standard dropout too
        assert group.test.nunique() == 1 and group.valid.nunique() == 1, (task, seed)
    for task, seeds in (("ptb", settings().seeds), ("conll", settings().conll_seeds)):
        assert results[results.task == task].seed.nunique() == seeds
    assert set(curves.epoch) == {1}
    ptb = results[results.task == "ptb"]
    assert (ptb.held_in > 1).all() and (ptb.held_in != ptb.valid).all()  # scored on training text, not validation


@pytest.mark.parametrize("modes", [["standard", "structured"], ["none", "standard", "structured", "bogus"],
                                   ["none", "standard", "structured", "standard"]])
def test_the_modes_knob_names_its_allowed_values(modes):
    with pytest.raises(ValueError, match="parameter 'modes'"):
        structured_dropout.check_modes(modes)


def test_speed_rows_are_ratios_to_standard_dropout_in_the_same_table():
    s = settings(speed_ps=[0.5], speed_batches=[2, 3], speed_hidden=8, speed_tagger_hidden=4, speed_periods=[5])
    speed = structured_dropout.speed_table(s)
    assert (speed[speed.variant == "standard (I)"].speedup_vs_standard == 1.0).all()
    # the speed-up is the median per-round ratio, inside its interval
    assert ((speed.speedup_low <= speed.speedup_vs_standard) & (speed.speedup_vs_standard <= speed.speedup_high)).all()
    # and against torch.nn.LSTM, timed in the same rounds
    assert (speed[speed.variant == "torch.nn.LSTM"].vs_torch == 1.0).all()
    assert ((speed.vs_torch_low <= speed.vs_torch) & (speed.vs_torch <= speed.vs_torch_high)).all()
    kernels = {structured_dropout.kernel_label(kernel) for kernel in KERNELS}
    assert set(speed.variant) == {"standard (I)", "structured (III), period 5", "fixed (IV)", "torch.nn.LSTM"} | kernels
    dense = speed[speed.variant == "structured (III), dense"]
    assert (dense.ideal_speedup == 1.0).all() and (dense.kernel == "dense").all()
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


CLAIMS = {claim.id: claim for claim in structured_dropout.CLAIMS}


def speed_frame(standard: tuple[float, float, float], structured: tuple[float, float, float], p=0.5, task="ptb",
                batch=20, dense: tuple[float, float, float] | None = None):
    """A speed table with standard dropout and case III's per-draw kernel (and its dense one), as (low, mid, high)
    step times; the speed-up's interval is what the step times' intervals allow."""
    timed = [("standard (I)", "", standard), ("structured (III)", "per-draw", structured)]
    timed += [("structured (III), dense", "dense", dense)] if dense else []
    return pd.DataFrame([dict(task=task, batch=batch, p=p, variant=variant, kernel=kernel, step_s=mid, step_low=low,
                              step_high=high, speedup_vs_standard=standard[1] / mid, speedup_low=standard[0] / high,
                              speedup_high=standard[2] / low)
                         for variant, kernel, (low, mid, high) in timed])


@pytest.mark.parametrize("structured, expected", [((0.70, 0.72, 0.74), "holds"), ((0.95, 1.0, 1.05), "fails"),
                                                  ((0.75, 0.81, 0.90), "inconclusive")])
def test_speedup_claim_carries_the_step_times_intervals(structured, expected):
    from mlsysrepro.core.claims import verdict

    measured = structured_dropout.speedup_claim(speed_frame((0.98, 1.0, 1.02), structured), "ptb", 0.5)
    assert measured.interval[0] <= measured.value <= measured.interval[1]
    assert verdict(CLAIMS["C1"], measured)[0] == expected


def test_the_speed_claims_read_the_fastest_kernel():
    speed = speed_frame((0.98, 1.0, 1.02), (1.2, 1.3, 1.4), dense=(0.9, 0.95, 1.0))
    assert structured_dropout.fastest_kernel(speed, "ptb", 0.5) == "structured (III), dense"
    assert structured_dropout.speedup_claim(speed, "ptb", 0.5).value == pytest.approx(1 / 0.95)
    per_draw = structured_dropout.speedup_claim(speed, "ptb", 0.5, variant="structured (III)")
    assert per_draw.value == pytest.approx(1 / 1.3)


def test_gpu_claims_are_not_testable_without_a_gpu_measurement_and_judged_on_it_with_one(tmp_path, monkeypatch):
    from mlsysrepro.core.claims import verdict

    cpu = speed_frame((0.98, 1.0, 1.02), (1.2, 1.3, 1.4))
    monkeypatch.setenv("MLSYSREPRO_GPU_RESULTS", str(tmp_path / "gpu_check.json"))
    assert structured_dropout.gpu_speed() is None
    outcome, why = verdict(CLAIMS["C1"], structured_dropout.gpu_claim(None, "ptb", 0.5, 20, cpu))
    assert outcome == "not testable here" and "GPU" in why and "0.77x" in why  # the CPU's value beside the reason
    gpu = speed_frame((0.0098, 0.01, 0.0102), (0.0070, 0.0072, 0.0074))
    (tmp_path / "gpu_check.json").write_text(json.dumps({
        "gpu": "Test GPU", "torch": "2", "cuda": "12", "date": "2026-12-01",
        "sections": {"structured_dropout_speed": gpu.to_dict("records")}}))
    measured = structured_dropout.gpu_claim(structured_dropout.gpu_speed(), "ptb", 0.5, 20, cpu)
    assert verdict(CLAIMS["C1"], measured)[0] == "holds" and "measured on Test GPU" in measured.note


def test_the_cpu_finding_needs_every_setting_below_the_papers_speedup():
    from mlsysrepro.core.claims import verdict

    slow = pd.concat([speed_frame((0.98, 1.0, 1.02), (1.0, 1.05, 1.1), batch=b) for b in (20, 64)]
                     + [speed_frame((0.98, 1.0, 1.02), (0.9, 0.95, 1.0), task="conll", batch=32)])
    measured = structured_dropout.cpu_finding(slow, 0.5)
    assert list(measured.per_setting) == ["ptb batch 20", "ptb batch 64", "conll batch 32"]
    assert verdict(CLAIMS["C7"], measured)[0] == "holds"
    one_fast = pd.concat([slow[slow.batch != 64], speed_frame((0.98, 1.0, 1.02), (0.70, 0.72, 0.74), batch=64)])
    assert verdict(CLAIMS["C7"], structured_dropout.cpu_finding(one_fast, 0.5))[0] == "fails"


def test_rate_trend_is_judged_on_speedups_against_the_ideal_on_a_gpu_only():
    from mlsysrepro.core.claims import verdict

    assert verdict(CLAIMS["C4"], structured_dropout.rate_trend(None, "ptb", [0.2, 0.5]))[0] == "not testable here"
    slower = pd.concat([speed_frame((1, 1, 1), (2 / s, 2 / s, 2 / s), p=p) for p, s in ((0.2, 1.0), (0.5, 1.5))])
    assert verdict(CLAIMS["C4"], structured_dropout.rate_trend(slower, "ptb", [0.2, 0.5]))[0] == "not testable here"
    growing = pd.concat([speed_frame((1, 1, 1), (1 / s,) * 3, p=p) for p, s in ((0.2, 1.1), (0.5, 1.3), (0.65, 1.6))])
    measured = structured_dropout.rate_trend(growing, "ptb", [0.2, 0.5, 0.65])
    assert verdict(CLAIMS["C4"], measured)[0] == "holds" and "ideal 2.00x" in measured.note
    falling = pd.concat([speed_frame((1, 1, 1), (1 / s,) * 3, p=p) for p, s in ((0.2, 1.6), (0.5, 1.3), (0.65, 1.1))])
    assert verdict(CLAIMS["C4"], structured_dropout.rate_trend(falling, "ptb", [0.2, 0.5, 0.65]))[0] == "fails"


def accuracy(task: str, by_mode: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([dict(task=task, mode=structured_dropout.LABELS[mode], seed=seed, test=value)
                         for mode, values in by_mode.items() for seed, value in enumerate(values)])


def test_parity_claims_pair_seeds_and_need_the_control_to_be_worse():
    from mlsysrepro.core.claims import verdict

    def judged(results, task, floor):
        floors = {"Kneser-Ney trigram": floor} if task == "ptb" else {"most frequent tag": floor}
        checks = {"learned": structured_dropout.learned(results, task, floors)}
        if task == "ptb":
            checks["control_overfits"] = 0.3
        return structured_dropout.parity_claim(results, task).given(**checks)

    matters = accuracy("ptb", {"none": [150, 152, 151], "standard": [100, 101, 99], "structured": [100.5, 101, 99.2]})
    measured = structured_dropout.parity_claim(matters, "ptb")
    assert measured.value == pytest.approx(((100.5 / 100) + 1 + (99.2 / 99)) / 3 - 1)
    assert verdict(CLAIMS["C5"], judged(matters, "ptb", 788.0))[0] == "holds"
    worse = accuracy("ptb", {"none": [150, 152, 151], "standard": [100, 101, 99], "structured": [110, 111, 109]})
    assert verdict(CLAIMS["C5"], judged(worse, "ptb", 788.0))[0] == "fails"
    undertrained = accuracy("ptb", {"none": [98, 99, 97], "standard": [100, 101, 99], "structured": [100, 101, 99]})
    assert verdict(CLAIMS["C5"], judged(undertrained, "ptb", 788.0))[0] == "not testable here"
    # models worse than a count-based model learned nothing a parity could be about: never "fails"
    unlearned = accuracy("ptb", {"none": [1500, 1520, 1510], "standard": [841, 900, 870], "structured": [950, 1119, 990]})
    floors = {"add-one unigram": 788.0, "Kneser-Ney trigram": 151.0}
    assert structured_dropout.learned(unlearned, "ptb", floors).value == pytest.approx(151 / 1119)  # the strongest
    result, why = verdict(CLAIMS["C5"], judged(unlearned, "ptb", 788.0))
    assert result == "not testable here" and "Kneser-Ney trigram 788.0" in why and "worst model's 1119.0" in why
    # a control that does not overfit leaves the parity untested, whatever the models learned
    not_overfitting = structured_dropout.parity_claim(matters, "ptb").given(
        learned=structured_dropout.learned(matters, "ptb", floors), control_overfits=0.02)
    assert verdict(CLAIMS["C5"], not_overfitting)[0] == "not testable here"
    f1 = accuracy("conll", {"none": [80, 81, 80], "standard": [85, 86, 85], "structured": [85, 85.9, 85.2]})
    assert verdict(CLAIMS["C6"], judged(f1, "conll", 41.8))[0] == "holds"
    assert verdict(CLAIMS["C6"], judged(f1, "conll", 85.1))[0] == "not testable here"  # below the baseline tagger
    assert structured_dropout.learned(f1, "conll", {"most frequent tag": 41.8}).value == pytest.approx(85 - 41.8)


def test_the_overfit_gap_is_validation_over_held_in_perplexity_per_seed():
    runs = pd.DataFrame({"task": "ptb", "mode": structured_dropout.LABELS["none"], "seed": [0, 1, 2],
                         "valid": [130.0, 132.0, 128.0], "held_in": [100.0, 110.0, 100.0], "test": 0.0})
    gap = structured_dropout.overfit_gap(runs)
    assert gap.value == pytest.approx((0.3 + 0.2 + 0.28) / 3)
    assert gap.interval[0] < gap.value < gap.interval[1]
    assert "held-in training text 103.3" in gap.note


def test_the_floors_are_the_count_based_models_and_the_most_frequent_tag_on_the_runs_data():
    from mlsysrepro.core import resolve

    settings = resolve("structured_dropout", structured_dropout.PRESETS, {"scale": "smoke"})
    ptb, conll = structured_dropout.floor_baseline(settings, "ptb"), structured_dropout.floor_baseline(
        settings, "conll")
    assert list(ptb) == ["add-one unigram", "Kneser-Ney bigram", "Kneser-Ney trigram"]
    assert 100 < ptb["add-one unigram"] < 10_000  # a unigram model is far from uniform over 10,000 words
    assert ptb["Kneser-Ney bigram"] < ptb["add-one unigram"]  # context helps, even on 0.5 % of PTB
    assert 5 < conll["most frequent tag"] < 80


def test_auto_forms_names_the_case_iii_shapes_the_auto_kernel_measured(monkeypatch):
    """One row per projection measured at p with a fresh mask every step; other rates and periods are left out."""
    from mlsysrepro.sparsity import gemm_timing

    monkeypatch.setattr(gemm_timing, "_FASTEST", {
        (35, 20, 650, 2600, 325, 1, torch.float32, "cpu"): ("dense", "dense", "per-draw"),
        (35, 20, 650, 10000, 325, 1, torch.float32, "cpu"): ("per-draw", "batched", "dense"),
        (35, 20, 650, 2600, 520, 1, torch.float32, "cpu"): ("per-draw",) * 3,  # p = 0.2
        (35, 20, 650, 2600, 325, 5, torch.float32, "cpu"): ("per-draw",) * 3,  # period 5
    })
    table = structured_dropout.auto_forms(settings(p=0.5))
    assert table.projection.tolist() == ["35x20x650 -> 2600", "35x20x650 -> 10000"]
    assert table.iloc[1][["forward", "backward-data", "backward-weight"]].tolist() == ["per-draw", "batched", "dense"]


@pytest.mark.parametrize("name, value", [("ptb_optimizer", "lbfgs"), ("ptb_schedule", "cosine"),
                                         ("conll_schedule", "step")])
def test_an_unknown_recipe_is_rejected_naming_its_parameter(name, value):
    with pytest.raises(ValueError, match=f"parameter '{name}' must be one of"):
        structured_dropout.accuracy_runs(settings(**{name: value}))
