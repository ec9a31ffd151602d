"""AWS instance prices: the on-demand table and the spot-price history as a per-second series."""

import numpy as np
import pytest

from mlsysrepro.core import cloud


def test_spot_series_hold_each_recorded_price_until_the_next():
    series = cloud.spot_price_series("p3.2xlarge", 86_400)
    assert series.shape == (86_400,) and np.all(series > 0)
    assert len(np.unique(series)) > 1, "the history moves within its first day"
    changes = np.flatnonzero(np.diff(series))
    assert len(changes) < 100, "a step function: few changes in a day"
    assert np.median(series) < cloud.INSTANCE_TYPES["p3.2xlarge"].on_demand


def test_median_spot_prices_cover_every_instance_type():
    prices = cloud.spot_prices()
    assert set(cloud.INSTANCE_TYPES) <= set(prices)
    with pytest.raises(ValueError, match="instance must be one of"):
        cloud.instance_type("m5.large")
    with pytest.raises(ValueError, match="seconds must be"):
        cloud.spot_price_series("p2.xlarge", 0)
