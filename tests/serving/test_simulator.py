"""The serving simulator's invariants: requests conserved, per-second billing, revocations handled, no VM billed
after its release; and its fluid queues against a per-request FIFO simulation."""

import math

import numpy as np
import pytest

from mlsysrepro.serving.fleet import VMType
from mlsysrepro.serving.policies import make_policy
from mlsysrepro.serving.reference import per_request_waits
from mlsysrepro.serving.simulator import Config, Workload, check_invariants, simulate


def types(seconds):
    return (VMType("small", 1, 1.0, 1.0, np.full(seconds, 0.3)), VMType("large", 8, 1.0, 8.0, np.full(seconds, 2.4)))


def workload(seconds=3600, rate=200.0, seed=0, models=3, window=30):
    rng = np.random.default_rng(seed)
    shape = 1 + 0.8 * np.sin(np.linspace(0, 2 * np.pi, seconds))
    arrivals = rng.poisson(rate * shape)[:, None]
    members = np.zeros((math.ceil(seconds / window), 1, models), dtype=bool)
    members[:, 0, :2] = True
    members[::3, 0, 1] = False  # a member pruned in some windows
    return Workload(arrivals, members, window, np.array([50.0, 80.0, 30.0]), np.array([5.0, 3.0, 8.0]))


@pytest.mark.parametrize("policy", ["infaas", "clipper", "clipper_x", "cocktail"])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_policy_conserves_requests_and_bills_only_running_vms(policy, seed):
    work = workload(seed=seed)
    forecast = np.full(60, 200.0)
    run = simulate(work, make_policy(policy), types(3600), Config(revocation_per_hour=2.0, launch_delay=60),
                   forecast, seed)
    assert check_invariants(run, work) == []
    assert run.admitted.sum() + run.dropped.sum() == work.arrivals.sum()
    assert run.admitted.sum() > 0.9 * work.arrivals.sum()
    assert np.all(run.vm_end <= run.end) and np.all(run.vm_end >= run.vm_launch)


def test_billing_is_per_second_with_a_one_minute_minimum_and_spot_at_each_seconds_price():
    from mlsysrepro.serving.fleet import billed

    spot = np.r_[np.full(100, 0.36), np.full(100, 0.72)]  # $/h: 0.0001 then 0.0002 $ per second
    vm = (VMType("x", 1, 1.0, 3.6, spot),)
    costs = billed(vm, np.zeros(4, int), np.array([False, False, True, True]), np.array([0.0, 0.0, 50.0, 190.0]),
                   np.array([90.0, 10.0, 150.0, 200.0]))
    assert costs[0] == pytest.approx(90 * 0.001)
    assert costs[1] == pytest.approx(60 * 0.001), "the one-minute minimum"
    assert costs[2] == pytest.approx(50 * 0.0001 + 50 * 0.0002)
    assert costs[3] == pytest.approx(60 * 0.0002), "past the series, its last price holds"
    with pytest.raises(ValueError, match="end at or after"):
        billed(vm, [0], [False], [10.0], [5.0])


def test_a_revoked_spot_vm_stops_serving_and_the_fallback_replaces_it_on_demand():
    work = workload(seconds=7200, rate=100.0)
    forecast = np.full(120, 100.0)
    config = Config(revocation_per_hour=6.0, launch_delay=60, warning=120)
    with_fallback = simulate(work, make_policy("cocktail"), types(7200), config, forecast, seed=3)
    without = simulate(work, make_policy("cocktail", fallback=False), types(7200), config, forecast, seed=3)
    for run in (with_fallback, without):
        assert run.vm_revoked.sum() > 0
        assert np.all(run.vm_spot[run.vm_revoked]), "only spot VMs are revoked"
    assert (~with_fallback.vm_spot).sum() > (~without.vm_spot).sum(), "the fallback launches on-demand VMs"
    assert with_fallback.dropped.sum() <= without.dropped.sum()


def test_no_vm_is_billed_after_its_release():
    work = workload()
    run = simulate(work, make_policy("clipper"), types(3600), Config(launch_delay=30))
    released = run.vm_end < run.end
    assert released.any(), "the reactive policy scales in"
    seconds = np.maximum(run.vm_end - run.vm_launch, 60.0)
    prices = np.where(run.vm_type == 0, 1.0, 8.0)
    assert np.allclose(run.vm_cost, seconds * prices / 3600)


