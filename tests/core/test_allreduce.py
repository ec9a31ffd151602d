import pytest

from mlsysrepro.core.allreduce import ring_allreduce_seconds


def test_ring_cost_by_hand():
    # 4 participants: 6 steps of 1 ms, and 6/4 of 8 MB at 1 GB/s
    assert ring_allreduce_seconds(8e6, 4, 1e9, 1e-3) == pytest.approx(6e-3 + 12e-3, rel=1e-12)
    assert ring_allreduce_seconds(8e6, 1, 1e9, 1e-3) == 0.0


def test_no_participants_is_refused():
    with pytest.raises(ValueError, match="participants"):
        ring_allreduce_seconds(1.0, 0, 1.0, 0.0)
