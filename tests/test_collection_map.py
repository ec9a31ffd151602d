"""The map of the collection: which claims it can place, where, and that it draws a figure that passes the checklist."""

import json
import math

import pytest

from mlsysrepro import collection_map


def claim(id, paper_value, measured, interval=None, kind="paper claim", verdict="holds"):
    return {"id": id, "kind": kind, "verdict": verdict, "paper_value": paper_value, "measured": measured,
            "interval": interval}


def test_a_claim_is_placed_at_our_value_over_the_papers_with_its_interval_alike():
    assert collection_map.placement(claim("C1", 2.0, 3.0, [2.5, 4.0])) == (1.5, 1.25, 2.0)
    assert collection_map.placement(claim("C1", 4.0, 1.0)) == (0.25, None, None)
    ratio, low, high = collection_map.placement(claim("C1", -0.5, -1.0, [-2.0, -0.5]))  # a negative paper value
    assert (ratio, low, high) == (2.0, 1.0, 4.0) and low <= ratio <= high


@pytest.mark.parametrize("paper_value, measured", [
    ("lowest on all 4 graphs", 0.9),  # a phrase: nothing to divide by
    (0.0, 0.19),  # a parity claim ("no loss"): no ratio to 0
    (1.23, None),  # not measured here
    (1.0, True),  # a yes/no result is not a number
    (float("nan"), 1.0),
])
def test_a_claim_without_two_numbers_is_not_placed(paper_value, measured):
    assert collection_map.placement(claim("C1", paper_value, measured)) is None


def test_the_map_shows_paper_claims_and_analogues_only_and_draws_them(tmp_path):
    results = {
        "a": {"claims": [claim("C1", 2.0, 3.0, [2.5, 4.0]),
                         claim("C2", "a phrase", 1.0, verdict="fails") | {"fragility": ["holds without x"]},
                         claim("F1", 1.0, 2.0, kind="our finding"), claim("K1", 1.0, 1.0, kind="consistency check")]},
        "b": {"claims": [claim("C1", 3.2, 4.3, kind="analogue"),
                         claim("C2", 3.2, None, verdict="not testable here")]},
    }
    points = collection_map.claim_points(results)
    assert list(zip(points.paper, points.id)) == [("a", "C1"), ("a", "C2"), ("b", "C1"), ("b", "C2")]
    assert points.ratio.tolist()[0] == 1.5 and math.isnan(points.ratio.tolist()[1])
    png = collection_map.write(points, tmp_path)  # raises if the figure fails the collection's checklist
    assert png.exists() and (tmp_path / "collection_map.svg").exists()
    drawn = json.loads((tmp_path / "collection_map.json").read_text())
    assert drawn[0] == {"paper": "a", "id": "C1", "kind": "paper claim", "verdict": "holds", "qualified": False,
                        "ratio": 1.5, "low": 1.25, "high": 2.0}
    assert drawn[1]["ratio"] is None and drawn[1]["qualified"] is True  # a fragile fail is marked as such
