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
