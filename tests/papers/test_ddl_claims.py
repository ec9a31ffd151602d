"""The DDL-stall claims' measurements on hand-made frames: where each must hold, fail or be inconclusive."""

import pandas as pd
import pytest

from mlsysrepro.core.claims import verdict
from mlsysrepro.ddl.macro import fit_features
from mlsysrepro.papers import ddl_stalls

CLAIMS = {claim.id: claim for claim in ddl_stalls.CLAIMS}


def stalls(top_share: float, noise: float) -> pd.DataFrame:
    rows = [dict(model="m", configuration="p3.2xlarge", workers=1, RUN0=1.0, RUN1=1.0 + noise,
                 interconnect_share=0.0, exposed_comm=0.0),
            dict(model="m", configuration="p3.8xlarge", workers=4, RUN0=1.0, RUN1=1 / (1 - top_share),
                 interconnect_share=top_share, exposed_comm=0.4),
            dict(model="m", configuration="2xp3.8xlarge", workers=8, RUN0=1.0, RUN1=9.0,
                 interconnect_share=0.95, exposed_comm=0.5)]  # two machines: not the interconnect's claim
    frame = pd.DataFrame(rows)
    frame["RUN0_repeats"] = [[r] for r in frame.RUN0]  # one repeat: the interval falls back to the noise floor
    frame["RUN1_repeats"] = [[r] for r in frame.RUN1]
    return frame


@pytest.mark.parametrize("share, noise, expected", [(0.7, 0.05, "holds"), (0.3, 0.05, "fails"),
                                                    (0.497, 0.07, "inconclusive")])
def test_interconnect_claim_carries_the_noise_floor_as_its_interval(share, noise, expected):
    measured = ddl_stalls.interconnect_claim(stalls(share, noise))
    assert measured.value == pytest.approx(share)
    assert measured.interval == pytest.approx((share - noise, share + noise))
    assert verdict(CLAIMS["C1"], measured)[0] == expected


def test_interconnect_claim_takes_its_interval_from_the_repeats_of_the_configuration_it_judges():
    from scipy import stats

    frame = stalls(0.6, 0.2)  # a noisy single-GPU floor (20 %) that the judged configuration does not share
    frame["RUN0_repeats"] = [[1.0, 1.0, 1.0]] * 3
    frame["RUN1_repeats"] = [[1.2, 1.2, 1.2], [2.4, 2.5, 2.6], [9.0, 9.0, 9.0]]
    measured = ddl_stalls.interconnect_claim(frame)
    shares = [1 - 1 / 2.4, 1 - 1 / 2.5, 1 - 1 / 2.6]
    half = stats.t.ppf(0.975, 2) * pd.Series(shares).std() / 3 ** 0.5
    assert measured.value == pytest.approx(0.6) and measured.interval == pytest.approx((0.6 - half, 0.6 + half))
    assert half < 0.2 and "3 repeats" in measured.note
    assert verdict(CLAIMS["C1"], measured)[0] == "holds"  # the 20 % floor would have straddled 0.5


def test_c1s_negative_control_is_the_least_communication_heavy_model_and_a_hold_needs_it_to_fail():
    heavy = stalls(0.7, 0.02)
    light = stalls(0.2, 0.02).assign(model="compute_bound")
    both = pd.concat([heavy, light], ignore_index=True)
    control = ddl_stalls.interconnect_control(both)
    assert control.value == pytest.approx(0.2) and "compute_bound" in control.note
    assert verdict(CLAIMS["C1"], ddl_stalls.interconnect_claim(both).controlled(control))[0] == "holds"
    everything_bound = pd.concat([heavy, stalls(0.6, 0.02).assign(model="also_heavy")], ignore_index=True)
    blind = ddl_stalls.interconnect_claim(everything_bound).controlled(ddl_stalls.interconnect_control(everything_bound))
    assert verdict(CLAIMS["C1"], blind)[0] == "not testable here"  # every model passes: the rule cannot tell