def test_requests_are_dropped_when_no_capacity_can_serve_them_in_time():
    work = workload(rate=2000.0)
    config = Config(launch_delay=3000, timeout=0.5)  # nothing boots in time for the growing load
    run = simulate(work, make_policy("infaas"), types(3600), config)
    assert run.dropped.sum() > 0 and check_invariants(run, work) == []


def test_fluid_waits_match_a_per_request_fifo_queue_under_overload():
    rng = np.random.default_rng(0)
    seconds, capacity = 600, 100.0
    # the first minute sets the warm pool: 70/s at 80 % utilisation is one VM of 100/s
    counts = np.r_[np.full(60, 70), rng.poisson(np.r_[np.full(140, 80.0), np.full(200, 140.0), np.full(200, 60.0)])]
    members = np.ones((seconds, 1, 1), dtype=bool)
    work = Workload(counts[:, None], members, 1, np.array([capacity]), np.array([0.0]))
    vms = (VMType("one", 1, 1.0, 1.0, np.full(seconds, 1.0)),)
    config = Config(launch_delay=10**6, timeout=1e9, reactive_interval=10**6, scale_in_interval=10**6)
    run = simulate(work, make_policy("infaas"), vms, config)
    reference = per_request_waits(counts, capacity, rng)
    busy = reference > 0.5  # seconds whose requests queue: the fluid approximation's regime
    assert busy.sum() > 100
    assert np.allclose(run.latency_s[busy, 0], reference[busy], rtol=0.05, atol=0.02)


def test_config_and_workload_reject_bad_input():
    with pytest.raises(ValueError, match="utilisation"):
        Config(utilisation=1.5)
    with pytest.raises(ValueError, match="launch_delay"):
        Config(launch_delay=0)
    work = workload()
    with pytest.raises(ValueError, match="members must be"):
        Workload(work.arrivals, work.members[:2], work.window, work.rate_per_slot, work.service_ms)
    with pytest.raises(ValueError, match="needs a forecast"):
        simulate(work, make_policy("cocktail"), types(3600))


def test_the_forecast_margin_is_the_quantile_of_past_misses_and_never_below_one():
    from mlsysrepro.serving.simulator import forecast_margin

    rates = np.full(100, 100.0)
    forecast = np.full(100, 100.0)
    forecast[40:50] = 80.0  # forecasts made at minutes 40-49 undershot minutes 42-51 by 25 %
    assert forecast_margin(forecast, rates, 60, 2, 30, 1.0) == pytest.approx(1.25)
    assert forecast_margin(forecast, rates, 60, 2, 5, 1.0) == 1.0, "the misses are out of the window"
    assert forecast_margin(forecast * 2, rates, 60, 2, 30, 0.95) == 1.0, "an overshooting forecast keeps its value"
    assert forecast_margin(forecast, rates, 1, 2, 30, 0.95) == 1.0, "no forecast has come due yet"
    # the margin only reads forecasts whose minute has passed: a miss at the last forecast is not yet known
    late = np.full(100, 100.0)
    late[58] = 10.0
    assert forecast_margin(late, rates, 59, 2, 30, 1.0) == 1.0


def test_packing_shares_vms_among_lightly_loaded_models_within_their_latency_budget():
    """Three models each needing a tenth of a VM: one model per VM rents three VMs; packed, the three share about
    one, and the cost falls with it. A budget their slowed batches cannot meet forbids the shares."""
    seconds = 1800
    arrivals = np.full((seconds, 1), 10)
    members = np.ones((seconds // 30, 1, 3), dtype=bool)
    one = (VMType("one", 1, 1.0, 1.0, np.full(seconds, 1.0)),)
    config = Config(launch_delay=30, models_per_vm=4)

    def run(policy, budget):
        work = Workload(arrivals, members, 30, np.full(3, 100.0), np.full(3, 10.0), budget)
        result = simulate(work, make_policy("clipper", packing=policy), one, config)
        assert check_invariants(result, work) == []
        return result

    alone, packed = run(False, np.full(3, 50.0)), run(True, np.full(3, 50.0))
    assert alone.vms.mean() == pytest.approx(3.0)
    assert packed.vms.mean() < 1.1 and packed.cost < 0.4 * alone.cost
    assert np.nanmax(packed.latency_s) <= 0.05 + 1e-9, "a packed batch still fits the budget"
    tight = run(True, np.full(3, 15.0))  # a half VM would take 20 ms a batch
    assert tight.vms.mean() == pytest.approx(3.0) and tight.cost == pytest.approx(alone.cost)
    assert np.array_equal(run(True, None).vm_type, alone.vm_type), "no budget: no shares"
