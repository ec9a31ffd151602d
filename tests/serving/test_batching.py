"""Servers that batch what is queued: the tabulated latency against the same server simulated request by request,
and the simulator reading it."""

import math

import numpy as np
import pytest

from mlsysrepro.serving.batching import LOADS, batched_service, latency_table
from mlsysrepro.serving.fleet import VMType
from mlsysrepro.serving.policies import make_policy
from mlsysrepro.serving.reference import per_request_batched_latency
from mlsysrepro.serving.simulator import Config, Workload, check_invariants, simulate


@pytest.mark.parametrize("ratio", [0.1, 1 / 32, 0.5])
def test_the_table_matches_a_per_request_batching_server(ratio):
    """0.1: batching pays (a batch of 32 costs 10 single requests); 1/32: it does not (a batch costs its requests,
    so the server queues like one without batching); 0.5: in between."""
    table = latency_table(np.array([ratio]), 32)[0]
    rng = np.random.default_rng(1)
    for column in (2, 6, 10, 14):  # loads 0.1, 0.3, 0.5, 0.7
        rate = LOADS[column] * 32
        reference = per_request_batched_latency(rate, ratio, 1.0, 32, 20_000 / rate, rng)
        assert table[column] == pytest.approx(reference, rel=0.04), LOADS[column]
    assert table[0] == ratio, "no load: a request alone"
    assert np.all(np.diff(table) > -1e-3), "latency grows with the load"


def test_batching_serves_light_load_at_the_single_request_time_and_heavy_load_in_full_batches():
    table = latency_table(np.array([0.1]), 32)
    light = batched_service(np.array([[0.02]]), table, np.array([0.02]), np.array([[0.0]]))
    assert light[0, 0] == pytest.approx(0.002, rel=0.1), "about one request's 2 ms, not the full batch's 20 ms"
    heavy = batched_service(np.array([[0.9]]), table, np.array([0.02]), np.array([[0.0]]))
    assert heavy[0, 0] > 0.5 * 0.02 and heavy[0, 0] > 5 * light[0, 0], "near capacity the batches grow"
    queued = batched_service(np.array([[0.02]]), table, np.array([0.02]), np.array([[5.0]]))
    assert queued[0, 0] == pytest.approx(0.03), "a backlog: full batches, half of the one in service waited"
    with pytest.raises(ValueError, match="one_over_full"):
        latency_table(np.array([0.0]), 32)
    with pytest.raises(ValueError, match="loads"):
        latency_table(np.array([0.5]), 32, loads=np.array([1.0]))
    with pytest.raises(ValueError, match="one column per load"):
        batched_service(np.array([0.1]), table[:, :3], np.array([0.02]), np.array([0.0]))


def test_the_simulator_serves_a_lightly_loaded_pool_faster_with_batching_than_at_the_full_batch():
    seconds = 600
    arrivals = np.full((seconds, 1), 50)  # a pool sized for 50/s at 80 %: well below its capacity
    members = np.ones((math.ceil(seconds / 60), 1, 1), dtype=bool)
    vm = (VMType("one", 1, 1.0, 1.0, np.full(seconds, 1.0)),)
    config = Config(launch_delay=30)
    full = Workload(arrivals, members, 60, np.array([1600.0]), np.array([20.0]))
    batching = Workload(arrivals, members, 60, np.array([1600.0]), np.array([20.0]),
                        service_table=latency_table(np.array([0.1]), 32))
    slow, fast = (simulate(w, make_policy("infaas"), vm, config) for w in (full, batching))
    assert check_invariants(fast, batching) == []
    assert np.nanmedian(slow.latency_s) == pytest.approx(0.020)
    assert np.nanmedian(fast.latency_s) < 0.004
    with pytest.raises(ValueError, match="service_table"):
        Workload(arrivals, members, 60, np.array([1600.0]), np.array([20.0]), service_table=np.ones((1, 3)))
