"""AsymVLM's claim measurements on frames built by hand: the matched saving interpolates where accuracy leaves the
tolerance, a method that wins gives a positive margin and its best rival a negative one, the text margin compares
with the better rival per budget, and the trained model's cache ignores the experiments' knobs."""

import numpy as np
import pandas as pd
import pytest

from mlsysrepro.core import resolve
from mlsysrepro.core.cache import cache_key
from mlsysrepro.core.claims import verdict
from mlsysrepro.papers import asymvlm

CLAIMS = {claim.id: claim for claim in asymvlm.CLAIMS}


def settings(**overrides):
    return resolve("asymvlm", asymvlm.PRESETS, {"scale": "smoke", "resamples": 50, **overrides}, asymvlm.RANGES)


def test_matched_saving_interpolates_where_accuracy_leaves_the_tolerance():
    # full 0.9, tolerance 0.02: the floor 0.88 is crossed halfway between 0.3 (0.9) and 0.5 (0.86)
    assert asymvlm.matched_saving({0.3: 0.9, 0.5: 0.86, 0.7: 0.5}, 0.9, 0.02) == pytest.approx(0.4)
    assert asymvlm.matched_saving({0.3: 0.95, 0.5: 0.9}, 0.9, 0.02) == 0.5  # never below: the largest target
    assert asymvlm.matched_saving({0.3: 0.5}, 0.9, 0.02) == pytest.approx(0.3 * 0.02 / 0.4)  # from 0 saved at full


def frontier(accuracies: dict[str, dict[float, float]], families=("cell", "count"), n=200) -> pd.DataFrame:
    """Items whose correctness gives exactly each (method, target) accuracy, on every family."""
    rows = []
    for family in families:
        for method, curve in accuracies.items():
            for target, acc in curve.items():
                correct = np.arange(n) < round(acc * n)
                rows += [dict(method=method, target=target, family=family, item=i, correct=bool(c), saving=target,
                              kept=1) for i, c in enumerate(correct)]
    return pd.DataFrame(rows)


def test_the_winner_has_a_positive_margin_and_its_best_rival_a_negative_one():
    curves = {"none": {0.0: 0.9}, "asymvlm": {0.3: 0.9, 0.54: 0.9, 0.75: 0.7},
              **{b: {0.3: 0.9, 0.54: 0.7, 0.75: 0.5} for b in asymvlm.BASELINES}}
    front = frontier(curves)
    c1 = asymvlm.matched_saving_margin(front, settings(), ["cell", "count"])
    assert c1.value > 0.1 and c1.interval[0] > 0 and set(c1.per_setting) == {"cell", "count"}
    assert c1.baseline.value < 0
    c2 = asymvlm.gap_over_best(front, settings(), ["cell", "count"])
    assert c2.value == pytest.approx(0.2) and c2.baseline.value == pytest.approx(-0.2)


def test_the_parity_control_measures_pruning_against_none():
    curves = {"none": {0.0: 0.9}, "asymvlm": {0.54: 0.8}, "random": {0.54: 0.5},
              **{b: {0.54: 0.8} for b in asymvlm.BASELINES}}
    c3 = asymvlm.gap_over_best(frontier(curves), settings(), ["count"], absolute=True, control=("random", "none"))
    assert c3.value == pytest.approx(0.0) and c3.baseline.value == pytest.approx(0.4)  # |gap|: the control fails the rule


def test_the_text_margin_is_against_the_better_rival_per_budget():
    rows = []
    for policy, accs in {"temporal_threshold": [0.8, 0.9], "h2o": [0.6, 0.85], "streamingllm": [0.3, 0.4]}.items():
        for budget, acc in zip([4, 8], accs):
            rows += [dict(policy=policy, budget=budget, item=i, correct=i < acc * 100) for i in range(100)]
    margin = asymvlm.eviction_margin(pd.DataFrame(rows), settings(text_budgets=[4, 8]))
    assert margin.per_setting == pytest.approx({"4 text tokens": 0.2, "8 text tokens": 0.05})
    assert margin.baseline.note == "better rival: h2o" and margin.baseline.value < 0


