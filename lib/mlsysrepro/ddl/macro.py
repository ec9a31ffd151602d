"""The macroscopic-feature model: communication stall against a network's layers, gradient tensors and bytes.

For each feature ``x`` (one at a time) an ordinary least-squares line ``stall = a + b x`` is fitted over the
models of the depth sweep, and its coefficient of determination ``R^2 = 1 - SS_res / SS_tot`` says how much of the
stall the feature explains. The ResNet ablations separate the features: without BatchNorm a network keeps its
layers but loses two gradient tensors per norm; without shortcuts it loses the projection convolutions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LinearFit:
    feature: str
    intercept: float
    slope: float
    r2: float

    def predict(self, x):
        return self.intercept + self.slope * np.asarray(x, dtype=float)


def fit_line(x, y, feature: str = "x") -> LinearFit:
    """Least squares ``y = a + b x`` and its R^2 (0 when ``y`` is constant)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) != len(y) or len(x) < 3:
        raise ValueError(f"need at least 3 matching points, got {len(x)} x and {len(y)} y")
    slope, intercept = np.polyfit(x, y, 1)
    residual = ((y - (intercept + slope * x)) ** 2).sum()
    total = ((y - y.mean()) ** 2).sum()
    return LinearFit(feature, float(intercept), float(slope), float(1 - residual / total) if total > 0 else 0.0)


def fit_features(table, target: str, features=("layers", "gradient_tensors", "gradient_bytes")) -> dict[str, LinearFit]:
    """One :class:`LinearFit` of ``table[target]`` per feature column (``table``: a pandas DataFrame)."""
    return {f: fit_line(table[f], table[target], f) for f in features}