def network(slowdowns: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([dict(pair=pair, model=f"m{i}", slowdown=s) for pair, values in slowdowns.items()
                         for i, s in enumerate(values)])


def test_network_claim_sets_the_largest_slowdown_beside_the_papers_up_to_5x():
    from mlsysrepro.core.claims import position

    one_pair_near = ddl_stalls.network_claim(network({"p3": [1.5], "p2": [5.0]}))  # "up to": the largest decides
    assert one_pair_near.value == 5.0 and verdict(CLAIMS["C2"], one_pair_near)[0] == "holds"
    assert position(CLAIMS["C2"], one_pair_near) == "1 of 2 inside 2.5–7.5, 1 below"


@pytest.mark.parametrize("slowdown, noise, expected", [(8.0, 0.01, "fails"), (7.6, 0.05, "inconclusive"),
                                                       (6.5, 0.05, "holds")])
def test_network_claim_carries_the_noise_floor_of_both_timings(slowdown, noise, expected):
    measured = ddl_stalls.network_claim(network({"p3": [slowdown], "p2": [2.0]}), noise)
    assert measured.interval == pytest.approx((slowdown * (1 - noise) / (1 + noise),
                                               slowdown * (1 + noise) / (1 - noise)))
    assert verdict(CLAIMS["C2"], measured)[0] == expected
    with pytest.raises(ValueError, match="noise"):
        ddl_stalls.network_claim(network({"p3": [slowdown]}), -0.1)


@pytest.mark.parametrize("noise", [0.25, 1.0, 2.05])
def test_network_claim_is_not_testable_where_the_noise_cannot_tell_5x_from_the_bands_edges(noise):
    # 2.05: the floor measured once with two heavy processes on the two cores; a measured value must not raise
    measured = ddl_stalls.network_claim(network({"p3": [5.0], "p2": [2.0]}), noise)
    found, why = verdict(CLAIMS["C2"], measured)
    assert found == "not testable here" and "noise" in why
    assert verdict(CLAIMS["C2"], ddl_stalls.network_claim(network({"p3": [5.0], "p2": [2.0]}), 0.2))[0] == "holds"


def test_a_share_re_expressed_for_a_faster_gpu_grows_and_for_a_slower_one_shrinks():
    assert ddl_stalls.share_at_efficiency(0.5, 1.0) == pytest.approx(0.5)
    assert ddl_stalls.share_at_efficiency(0.5, 2.0) == pytest.approx(2 / 3)  # stall 1, compute 1 -> 0.5
    assert ddl_stalls.share_at_efficiency(0.5, 0.5) == pytest.approx(1 / 3)
    measured = ddl_stalls.interconnect_claim(stalls(0.45, 0.01), efficiency_ratio=2.0)
    assert measured.value == pytest.approx(0.9 / 1.45) and verdict(CLAIMS["C1"], measured)[0] == "holds"


def test_the_slowdown_re_expressed_for_our_assumptions_grows_with_a_faster_gpu_and_a_slower_network():
    # compute 1 s, one machine 2 s (1 s of interconnect), two machines 6 s (4 s more for the network)
    frame = pd.DataFrame([dict(pair="p3", model="m", compute=1.0, one_machine=2.0, two_machines=6.0, stall=4.0,
                               share=2.0, slowdown=3.0)])
    assert ddl_stalls.network_at(frame).slowdown.item() == pytest.approx(3.0)
    assert ddl_stalls.network_at(frame, efficiency_ratio=2.0).slowdown.item() == pytest.approx(5.5 / 1.5)
    assert ddl_stalls.network_at(frame, efficiency_ratio=0.5).slowdown.item() == pytest.approx(7.0 / 3.0)
    assert ddl_stalls.network_at(frame, network_efficiency=0.5).slowdown.item() == pytest.approx(10.0 / 2.0)
    with pytest.raises(ValueError, match="network_efficiency"):
        ddl_stalls.network_at(frame, network_efficiency=1.5)


def test_network_claim_is_re_judged_over_both_of_its_assumptions():
    from mlsysrepro.core.claims import measured_for, robustness

    frame = pd.DataFrame([dict(pair="p3", model="m", compute=1.0, one_machine=1.2, two_machines=6.0, stall=4.8,
                               share=4.0, slowdown=5.0)])
    grids = {"gpu_efficiency": {0.2: ddl_stalls.network_at(frame, 0.5), 0.4: frame,
                                0.8: ddl_stalls.network_at(frame, 2.0)},
             "network_efficiency": {v: frame if v == 1.0 else ddl_stalls.network_at(frame, network_efficiency=v)
                                    for v in ddl_stalls.NETWORK_EFFICIENCY.values}}
    measured = measured_for(CLAIMS["C2"], lambda f: ddl_stalls.network_claim(f, 0.01), frame, grids)
    found = {entry["assumption"]: entry["verdicts"] for entry in robustness(CLAIMS["C2"], measured)}
    assert found["gpu_efficiency"] == {"0.2": "holds", "0.4": "holds", "0.8": "fails"}  # 9.6x at twice the speed
    assert found["network_efficiency"] == {"0.5": "fails", "0.75": "holds", "1": "holds"}  # 9x, 7x, 5x


def test_network_claim_is_a_band_around_5x_on_every_pair():
    near = ddl_stalls.network_claim(network({"p3": [1.2, 4.5], "p2": [1.1, 6.0]}))
    assert near.per_setting == {"p2": 6.0, "p3": 4.5}
    assert verdict(CLAIMS["C2"], near)[0] == "holds"
    assert verdict(CLAIMS["C2"], ddl_stalls.network_claim(network({"p3": [8.0], "p2": [5.0]})))[0] == "fails"
    assert verdict(CLAIMS["C2"], ddl_stalls.network_claim(network({"p3": [1.5], "p2": [1.3]})))[0] == "fails"
    assert verdict(CLAIMS["C2"], ddl_stalls.network_claim(network({})))[0] == "not testable here"


def test_claims_fixed_by_the_emulation_are_not_testable_and_checked_apart():
    assert verdict(CLAIMS["C3"], ddl_stalls.cost_claim_not_testable())[0] == "not testable here"
    assert verdict(CLAIMS["C4"], ddl_stalls.macro_claim_not_testable())[0] == "not testable here"
    verdicts = pd.DataFrame({"model": ["a", "b"], "cheapest_per_epoch": ["x", "y"],
                             "most_expensive_is_cheapest": [False, True], "cheapest_beyond_noise": [False, True]})
    assert verdict(CLAIMS["K1"], ddl_stalls.priciest_not_cheapest(verdicts))[0] == "fails"
    within_noise = verdicts.assign(cheapest_beyond_noise=False)
    assert verdict(CLAIMS["K1"], ddl_stalls.priciest_not_cheapest(within_noise))[0] == "inconclusive"
    never = verdicts.assign(most_expensive_is_cheapest=False, cheapest_beyond_noise=False)
    assert verdict(CLAIMS["K1"], ddl_stalls.priciest_not_cheapest(never))[0] == "holds"
    macro = pd.DataFrame({"gradient_bytes": [1.0, 2.0, 3.0, 4.0], "layers": [4.0, 1.0, 3.0, 2.0],
                          "gradient_tensors": [1.0, 2.0, 3.0, 4.0], "stall_ms": [2.0, 4.0, 6.0, 8.0]})
    fits = fit_features(macro, "stall_ms")
    assert verdict(CLAIMS["K2"], ddl_stalls.bytes_fit(fits))[0] == "holds"
