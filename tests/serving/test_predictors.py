"""Each load predictor on a sine trace; Holt-Winters' recursion against statsmodels' own fit."""

import numpy as np
import pytest

from mlsysrepro.serving.predictors import EWMA, HoltWinters, LSTMPredictor, forecast_error, make_predictor

SEASON = 60


def sine(minutes, phase=0):
    t = np.arange(phase, phase + minutes)
    return 100 + 40 * np.sin(2 * np.pi * t / SEASON)


@pytest.mark.parametrize("name, bound", [("holt_winters", 0.01), ("lstm", 0.08), ("ewma", 0.35)])
def test_each_predictor_forecasts_a_sine_trace(name, bound):
    history, future = sine(6 * SEASON), sine(2 * SEASON, phase=6 * SEASON)
    options = {"season": SEASON} if name == "holt_winters" else {}
    predictor = make_predictor(name, **options).fit(history)
    forecast = predictor.forecast(future, 3)
    assert forecast.shape == future.shape
    assert forecast_error(future, forecast, 3) < bound
    flat = np.full_like(future, history.mean())  # a forecast that ignores the signal does worse
    if name != "ewma":
        assert forecast_error(future, forecast, 3) < forecast_error(future, flat, 3)


def test_ewma_is_the_exponential_recursion_and_fit_picks_its_alpha():
    series = np.array([10.0, 20.0, 30.0, 20.0])
    level = EWMA(0.5).forecast(series, 1)
    assert level.tolist() == pytest.approx([10.0, 15.0, 22.5, 21.25])
    noisy = 100 + np.random.default_rng(0).normal(0, 10, 500)
    assert EWMA().fit(noisy).alpha <= 0.2, "white noise around a level wants heavy smoothing"


def test_holt_winters_continues_exactly_as_statsmodels_does_over_new_minutes():
    """The peer check: statsmodels run over history + future, from the state its fit on the history started at and
    with the same smoothing parameters, one-step fitted values equal to our recursion's forecasts of the future."""
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    rng = np.random.default_rng(0)
    series = sine(8 * SEASON) + np.cumsum(rng.normal(0, 2, 8 * SEASON))
    history, future = series[:4 * SEASON], series[4 * SEASON:]
    ours = HoltWinters(season=SEASON).fit(history)
    fitted = ExponentialSmoothing(history, trend="add", seasonal="add", seasonal_periods=SEASON,
                                  initialization_method="estimated").fit().params
    reference = ExponentialSmoothing(
        series, trend="add", seasonal="add", seasonal_periods=SEASON, initialization_method="known",
        initial_level=fitted["initial_level"], initial_trend=fitted["initial_trend"],
        initial_seasonal=fitted["initial_seasons"]).fit(
        smoothing_level=fitted["smoothing_level"], smoothing_trend=fitted["smoothing_trend"],
        smoothing_seasonal=fitted["smoothing_seasonal"], optimized=False)
    assert np.allclose(ours.forecast(future, 1)[:-1], reference.fittedvalues[4 * SEASON + 1:], atol=1e-6)


def test_predictors_refuse_misuse():
    with pytest.raises(ValueError, match="two seasons"):
        HoltWinters(season=SEASON).fit(sine(SEASON))
    with pytest.raises(RuntimeError, match="before fit"):
        HoltWinters().forecast(sine(10), 1)
    with pytest.raises(RuntimeError, match="before fit"):
        LSTMPredictor().forecast(sine(10), 1)
    with pytest.raises(ValueError, match="horizon must be"):
        EWMA().forecast(sine(10), 0)
    with pytest.raises(ValueError, match="predictor must be one of"):
        make_predictor("arima")
