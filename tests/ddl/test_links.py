import pytest

from mlsysrepro.ddl.emulation import EmulatedCluster
from mlsysrepro.ddl.links import LINKS, Link, allreduce_seconds


def test_one_worker_communicates_nothing():
    assert allreduce_seconds(1e9, 1, 1, None, None) == 0.0


def test_ring_inside_one_machine_by_hand():
    # 4 workers on NVLink: 2*3 steps of alpha, and 2*3/4 of the buffer over beta
    nv = LINKS["nvlink2"]
    expected = 6 * nv.alpha + 1.5 * 8e6 / nv.beta
    assert allreduce_seconds(8e6, 1, 4, "nvlink2", None) == pytest.approx(expected, rel=1e-12)


def test_hierarchical_two_machines_by_hand_and_dilated():
    # 2 machines x 4 workers: the intra ring as above plus 2*(2-1) network steps carrying 2*(1/2) of the buffer
    nv, net = LINKS["nvlink2"], LINKS["net10"]
    b = 2.8e6
    expected = 6 * nv.alpha + 1.5 * b / nv.beta + 2 * net.alpha + b / net.beta
    assert allreduce_seconds(b, 2, 4, "nvlink2", "net10") == pytest.approx(expected, rel=1e-12)
    cluster = EmulatedCluster(2, 4, "nvlink2", "net10", dilation=150.0)
    assert cluster.allreduce_seconds(b) == pytest.approx(150 * expected, rel=1e-12)
    assert cluster.workers == 8


def test_network_dominates_interconnect_for_the_same_workers():
    b = 10e6
    assert allreduce_seconds(b, 2, 4, "nvlink2", "net10") > 5 * allreduce_seconds(b, 1, 8, "nvlink2", None)


def test_missing_or_unknown_links_are_named():
    with pytest.raises(ValueError, match="intra-machine link"):
        allreduce_seconds(1e6, 1, 4, None, None)
    with pytest.raises(ValueError, match="network link"):
        allreduce_seconds(1e6, 2, 1, None, None)
    with pytest.raises(ValueError, match=r"link must be one of \['net10'"):
        allreduce_seconds(1e6, 1, 2, "infiniband", None)


def test_every_profile_cites_its_source():
    for link in LINKS.values():
        assert isinstance(link, Link) and link.alpha > 0 and link.beta > 0 and len(link.source) > 20


def test_a_link_object_can_stand_in_for_a_name():
    measured = Link("shaped veth", alpha=1e-3, beta=50e6, source="a tc-shaped veth pair")
    # two machines of one worker: 2 alpha + 2 * (1/2) of the buffer over beta
    assert allreduce_seconds(4e6, 2, 1, None, measured) == pytest.approx(2e-3 + 4e6 / 50e6, rel=1e-12)
