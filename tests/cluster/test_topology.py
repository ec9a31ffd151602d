import pytest

from mlsysrepro.cluster.topology import Link, Topology

LINKS = (Link(100.0, 1.0), Link(10.0, 2.0), Link(5.0, 3.0))


def cluster(contention=1.0):
    return Topology(racks=2, machines_per_rack=2, gpus_per_machine=4, links=LINKS, contention=contention)


def test_levels_of_placements():
    topo = cluster()
    assert topo.gpus == 16
    assert topo.level([0, 1, 2, 3]) == 0  # one machine
    assert topo.level([2, 3, 4, 5]) == 1  # machines 0 and 1, rack 0
    assert topo.level([7, 8]) == 2  # racks 0 and 1


def test_allreduce_cost_by_hand():
    """200 bytes: one machine, 4 GPUs: 2*3/4*200/100 + 2*3*1 = 9. Two machines of one rack with 2 GPUs each:
    machine ring 2*1/2*200/100 + 2*1*1 = 4, rack ring 2*1/2*200/10 + 2*1*2 = 24; total 28."""
    topo = cluster()
    assert topo.allreduce_seconds(200, [0, 1, 2, 3]) == pytest.approx(9.0)
    assert topo.allreduce_seconds(200, [0, 1, 4, 5]) == pytest.approx(28.0)
    assert topo.allreduce_seconds(200, [5]) == 0.0


def test_spreading_a_job_across_racks_slows_it_and_congestion_more():
    topo, congested = cluster(), cluster(contention=4.0)
    inside, rack, racks = [0, 1, 2, 3], [2, 3, 4, 5], [2, 3, 8, 9]
    times = [topo.allreduce_seconds(1000, g) for g in (inside, rack, racks)]
    assert times[0] < times[1] < times[2]
    assert congested.allreduce_seconds(1000, racks) > times[2]
    assert congested.allreduce_seconds(1000, rack) == times[1]  # contention is on the cross-rack network only


def test_bad_placements_and_shapes_are_rejected():
    topo = cluster()
    with pytest.raises(ValueError, match="at least one GPU"):
        topo.level([])
    with pytest.raises(ValueError, match=r"GPU ids must be in \[0, 16\)"):
        topo.level([3, 16])
    with pytest.raises(ValueError, match="twice"):
        topo.allreduce_seconds(10, [1, 1])
    with pytest.raises(ValueError, match="racks must be >= 1"):
        Topology(0, 1, 1)
