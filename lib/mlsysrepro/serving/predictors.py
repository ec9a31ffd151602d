"""Load predictors for proactive autoscaling: EWMA, Holt-Winters and a small LSTM, one contract.

Cocktail's proactive controller (after MArk) forecasts the arrival rate and provisions VMs ahead of it, because a
VM takes a minute or more to boot. Its predictor is an LSTM on the differenced, min-max scaled rate
(``load_predictor.py`` in the authors' code). Every predictor here works on a per-minute rate series and speaks
one contract:

- ``fit(history)`` — learn from past minutes (the days before the served one);
- ``forecast(series, horizon)`` — for every minute ``t`` of ``series``, the rate predicted for minute
  ``t + horizon`` from ``series[: t + 1]`` alone (so entry ``t`` can be used at minute ``t``), in one call.

:func:`forecast_error` scores a forecast against what came (mean absolute percentage error).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.signal import lfilter
from torch import nn


def _check(series: np.ndarray, horizon: int) -> np.ndarray:
    series = np.asarray(series, dtype=float)
    if series.ndim != 1 or series.size == 0:
        raise ValueError(f"series must be a non-empty 1-D per-minute rate, got shape {series.shape}")
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1 minute, got {horizon}")
    return series


@dataclass
class EWMA:
    """An exponentially weighted moving average, ``level_t = alpha * y_t + (1 - alpha) * level_{t-1}``, forecast flat
    at the level; ``fit`` picks ``alpha`` from a grid by the history's one-step error."""

    alpha: float = 0.3
    name: str = "EWMA"

    def fit(self, history: np.ndarray) -> "EWMA":
        history = _check(history, 1)
        grid = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
        errors = [forecast_error(history, EWMA(a).forecast(history, 1), 1) for a in grid]
        self.alpha = grid[int(np.argmin(errors))]
        return self

    def forecast(self, series: np.ndarray, horizon: int) -> np.ndarray:
        series = _check(series, horizon)
        level, _ = lfilter([self.alpha], [1, self.alpha - 1], series, zi=[(1 - self.alpha) * series[0]])
        return level


@dataclass
class HoltWinters:
    """Additive Holt-Winters: level, trend and a seasonal term of ``season`` minutes (a day), with the smoothing
    parameters fitted by statsmodels' ``ExponentialSmoothing`` on the history (which needs two whole seasons) and
    the same recursions run forward over new minutes:

    ``l_t = a (y_t - s_{t-m}) + (1 - a)(l_{t-1} + b_{t-1})``, ``b_t = b* (l_t - l_{t-1}) + (1 - b*) b_{t-1}``,
    ``s_t = g (y_t - l_t) + (1 - g) s_{t-m}``; forecast ``l_t + h b_t + s_{t+h-m}`` (Hyndman & Athanasopoulos, FPP3
    Sec. 8.3)."""

    season: int = 1440
    name: str = "Holt-Winters"
    params: dict = field(default_factory=dict)
    state: tuple = ()

    def fit(self, history: np.ndarray) -> "HoltWinters":
        from statsmodels.tools.sm_exceptions import ConvergenceWarning
        from statsmodels.tsa.holtwinters import ExponentialSmoothing

        history = _check(history, 1)
        if history.size < 2 * self.season:
            raise ValueError(f"Holt-Winters needs two seasons of history ({2 * self.season} minutes), got "
                             f"{history.size}")
        with warnings.catch_warnings():  # the optimiser may stop at its iteration cap; the fit it returns is used
            warnings.simplefilter("ignore", ConvergenceWarning)
            fitted = ExponentialSmoothing(history, trend="add", seasonal="add", seasonal_periods=self.season,
                                          initialization_method="estimated").fit()
        self.params = {k: float(fitted.params[k]) for k in ("smoothing_level", "smoothing_trend",
                                                            "smoothing_seasonal")}
        self.state = (float(fitted.level[-1]), float(fitted.trend[-1]), np.asarray(fitted.season[-self.season:]))
        return self

    def forecast(self, series: np.ndarray, horizon: int) -> np.ndarray:
        """Continues from the end of the history ``fit`` saw: ``series`` is the minutes right after it."""
        series = _check(series, horizon)
        if not self.state:
            raise RuntimeError("HoltWinters.forecast before fit: fit it on the days before the series")
        a, beta, g = (self.params[k] for k in ("smoothing_level", "smoothing_trend", "smoothing_seasonal"))
        level, trend, seasonal = self.state
        seasons = list(seasonal)  # seasons[-m] is s_{t-m}
        out = np.empty(series.size)
        m = self.season
        for t, y in enumerate(series):  # a recursion: each minute needs the previous one's state
            previous = level
            level = a * (y - seasons[-m]) + (1 - a) * (level + trend)
            trend = beta * (level - previous) + (1 - beta) * trend
            seasons.append(g * (y - level) + (1 - g) * seasons[-m])
            out[t] = level + horizon * trend + seasons[-m + (horizon - 1) % m]
        return out