def test_the_power_checks_measure_the_room_a_method_could_gain():
    curves = {"none": {0.0: 0.9}, "asymvlm": {0.54: 0.8}, "oracle": {0.54: 0.81},
              **{b: {0.54: 0.8} for b in asymvlm.BASELINES}}
    room = asymvlm.oracle_headroom(frontier(curves), settings(), ["cell", "count"])
    assert room.value == pytest.approx(0.01) and room.baseline is None  # less than C2's two points: not testable
    c2 = asymvlm.gap_over_best(frontier(curves), settings(), ["cell", "count"]).given(headroom=room)
    assert verdict(CLAIMS["C2"], c2)[0] == "not testable here"
    rows = [dict(policy="full cache", budget=0, item=i, correct=i < 89) for i in range(100)]
    for policy, accs in {"temporal_threshold": [0.88, 0.89], "h2o": [0.88, 0.89], "streamingllm": [0.3, 0.4]}.items():
        for budget, acc in zip([4, 8], accs):
            rows += [dict(policy=policy, budget=budget, item=i, correct=i < acc * 100) for i in range(100)]
    room = asymvlm.eviction_headroom(pd.DataFrame(rows), settings(text_budgets=[4, 8]))
    assert room.value == pytest.approx(0.005) and "full cache 0.89" in room.note


def test_flops_mismatch_is_the_largest_gap_to_the_target():
    front = pd.DataFrame([dict(method="fastv", target=0.5, saving=0.52), dict(method="fastv", target=0.5, saving=0.5),
                          dict(method="asymvlm", target=0.5, saving=0.45), dict(method="none", target=0.0, saving=0)])
    assert asymvlm.flops_mismatch(front) == pytest.approx(0.05)


def test_the_trained_model_is_keyed_by_its_knobs_alone():
    key = lambda s: cache_key("vlm", s, asymvlm.MODEL_KNOBS, "mlsysrepro.transformer.vlm_training")  # noqa: E731
    assert key(settings()) == key(settings(savings=[0.4], text_budgets=[2], operating_point=0.4))
    assert key(settings()) != key(settings(steps=41))


def test_bad_knobs_are_refused_by_name():
    with pytest.raises(ValueError, match="operating_point"):
        settings(operating_point=1.5)


def test_teacher_on_answers_measures_the_scorer_against_its_target():
    """A scorer that returns its teacher's log-relevance holds every one of the teacher's top tokens and puts the
    teacher's share on the answer; a scorer that puts all its mass off the answer puts none there."""
    import torch

    from mlsysrepro.kvcache.pruning import answer_saliency
    from mlsysrepro.transformer.vlm import TinyVLM
    from mlsysrepro.transformer.vlm_training import canvas_vlm_config
    from mlsysrepro.vision.canvases import glyph_banks, make_batch

    torch.manual_seed(0)
    cfg = canvas_vlm_config(grid=2, patch=4, vit_dim=16, vit_layers=1, dim=16, layers=2, heads=2, kv_heads=1, ffn=24)
    model = TinyVLM(cfg).eval()
    banks = glyph_banks()
    batch = make_batch(banks[1], ["cell"] * 8, 2, 0.3, torch.Generator().manual_seed(1), width=10)
    teacher = answer_saliency(model, batch.pixels, batch.question, batch.answer)
    relevant = asymvlm.answer_relevance(batch, cfg)

    def lab(scores):
        def scorer(vision, question):
            return scores
        return asymvlm.Lab(model, scorer, scorer, [], [], 0.0, banks, {"cell": batch}, batch)

    exact = asymvlm.teacher_on_answers(lab(teacher.log()), count=5).loc["cell"]
    assert exact.overlap == pytest.approx(1.0) and exact.scorer == pytest.approx(exact.teacher, rel=1e-5)
    assert exact.uniform == pytest.approx(0.25)  # one cell of four
    elsewhere = asymvlm.teacher_on_answers(lab(relevant * -100.0), count=5).loc["cell"]
    assert elsewhere.scorer < 1e-6 and elsewhere.teacher == pytest.approx(exact.teacher)
    assert 0 < exact.attention < 1 and elsewhere.supervised < 1e-6


