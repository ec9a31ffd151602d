import pytest

from mlsysrepro.ddl.recommend import recommend

HOURS = {"small": 2.0, "medium": 0.6, "large": 0.5, "pair": 0.9}  # hours per epoch
PRICE = {"small": 1.0, "medium": 4.0, "large": 8.0, "pair": 8.0}  # $ per hour


def test_cheapest_configuration_within_the_budget():
    # 10 epochs: small 20 h $20, medium 6 h $24, large 5 h $40, pair 9 h $72
    assert recommend(HOURS, PRICE, 10, budget_hours=30).choice == "small"
    rec = recommend(HOURS, PRICE, 10, budget_hours=10)
    assert rec.choice == "medium" and rec.hours == pytest.approx(6) and rec.cost == pytest.approx(24)
    assert recommend(HOURS, PRICE, 10, budget_hours=5).choice == "large"  # the budget is inclusive
    assert rec.fastest == "large"


def test_an_infeasible_budget_says_so_and_names_the_fastest():
    rec = recommend(HOURS, PRICE, 10, budget_hours=4)
    assert not rec.feasible and rec.choice is None
    assert rec.fastest == "large" and rec.hours == pytest.approx(5) and rec.cost == pytest.approx(40)
    assert "none meets the 4 h budget; the fastest, large, needs 5 h" in str(rec)


def test_equal_cost_goes_to_the_faster():
    rec = recommend({"a": 2.0, "b": 1.0}, {"a": 1.0, "b": 2.0}, 1, budget_hours=3)
    assert rec.choice == "b"


def test_bad_tables_are_refused():
    with pytest.raises(ValueError, match="no price"):
        recommend({"a": 1.0}, {}, 1, 1)
    with pytest.raises(ValueError, match="empty"):
        recommend({}, {}, 1, 1)
    with pytest.raises(ValueError, match="budget_hours"):
        recommend({"a": 1.0}, {"a": 1.0}, 1, 0)
