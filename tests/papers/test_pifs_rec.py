"""PIFS-Rec's claim measurements on hand-made frames, its configuration checks and its host anchor reader."""

import numpy as np
import pandas as pd
import pytest

from mlsysrepro.core.claims import verdict
from mlsysrepro.core.settings import resolve
from mlsysrepro.papers import pifs_rec
from mlsysrepro.recsys import cxl

CLAIMS = {claim.id: claim for claim in pifs_rec.CLAIMS}


def frame(latencies: dict[str, list[float]]) -> pd.DataFrame:
    """Settings 0..n-1 of one trace, each design's latency per setting."""
    rows = []
    for design, values in latencies.items():
        for i, value in enumerate(values):
            rows.append(dict(trace="t", config=i, batch=64, design=design, latency_us=value, rows=100, bags=10,
                             dim=64, buffer_hits=0, **{"bytes switch to host": (100 if design == "pond" else 10) * 256,
                                                       "bytes dram": 100 * 256}))
    return pd.DataFrame(rows)


def test_p1_holds_when_pifs_is_faster_on_most_settings_and_fails_otherwise():
    fast = frame({"pond": [40, 42, 38, 41], "pifs": [10, 11, 10, 12], "beacon": [20, 20, 20, 20]})
    assert verdict(CLAIMS["P1"], pifs_rec.latency_ratio(fast, "pond", "pifs"))[0] == "holds"
    slow = frame({"pond": [9, 9, 9, 30], "pifs": [10, 11, 10, 12], "beacon": [20, 20, 20, 20]})
    assert verdict(CLAIMS["P1"], pifs_rec.latency_ratio(slow, "pond", "pifs"))[0] == "fails"


def test_ablation_steps_divide_each_step_by_the_next():
    latencies = {name: [float(len(cxl.ABLATION) - i)] * 3 for i, name in enumerate(cxl.ABLATION)}
    steps = pifs_rec.ablation_steps(frame(latencies))
    assert list(steps.columns) == list(cxl.ABLATION[1:])
    assert steps.iloc[0].tolist() == pytest.approx([5 / 4, 4 / 3, 3 / 2, 2 / 1])
    for claim_id, design, _ in pifs_rec.STEPS:
        measured = pifs_rec.step_measurement(frame(latencies), design).given(hotness_can_win=1.2)
        assert verdict(CLAIMS[claim_id], measured)[0] == "holds"


def test_each_step_is_judged_on_its_own_settings_not_pooled_with_the_others():
    # three steps speed up every setting, global hotness slows every one: pooled, 9 of 12 pass; on its own, 0 of 3
    latencies = {"cxl": [8.0] * 3, "pifs_pooling": [4.0] * 3, "pifs_buffer": [2.0] * 3, "pifs_hotness": [3.0] * 3,
                 "pifs": [1.0] * 3}
    verdicts = {claim_id: verdict(CLAIMS[claim_id], pifs_rec.step_measurement(frame(latencies), design)
                                  .given(hotness_can_win=1.2))[0]
                for claim_id, design, _ in pifs_rec.STEPS}
    assert verdicts == {"P3a": "holds", "P3b": "holds", "P3c": "fails", "P3d": "holds"}
    with pytest.raises(ValueError, match="design must be one of"):
        pifs_rec.step_measurement(frame(latencies), "cxl")


def test_k4_reads_pifs_latency_from_the_fewest_to_the_most_devices_and_p5_is_not_testable():
    scaling = pd.DataFrame([dict(sweep="devices", value=v, design=d, latency_us=lat)
                            for v, pifs, pond in ((2, 80.0, 50.0), (16, 10.0, 50.0))
                            for d, lat in (("pifs", pifs), ("pond", pond))])
    measured = pifs_rec.device_scaling(scaling)
    assert measured.value == pytest.approx(8.0) and "Pond: 1.00x" in measured.note
    assert verdict(CLAIMS["K4"], measured)[0] == "holds"
    assert CLAIMS["K4"].kind == "consistency check"  # the model spreads reads evenly: latency / devices by construction
    assert verdict(CLAIMS["P5"], pifs_rec.tco_and_energy())[0] == "not testable here"