def test_cells_covered_asks_that_every_answer_cell_keeps_a_token():
    import torch

    from mlsysrepro.transformer.vlm_training import canvas_vlm_config
    from mlsysrepro.vision.canvases import glyph_banks, make_batch

    cfg = canvas_vlm_config(grid=2, patch=4, vit_dim=16, vit_layers=1, dim=16, layers=2, heads=2, kv_heads=1, ffn=24)
    batch = make_batch(glyph_banks()[1], ["row_has"], 2, 0.0, torch.Generator().manual_seed(2), width=10)
    row = int(batch.cells[0].any(1).nonzero()[0])  # the asked row: both of its cells hold the answer
    first, second = [row * 8 + 0], [row * 8 + 2]  # one token of each cell of that row (4 x 4 tokens, 2 x 2 a cell)
    both = torch.tensor([first + second + [-1]])
    one = torch.tensor([first + [-1, -1]])
    assert asymvlm.cells_covered(batch, cfg, both).tolist() == [True]
    assert asymvlm.cells_covered(batch, cfg, one).tolist() == [False]


def test_best_matched_saving_takes_the_best_family():
    rows = []
    for family, drop_at in (("cell", 0.3), ("count", 0.65)):  # accuracy falls past drop_at
        for item in range(40):
            rows.append(dict(method="none", target=0.0, family=family, item=item, correct=True))
            for target in (0.3, 0.54, 0.65, 0.75):
                rows.append(dict(method="asymvlm", target=target, family=family, item=item,
                                 correct=target <= drop_at))
    measured = asymvlm.best_matched_saving(pd.DataFrame(rows), settings(), ["cell", "count"])
    # interpolated to where accuracy crosses 1 - tolerance (0.02) between the last target kept and the next
    assert measured.value == pytest.approx(0.65 + 0.1 * 0.02) and "cell 30%" in measured.note


def test_the_supervised_target_is_a_distribution_and_a_blank_row_teaches_nothing():
    import torch

    from mlsysrepro.transformer.vlm_training import canvas_vlm_config
    from mlsysrepro.vision.canvases import glyph_banks, make_batch

    cfg = canvas_vlm_config(grid=2, patch=4, vit_dim=16, vit_layers=1, dim=16, layers=2, heads=2, kv_heads=1, ffn=24)
    batch = make_batch(glyph_banks()[1], ["row_has"] * 64, 2, 0.5, torch.Generator().manual_seed(3), width=10)
    target = asymvlm.answer_target(batch, cfg)
    blank = ~batch.cells.flatten(1).any(1)  # the asked row holds no digit
    assert blank.any() and (~blank).any()
    assert torch.isfinite(target).all() and (target[blank] == 0).all()
    assert torch.allclose(target[~blank].sum(1), torch.ones(int((~blank).sum())))


def test_the_scorer_is_keyed_by_the_families_it_is_trained_on():
    key = lambda s: cache_key("scorer", s, asymvlm.SCORER_KNOBS, "mlsysrepro.papers.asymvlm")  # noqa: E731
    assert key(settings()) != key(settings(test_families=["cell", "count"]))


def test_a_family_answered_at_its_prior_is_not_judged():
    """A family whose unpruned accuracy is its most common answer's share is left out; with none left, the claim is
    not testable, not failed."""
    import torch

    from mlsysrepro.vision.canvases import TOKEN

    def batch(answers):
        return type("Batch", (), {"answer": torch.tensor([TOKEN[a] for a in answers])})()

    test = {"cell": batch(["1", "2", "3", "4"] * 50), "row_has": batch(["yes"] * 140 + ["no"] * 60),
            "count": batch(["1"] * 45 + ["2"] * 155)}
    lab = type("Lab", (), {"test": test})()
    front = pd.concat([frontier({"none": {0.0: 0.9}}, families=("cell",)),
                       frontier({"none": {0.0: 0.71}}, families=("row_has",)),
                       frontier({"none": {0.0: 0.83}}, families=("count",))])
    answered = asymvlm.above_prior(lab, front, settings())
    assert answered.prior.to_dict() == pytest.approx({"cell": 0.25, "row_has": 0.7, "count": 0.775})
    # 0.71 is within 0.02 of always "yes"; count's 0.83 is 0.055 above its prior, but only 1.9 standard errors over
    # 200 items: its interval's lower end (0.772) does not clear the prior, so it is not a family the model answers
    assert answered.low["count"] == pytest.approx(0.7723, abs=1e-3)
    assert asymvlm.judged(answered, ["cell", "row_has", "count"]) == ["cell"]
    nothing = asymvlm.gap_over_best(front, settings(), asymvlm.judged(answered, ["row_has"]))
    assert "most common answer" in nothing.not_testable and nothing.value is None
