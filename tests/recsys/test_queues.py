"""The closed-form FIFO servers against the job-by-job recursion and hand calculations."""

import numpy as np
import pytest

from mlsysrepro.recsys.queues import completion, fifo, fifo_reference


def test_a_busy_server_serves_back_to_back_and_an_idle_one_at_arrival():
    assert fifo(np.array([0.0, 0.0, 0.0]), 1.0).tolist() == [1.0, 2.0, 3.0]
    assert fifo(np.array([0.0, 5.0, 5.5]), 1.0).tolist() == [1.0, 6.0, 7.0]


def test_servers_are_independent_and_order_is_by_arrival():
    departures = fifo(np.array([3.0, 0.0, 0.0, 1.0]), np.array([1.0, 2.0, 1.0, 1.0]), np.array([0, 0, 1, 1]))
    assert departures.tolist() == [4.0, 2.0, 1.0, 2.0]


def test_equals_the_job_by_job_recursion():
    rng = np.random.default_rng(0)
    arrivals, service, servers = rng.random(5000), rng.random(5000) * 1e-3, rng.integers(0, 17, 5000)
    assert np.allclose(fifo(arrivals, service, servers), fifo_reference(arrivals, service, servers), atol=1e-12)


def test_negative_service_is_refused():
    with pytest.raises(ValueError, match="service"):
        fifo(np.array([0.0]), -1.0)


def test_completion_takes_each_groups_latest():
    assert completion(np.array([1.0, 5.0, 2.0]), np.array([0, 0, 1]), 3).tolist() == [5.0, 2.0, -np.inf]
