import pytest

from mlsysrepro.ddl.stalls import data_stalls, interconnect_stall, network_stall, share


def test_data_stalls_on_hand_made_timings():
    # synthetic 0.20 s, cached (adds prep) 0.26 s, cold (adds fetch) 0.31 s per iteration
    d = data_stalls(run1=0.20, run2=0.31, run3=0.26)
    assert d.prep == pytest.approx(0.06)
    assert d.fetch == pytest.approx(0.05)  # DS-Analyzer: RUN2 - RUN3
    assert d.fetch_fork == pytest.approx(0.25)  # the fork: RUN2 - prep, which keeps compute inside "fetch"
    assert d.prep_share == pytest.approx(0.06 / 0.26)
    assert d.fetch_share == pytest.approx(0.05 / 0.31)


def test_interconnect_and_network_stalls_on_hand_made_timings():
    seconds, part = interconnect_stall(run0=0.1, run1=0.4)
    assert seconds == pytest.approx(0.3) and part == pytest.approx(0.75)
    seconds, part, slowdown = network_stall(one_machine=0.4, two_machines=1.6)
    assert seconds == pytest.approx(1.2) and part == pytest.approx(3.0) and slowdown == pytest.approx(4.0)


def test_noise_below_zero_is_no_stall_but_is_kept_as_measured():
    d = data_stalls(run1=0.20, run2=0.21, run3=0.19)
    assert d.prep == pytest.approx(-0.01) and d.prep_share == 0.0
    assert share(-1.0, 2.0) == 0.0
    with pytest.raises(ValueError, match="total time"):
        share(1.0, 0.0)
