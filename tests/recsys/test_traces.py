"""Trace loaders (counts of the registry's files), the Zipf fit, reuse statistics and the artifact's batching."""

import numpy as np
import pytest

from mlsysrepro.recsys import traces


def test_the_real_traces_have_the_artifacts_counts():
    medium, low = traces.load_real("medium"), traces.load_real("low")
    assert (medium.size, np.unique(medium).size) == (429_951, 102_524)
    assert (low.size, np.unique(low).size) == (379_910, 231_073)
    assert medium.max() < traces.TABLE_ROWS
    assert traces.load_hot_rows("low").size == 60_000


def test_the_artifacts_hot_lists_are_the_real_traces_top_rows():
    for name in traces.REAL:
        ids = traces.load_real(name)
        assert traces.coverage(ids, traces.load_hot_rows(name)) == pytest.approx(
            traces.coverage(ids, traces.top_rows(ids, 60_000)), abs=1e-6)


def test_meta_locality_reads_every_dataset():
    found = traces.meta_locality()
    assert len(found) == 33
    assert all(0 < d.reuse < 1 for d in found)
    assert traces.high_reuse_target().reuse == max(d.reuse for d in found)


def test_fit_zipf_recovers_the_reuse_it_was_given_and_reuse_rises_with_the_exponent():
    exponent = traces.fit_zipf(10_000, 20_000, 0.8)
    assert traces.expected_reuse(10_000, 20_000, exponent) == pytest.approx(0.8, abs=1e-4)
    assert traces.expected_reuse(10_000, 20_000, 0.5) < traces.expected_reuse(10_000, 20_000, 1.0)
    drawn = traces.zipf_trace(10_000, 20_000, exponent, seed=0)
    assert traces.reuse_ratio(drawn) == pytest.approx(0.8, abs=0.01)


def test_fit_zipf_refuses_a_reuse_below_chance():
    with pytest.raises(ValueError, match="reuse must be within"):
        traces.fit_zipf(1_000, 100, 0.0)


def test_reuse_stats_on_a_hand_made_trace():
    stats = traces.reuse_stats(np.array([1, 1, 1, 2, 3]), hot=np.array([1]), k=1)
    assert stats == {"accesses": 5, "unique": 3, "reuse": pytest.approx(0.4), "top_1_share": pytest.approx(0.6),
                     "hot_list_share": pytest.approx(0.6)}


def test_batches_read_the_trace_circularly_in_consecutive_runs():
    (first, offsets), (second, _) = traces.batches(np.arange(10), batch=2, pooling=3, count=2)
    assert first.tolist() == [0, 1, 2, 3, 4, 5] and offsets.tolist() == [0, 3]
    assert second.tolist() == [6, 7, 8, 9, 0, 1]


def test_load_trace_names_the_allowed_traces():
    with pytest.raises(ValueError, match="name must be one of"):
        traces.load_trace("hot")
    assert traces.load_trace("low", rows=1000).max() < 1000