def test_global_hotness_is_profiled_on_the_batches_before_the_served_one_only():
    settings = resolve("pifs_rec", pifs_rec.PRESETS, {"scale": "smoke", "hotness_window": 1}, pifs_rec.RANGES)
    config, batch = [1, 4, 64], 8
    ids = pifs_rec.traces.load_trace("medium", settings.seed, settings.rows)
    per_batch = batch * config[1]
    before = ids[(pifs_rec.SERVED_BATCH - 1) * per_batch:pifs_rec.SERVED_BATCH * per_batch]
    hot = pifs_rec.hot_rows(settings, "medium", config, batch, 1, 5)
    assert set(hot) <= set(before.tolist()), "only the batch before the served one is profiled"
    assert hot[0] == np.bincount(before).argmax()


def test_k1_and_k2_fail_on_wrong_bytes():
    good = frame({"pond": [1, 1], "pifs": [1, 1]})
    assert pifs_rec.bytes_follow_the_analysis(good).value is True
    bad = good.copy()
    bad.loc[bad.design == "pifs", "bytes switch to host"] *= 2
    assert pifs_rec.bytes_follow_the_analysis(bad).value is False
    bad = good.assign(buffer_hits=5)
    assert pifs_rec.conservation(bad).value is False


def test_host_add_seconds_reads_the_smallest_table():
    anchor = pd.DataFrame([dict(dim=64, table_rows=r, pooling=20, round=k, seconds_per_row=s)
                           for r, s in ((1000, 3e-8), (10**6, 9e-8)) for k in range(3)])
    assert pifs_rec.host_add_seconds(anchor, 64) == pytest.approx(3e-8)
    with pytest.raises(ValueError, match="dim=128"):
        pifs_rec.host_add_seconds(anchor, 128)


def test_bad_configs_name_the_parameter():
    settings = resolve("pifs_rec", pifs_rec.PRESETS, {"scale": "smoke", "configs": [[4, 20]]}, pifs_rec.RANGES)
    with pytest.raises(ValueError, match="configs must be"):
        pifs_rec.check_configs(settings)
    settings = resolve("pifs_rec", pifs_rec.PRESETS, {"scale": "smoke", "main_config": 5}, pifs_rec.RANGES)
    with pytest.raises(ValueError, match="main_config must be below"):
        pifs_rec.check_configs(settings)


def test_idle_latency_check_passes_on_the_presets():
    settings = resolve("pifs_rec", pifs_rec.PRESETS, {"scale": "smoke"}, pifs_rec.RANGES)
    anchor = pd.DataFrame([dict(dim=64, table_rows=1000, pooling=20, round=0, seconds_per_row=2e-8)])
    assert verdict(CLAIMS["K3"], pifs_rec.idle_latency_check(settings, anchor))[0] == "holds"
    assert np.isfinite(pifs_rec.system(settings, anchor, 64).host_add_s_per_row)


def test_an_assumption_sets_the_system_field_it_names():
    from mlsysrepro.recsys import cxl

    assert pifs_rec.assumed("buffer_mib", 64.0) == {"buffer_bytes": 64 * 2**20}
    wider = pifs_rec.assumed("device_link_lanes", 16)["downstream_bytes_per_s"]
    assert wider == pytest.approx(2 * cxl.System.downstream_bytes_per_s)
    assert pifs_rec.assumed("beacon_adder_gb_s", 16.0) == {"device_adder_bytes_per_s": 16e9}
    assert pifs_rec.SWITCH_BUFFER.central == pifs_rec.PRESETS["default"]["buffer_mib"]
    with pytest.raises(ValueError, match="assumption must be one of"):
        pifs_rec.assumed("host_cores", 4)


