"""The template notebook's one tiny experiment: mini-batch gradient noise falls as 1/B.

Serves ``notebooks/_template.ipynb``, the starting point of every paper notebook. For
least-squares regression at its optimum ``w*`` the full gradient is zero, and a mini-batch
gradient of ``B`` examples drawn with replacement has

    E ||g_B - g||^2 = tr(Sigma) / B                                            (1)

where ``Sigma`` is the covariance of the per-example gradients ``g_i = x_i (x_i^T w* - y_i)``
(e.g. Bottou, Curtis & Nocedal, "Optimization Methods for Large-Scale Machine Learning",
SIAM Review 2018, Sec. 4). The same quantity is what MVS-GNN's sampler minimises.

Public entry points: :data:`PRESETS`, :data:`CLAIMS`, :func:`make_regression`, :func:`fit_least_squares` (and :func:`optimum`,
the same cached), :func:`per_example_gradients`, :func:`minibatch_gradient_variance`, :func:`loglog_slope` and the claim's measurement :func:`inverse_batch_law`.
"""

from __future__ import annotations

import torch

from ..core import Claim, Measurement, cached, progress, within

PRESETS = {
    "smoke": dict(n_samples=2_000, n_features=8, n_draws=64, max_batch_log2=6, fit_steps=50),
    "default": dict(n_samples=20_000, n_features=16, n_draws=400, max_batch_log2=8, fit_steps=300),
    "paper": dict(n_samples=200_000, n_features=64, n_draws=2_000, max_batch_log2=10, fit_steps=1_000),
}

#: Each knob's inclusive bounds (None: unbounded), checked by ``resolve``: a count of 0 would measure nothing.
RANGES = {"n_samples": (2, None), "n_features": (1, None), "n_draws": (2, None), "max_batch_log2": (1, 20),
          "fit_steps": (1, None)}

CLAIMS = (
    Claim("C1", "Mini-batch gradient variance is inversely proportional to the batch size", where="eq. (1)",
          paper_value=-1.0, unit="log-log slope of E||g_B - g||^2 against B", rule=within(-1.1, -0.9),
          over="batch sizes 1, 2, 4, ..., 2**max_batch_log2 at the least-squares optimum", near=0.1,
          control="batches of one example repeated B times (draws not independent): the variance cannot fall with B",
          no_power_check="eq. (1) is exact in expectation, so the effect is always there to show; the negative "
                         "control shows that the rule can fail"),
)


def make_regression(n_samples: int, n_features: int, generator: torch.Generator, noise: float = 0.5):
    """Gaussian features, a random true weight vector and Gaussian label noise."""
    x = torch.randn(n_samples, n_features, generator=generator)
    w_true = torch.randn(n_features, generator=generator)
    y = x @ w_true + noise * torch.randn(n_samples, generator=generator)
    return x, y


def fit_least_squares(x: torch.Tensor, y: torch.Tensor, steps: int, lr: float = 0.5) -> torch.Tensor:
    """Full-batch gradient descent on the mean squared error ``0.5 * mean((x w - y)^2)``."""
    w = torch.zeros(x.shape[1])
    for _ in progress(range(steps), "full-batch GD"):
        w -= lr * x.T @ (x @ w - y) / len(y)
    return w


def optimum(settings, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """:func:`fit_least_squares` for the run's data, cached by the knobs that make the data and the fit."""
    return cached("w_star", settings, lambda: fit_least_squares(x, y, settings.fit_steps),
                  knobs=("n_samples", "n_features", "fit_steps"))


def per_example_gradients(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``g_i = x_i (x_i^T w - y_i)``, one row per example."""
    return x * (x @ w - y)[:, None]


def minibatch_gradient_variance(
    grads: torch.Tensor, batch_sizes: list[int], n_draws: int, generator: torch.Generator, repeated: bool = False
) -> torch.Tensor:
    """Monte-Carlo ``E ||g_B - g||^2`` for each batch size, all draws of one size in one gather. ``repeated``: each
    batch is one example drawn B times, eq. (1)'s independence taken away (C1's negative control: no fall with B)."""
    full = grads.mean(0)
    out = []
    for b in batch_sizes:
        idx = (torch.randint(len(grads), (n_draws, 1), generator=generator).expand(n_draws, b) if repeated else
               torch.randint(len(grads), (n_draws, b), generator=generator))
        batch_means = grads[idx].mean(1)  # (n_draws, d)
        out.append(((batch_means - full) ** 2).sum(1).mean())
    return torch.stack(out)


def theoretical_variance(grads: torch.Tensor, batch_sizes: list[int]) -> torch.Tensor:
    """Equation (1): ``tr(Sigma) / B`` with ``Sigma`` the (biased) covariance of the rows of ``grads``."""
    trace = ((grads - grads.mean(0)) ** 2).sum(1).mean()
    return trace / torch.tensor(batch_sizes, dtype=grads.dtype)


def loglog_slope(x: list[float] | torch.Tensor, y: list[float] | torch.Tensor) -> float:
    """Least-squares slope of ``log y`` against ``log x``."""
    lx, ly = torch.log(torch.as_tensor(x, dtype=torch.float64)), torch.log(torch.as_tensor(y, dtype=torch.float64))
    lx, ly = lx - lx.mean(), ly - ly.mean()
    return float((lx * ly).sum() / (lx * lx).sum())


def inverse_batch_law(batch_sizes: list[int], variances: torch.Tensor) -> Measurement:
    """Claim C1's measurement: the log-log slope of the measured variance against the batch size (eq. (1): -1)."""
    return Measurement(loglog_slope(batch_sizes, variances),
                       note="log-log slope of the Monte-Carlo variance; fewer draws (smoke scale) make it noisier")
