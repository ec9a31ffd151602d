"""Weighted quantiles and accuracy-target attainment."""

import numpy as np
import pytest

from mlsysrepro.serving.metrics import target_attainment, weighted_quantiles


def test_weighted_quantiles_count_each_value_by_its_weight():
    values, weights = np.array([3.0, 1.0, 2.0, np.nan]), np.array([1, 8, 1, 0])
    assert weighted_quantiles(values, weights, [0.5, 0.85, 0.95]).tolist() == [1.0, 2.0, 3.0]
    assert np.isnan(weighted_quantiles(values, np.zeros(4), [0.5])).all()


def test_target_attainment_counts_requests_in_windows_that_met_the_target():
    admitted = np.array([10, 10, 10, 10])
    correct = np.array([10, 9, 5, 5])  # windows of 2 s: 19/20 and 10/20
    arrivals = np.array([10, 10, 10, 20])  # 10 requests of the last second were dropped
    assert target_attainment(admitted, correct, arrivals, 0.9, 2) == pytest.approx(20 / 50)
    assert target_attainment(admitted, correct, arrivals, 0.5, 2) == pytest.approx(40 / 50)
    with pytest.raises(ValueError, match="window"):
        target_attainment(admitted, correct, arrivals, 0.9, 0)


def test_the_all_requests_p99_counts_dropped_requests_at_the_timeout():
    from types import SimpleNamespace

    from mlsysrepro.serving.metrics import summary

    admitted = np.array([[980], [0]])
    dropped = np.array([[0], [20]])  # 2 % of the requests dropped: the p99 over arrivals is a dropped one
    run = SimpleNamespace(admitted=admitted, dropped=dropped, latency_s=np.array([[0.01], [np.nan]]),
                          models=np.ones((2, 1)), cost=1.0, vms=np.ones(2, dtype=int), vm_model=np.zeros(1),
                          vm_revoked=np.zeros(1, dtype=bool), vm_cost=np.ones(1), vm_spot=np.zeros(1, dtype=bool))
    row, = summary(run, np.array([[980], [0]]), np.array([50.0]), np.array([0.9]), window=1, timeout=2.0)
    assert row["latency_p99_ms"] == pytest.approx(10.0), "over the admitted requests alone"
    assert row["latency_p99_all_ms"] == pytest.approx(2000.0)
    fewer = SimpleNamespace(**{**vars(run), "admitted": np.array([[995], [0]]), "dropped": np.array([[0], [5]])})
    row, = summary(fewer, np.array([[995], [0]]), np.array([50.0]), np.array([0.9]), window=1, timeout=2.0)
    assert row["latency_p99_all_ms"] == pytest.approx(10.0), "0.5 % dropped: the p99 is still an answered one"
