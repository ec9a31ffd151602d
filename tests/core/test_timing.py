import time

import pytest

from mlsysrepro.core.timing import Timing, interleaved, median_interval, ratios


def test_the_median_interval_is_the_binomial_order_statistic():
    assert median_interval([5, 1, 4, 2, 3]) == (1, 5)  # 5 samples: min and max (94 % coverage)
    assert median_interval(range(1, 11)) == (2, 9)  # 10 samples: P(B(10, 1/2) <= 1) = 11/1024 per side
    assert median_interval(range(1, 21)) == (6, 15)  # 20 samples: P(B(20, 1/2) <= 5) = 2.1 % per side
    with pytest.raises(ValueError, match="at least one sample"):
        median_interval([])


def test_rounds_alternate_their_order_and_setup_is_not_timed():
    calls, order = [], []

    def setup(name):
        time.sleep(0.02)  # untimed
        return name

    timings = interleaved({"a": calls.append, "b": calls.append}, repeats=4, warmup=1, setup=setup)
    order = calls[2:]  # after the warm-up calls a, b
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert all(len(t.samples) == 4 and t.median < 0.015 for t in timings.values())


def test_ratios_pair_each_round_with_the_baseline():
    timings = {"base": Timing((2.0, 4.0, 6.0)), "fast": Timing((1.0, 1.0, 2.0))}
    speedups = ratios(timings, "base")
    assert speedups["fast"].samples == (2.0, 4.0, 3.0) and speedups["fast"].median == 3.0
    assert speedups["base"].samples == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="baseline must be one of"):
        ratios(timings, "slow")


def test_a_slower_callable_is_measured_slower():
    timings = interleaved({"short": lambda: time.sleep(0.001), "long": lambda: time.sleep(0.01)}, repeats=3)
    low, high = timings["long"].interval
    assert timings["short"].median < timings["long"].median and low <= timings["long"].median <= high