def test_an_assumption_reruns_only_the_designs_it_can_change():
    settings = resolve("pifs_rec", pifs_rec.PRESETS, {"scale": "smoke", "configs": [[2, 8, 64]], "rows": 5_000},
                       pifs_rec.RANGES)
    anchor = pd.DataFrame([dict(dim=64, table_rows=1_000, pooling=20, round=0, seconds_per_row=4e-9)])
    central = pifs_rec.comparison(settings, anchor)
    slow = pifs_rec.comparison_under(settings, anchor, "beacon_adder_gb_s", 1.0, central)
    assert sorted(slow.design) == sorted(central.design)
    key = ["trace", "config", "batch", "design"]
    joined = central.merge(slow, on=key, suffixes=("", "_slow"))
    changed = joined[joined.latency_us != joined.latency_us_slow].design.unique().tolist()
    assert changed == ["beacon"], "a 1 GB/s adder slows BEACON and nothing else"
    assert pifs_rec.comparison_under(settings, anchor, "buffer_mib", 4.0, central).equals(central)
    with pytest.raises(ValueError, match="assumption must be one of"):
        pifs_rec.comparison_under(settings, anchor, "lanes", 8, central)
    with pytest.raises(ValueError, match="designs must be among"):
        pifs_rec.comparison(settings, anchor, ("tpu",))


def test_p3c_needs_a_hot_list_that_could_beat_lru_at_all():
    settings = resolve("pifs_rec", pifs_rec.PRESETS, {"scale": "smoke", "configs": [[2, 8, 64]], "rows": 5_000},
                       pifs_rec.RANGES)
    anchor = pd.DataFrame([dict(dim=64, table_rows=1_000, pooling=20, round=0, seconds_per_row=4e-9)])
    power = pifs_rec.oracle_hotness(settings, anchor)
    assert len(power.per_setting) == 1 and power.value > 0
    losing = {name: [8.0, 4.0, 2.0, 3.0, 1.0][i] for i, name in enumerate(cxl.ABLATION)}
    frame_ = frame({name: [value] * 3 for name, value in losing.items()})
    measured = pifs_rec.step_measurement(frame_, "pifs_hotness")
    assert verdict(CLAIMS["P3c"], measured.given(hotness_can_win=1.2))[0] == "fails"
    assert verdict(CLAIMS["P3c"], measured.given(hotness_can_win=0.5))[0] == "not testable here"


def test_each_negative_control_takes_the_credited_mechanism_away_and_fails_its_claims_rule():
    settings = resolve("pifs_rec", pifs_rec.PRESETS, {"scale": "smoke", "configs": [[2, 8, 64]], "rows": 5_000},
                       pifs_rec.RANGES)
    anchor = pd.DataFrame([dict(dim=64, table_rows=1_000, pooling=20, round=0, seconds_per_row=4e-9)])
    assert pifs_rec.one_row_bags(settings).configs == [[2, 1, 64]]
    for claim_id in pifs_rec.CONTROLS:
        control = pifs_rec.control_ratio(settings, anchor, claim_id)
        assert control.note.startswith("negative control") and len(control.per_setting) == 1
        assert verdict(CLAIMS[claim_id], control, powered=False)[0] == "fails", claim_id
    assert pifs_rec.control_ratio(settings, anchor, "P3b").value == pytest.approx(1.0)  # an empty buffer: no change
    assert pifs_rec.control_ratio(settings, anchor, "P3d").value == pytest.approx(1.0)  # one device: no spreading
    with pytest.raises(ValueError, match="claim_id must be one of"):
        pifs_rec.control_ratio(settings, anchor, "P2")
    small = pifs_rec.comparison(settings, anchor, ("beacon", "pifs"), buffer_bytes=2**16)  # 256 rows of 64 floats
    whole = pifs_rec.whole_buffer(settings, anchor)
    assert whole.value > pifs_rec.latency_ratio(small, "beacon", "pifs").value  # the buffer helps PIFS-Rec only
