"""Arrival traces: diurnal shapes from the registry's submission times, per-second counts, the Wikipedia loader."""

import gzip

import numpy as np
import pytest

from mlsysrepro.serving import traces


def test_a_folded_shape_repeats_every_day_and_has_mean_one():
    seconds = np.random.default_rng(0).uniform(0, 30 * traces.DAY, 5000)
    seconds = np.r_[seconds, 10 * traces.DAY + np.full(3000, 3600 * 14.0)]  # a crowd at 14:00
    shape = traces.daily_shape(seconds, 2, "folded")
    assert shape.shape == (2 * traces.MINUTES,) and shape.mean() == pytest.approx(1.0)
    assert np.allclose(shape[:traces.MINUTES], shape[traces.MINUTES:])
    assert abs(np.argmax(shape[:traces.MINUTES]) - 14 * 60) <= 30


def test_consecutive_days_follow_the_trace_and_pick_the_busiest_stretch():
    seconds = np.r_[np.linspace(0, 2 * traces.DAY, 100), 5 * traces.DAY + np.linspace(0, traces.DAY, 5000),
                    9 * traces.DAY]
    shape = traces.daily_shape(seconds, 1, "consecutive")
    assert shape.shape == (traces.MINUTES,) and shape.min() > 0
    with pytest.raises(ValueError, match="start_day \\+ days"):
        traces.daily_shape(seconds, 5, "consecutive", start_day=6)
    with pytest.raises(ValueError, match="mode must be one of"):
        traces.daily_shape(seconds, 1, "weekly")


def test_per_second_arrivals_average_the_requested_rate():
    shape = np.ones(600)
    arrivals = traces.per_second_arrivals(shape, 50.0, seed=0, burst_shape=np.inf)
    assert arrivals.shape == (600 * 60,) and arrivals.mean() == pytest.approx(50.0, rel=0.01)
    bursty = traces.per_second_arrivals(shape, 50.0, seed=0, burst_shape=2.0)
    assert traces.per_minute(bursty).std() > 3 * traces.per_minute(arrivals).std()
    assert np.array_equal(arrivals, traces.per_second_arrivals(shape, 50.0, seed=0, burst_shape=np.inf))
    with pytest.raises(ValueError, match="mean_rate"):
        traces.per_second_arrivals(shape, 0.0, 0)


def test_the_registry_trace_gives_a_diurnal_day():
    seconds = traces.submission_times("openb")
    assert len(seconds) > 8000 and seconds[0] == 0
    shape = traces.daily_shape(seconds, 1, "folded")
    assert shape.max() / shape.min() > 1.5, "the load varies over the day"
    with pytest.raises(ValueError, match="source must be one of"):
        traces.submission_times("wikipedia")


def test_wikipedia_pageview_dumps_load_per_hour(tmp_path):
    lines = ["en Main_Page 120 0", "en Cat 30 0", "de Hauptseite 500 0", "en.m Main_Page 70 0"]
    for hour in (0, 1):
        with gzip.open(tmp_path / f"pageviews-20160101-0{hour}0000.gz", "wt") as dump:
            dump.write("\n".join(lines[: 4 - hour]) + "\n")
    views = traces.load_wikipedia_pageviews(sorted(tmp_path.glob("*.gz")), project="en")
    assert views.tolist() == [150, 150] and str(views.index[1]) == "2016-01-01 01:00:00+00:00"
    shape = traces.shape_from_hourly(np.array([1.0, 3.0]))
    assert shape.shape == (120,) and shape.mean() == pytest.approx(1.0)
    (tmp_path / "pageviews-20160101-020000").write_text("en only-three-fields 1\n")
    with pytest.raises(ValueError, match="4 space-separated fields"):
        traces.load_wikipedia_pageviews([tmp_path / "pageviews-20160101-020000"])
    with pytest.raises(ValueError, match="not a pageview dump name"):
        traces.load_wikipedia_pageviews([tmp_path / "views.txt"])
