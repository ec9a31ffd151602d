import numpy as np
import pandas as pd
import pytest

from mlsysrepro.ddl.macro import fit_features, fit_line


def test_an_exact_line_is_recovered_with_r2_one():
    fit = fit_line([1, 2, 3, 4], [3, 5, 7, 9], "layers")
    assert fit.slope == pytest.approx(2) and fit.intercept == pytest.approx(1) and fit.r2 == pytest.approx(1)
    assert fit.predict([10]) == pytest.approx([21])


def test_the_feature_that_explains_the_stall_wins():
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"layers": rng.integers(10, 150, 30), "gradient_tensors": rng.integers(20, 400, 30),
                          "gradient_bytes": rng.uniform(1e6, 2e7, 30)})
    table["stall_ms"] = 3 + 2e-6 * table.gradient_bytes + rng.normal(0, 0.1, 30)
    fits = fit_features(table, "stall_ms")
    assert fits["gradient_bytes"].r2 > 0.99 > 0.3 > fits["layers"].r2


def test_too_few_points_are_refused():
    with pytest.raises(ValueError, match="at least 3"):
        fit_line([1, 2], [1, 2])