class _Net(nn.Module):
    def __init__(self, hidden: int, horizon: int):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, batch_first=True)
        self.head = nn.Linear(hidden, horizon)

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


@dataclass
class LSTMPredictor:
    """Cocktail's predictor, small: an LSTM over the last ``window`` minutes of the differenced, min-max scaled rate
    predicts the next ``max_horizon`` differences; the forecast adds them back to the last observed rate."""

    window: int = 30
    hidden: int = 16
    max_horizon: int = 10
    epochs: int = 30
    seed: int = 0
    name: str = "LSTM"
    net: _Net | None = None
    scale: tuple = ()

    def _windows(self, diffs: np.ndarray) -> torch.Tensor:
        low, high = self.scale
        scaled = torch.tensor((diffs - low) / (high - low), dtype=torch.float32)
        return scaled.unfold(0, self.window, 1).unsqueeze(-1)  # (n, window, 1)

    def fit(self, history: np.ndarray) -> "LSTMPredictor":
        history = _check(history, 1)
        diffs = np.diff(history)
        if diffs.size < self.window + self.max_horizon:
            raise ValueError(f"the LSTM needs at least {self.window + self.max_horizon + 1} minutes of history, "
                             f"got {history.size}")
        self.scale = (float(diffs.min()), float(diffs.max()) + 1e-9)
        torch.manual_seed(self.seed)
        generator = torch.Generator().manual_seed(self.seed)
        self.net = _Net(self.hidden, self.max_horizon)
        inputs = self._windows(diffs[:-self.max_horizon])
        low, high = self.scale
        targets = torch.tensor((diffs - low) / (high - low), dtype=torch.float32)
        targets = targets[self.window:].unfold(0, self.max_horizon, 1)[:len(inputs)]
        optimiser = torch.optim.Adam(self.net.parameters(), lr=1e-2)
        for _ in range(self.epochs):
            for batch in torch.randperm(len(inputs), generator=generator).split(256):
                optimiser.zero_grad()
                nn.functional.mse_loss(self.net(inputs[batch]), targets[batch]).backward()
                optimiser.step()
        return self

    def forecast(self, series: np.ndarray, horizon: int) -> np.ndarray:
        """Minutes with fewer than ``window`` differences behind them are forecast flat at their last rate."""
        series = _check(series, horizon)
        if self.net is None:
            raise RuntimeError("LSTMPredictor.forecast before fit")
        if horizon > self.max_horizon:
            raise ValueError(f"horizon must be at most max_horizon={self.max_horizon} minutes, got {horizon}")
        out = series.copy()
        diffs = np.diff(series)
        if diffs.size >= self.window:
            with torch.inference_mode():
                scaled = self.net(self._windows(diffs))[:, :horizon].numpy()
            low, high = self.scale
            ahead = (scaled * (high - low) + low).sum(1)
            out[self.window:] = series[self.window:] + ahead
        return np.maximum(out, 0.0)


PREDICTORS = {"ewma": EWMA, "holt_winters": HoltWinters, "lstm": LSTMPredictor}


def make_predictor(name: str, **options):
    if name not in PREDICTORS:
        raise ValueError(f"predictor must be one of {sorted(PREDICTORS)}, got {name!r}")
    return PREDICTORS[name](**options)


def forecast_error(series: np.ndarray, forecasts: np.ndarray, horizon: int) -> float:
    """Mean absolute percentage error of ``forecasts[t]`` against ``series[t + horizon]`` (minutes with a
    positive rate)."""
    series, forecasts = np.asarray(series, dtype=float), np.asarray(forecasts, dtype=float)
    actual, predicted = series[horizon:], forecasts[:-horizon]
    mask = actual > 0
    return float(np.mean(np.abs(predicted[mask] - actual[mask]) / actual[mask]))
