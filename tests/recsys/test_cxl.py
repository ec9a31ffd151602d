"""The CXL model: one row's latency against its hops, bytes per design, conservation, buffer accounting, and that
a link moving more bytes takes longer."""

import numpy as np
import pytest

from mlsysrepro.recsys import cxl


def make(rows_per_bag, bags, tables=1, dim=64, table_rows=1000, seed=0, hosts=1):
    rng = np.random.default_rng(seed)
    streams = [(rng.integers(0, table_rows, rows_per_bag * bags), np.arange(bags) * rows_per_bag)
               for _ in range(hosts)]
    return cxl.lookups(streams, tables, table_rows, dim)


def test_one_row_through_pond_is_the_sum_of_its_hops():
    system = cxl.System(host_add_s_per_row=30e-9)
    one = cxl.lookups([(np.array([7]), np.array([0]))], 1, 1000, 64)
    row = 256
    expected = (64 / system.upstream_bytes_per_s + system.host_hop_s + 64 / system.downstream_bytes_per_s
                + system.device_hop_s + system.controller_s + system.bank_busy_s + row / system.channel_bytes_per_s
                + row / system.downstream_bytes_per_s + system.device_hop_s + row / system.upstream_bytes_per_s
                + system.host_hop_s + 30e-9)
    assert cxl.simulate(one, system, cxl.DESIGNS["pond"]).latency_s == pytest.approx(expected, rel=1e-12)
    local = cxl.simulate(one, system, cxl.DESIGNS["local"]).latency_s
    assert local == pytest.approx(system.controller_s + system.bank_busy_s + row / system.channel_bytes_per_s
                                  + 30e-9, rel=1e-12)


def test_bytes_per_design_follow_the_analysis():
    lookups = make(rows_per_bag=20, bags=50, tables=2)
    system = cxl.System()
    pond = cxl.simulate(lookups, system, cxl.DESIGNS["pond"])
    pifs = cxl.simulate(lookups, system, cxl.DESIGNS["pifs_pooling"])
    beacon = cxl.simulate(lookups, system, cxl.DESIGNS["beacon"])
    assert pond.bytes["switch to host"] == 2000 * 256 and pond.bytes["host to switch"] == 2000 * 64
    assert pifs.bytes["switch to host"] == 100 * 256  # one vector per bag (50 bags x 2 tables)
    assert pifs.bytes["host to switch"] == 100 * 64 + 2000 * 8  # a header and the indices per bag
    parts = len(np.unique(lookups.bag * system.devices + cxl.device_of(lookups, system, "page")))
    assert beacon.bytes["switch to host"] == parts * 256


def test_every_lookup_is_read_once_from_dram_or_the_buffer():
    lookups = make(rows_per_bag=30, bags=40, table_rows=50)  # few rows: the buffer hits
    system = cxl.System(buffer_bytes=16 * 256)
    hits = cxl.buffer_hits(lookups, system, "lru")
    assert 0 < hits.sum() < hits.size
    result = cxl.simulate(lookups, system, cxl.DESIGNS["pifs_buffer"], hits)
    assert result.buffer_hits + result.bytes["dram"] / 256 == lookups.row.size


def test_global_hotness_hits_exactly_the_pinned_rows():
    lookups = cxl.lookups([(np.array([1, 2, 3, 1, 9]), np.array([0]))], 1, 100, 64)
    system = cxl.System(buffer_bytes=2 * 256)
    assert cxl.buffer_hits(lookups, system, "global", hot=np.array([1, 9, 3])).tolist() == [
        True, False, False, True, True]


def test_a_half_pinned_buffer_keeps_an_lru_half_for_the_rows_the_hot_list_leaves_out():
    # 4 rows of buffer: half pinned to row 1, half an LRU over the rest; row 7 repeats within the batch
    lookups = cxl.lookups([(np.array([1, 7, 7, 5, 7, 1]), np.array([0]))], 1, 100, 64)
    pinned_only = cxl.System(buffer_bytes=4 * 256, buffer_ways=1)
    hybrid = cxl.System(buffer_bytes=4 * 256, buffer_ways=1, hotness_pinned_share=0.5)
    hot = np.array([1, 9, 3, 4])
    assert cxl.buffer_hits(lookups, pinned_only, "global", hot=hot).tolist() == [
        True, False, False, False, False, True]
    hits = cxl.buffer_hits(lookups, hybrid, "global", hot=hot)
    assert hits[[0, 5]].all() and not hits[1], "pinned rows hit, a row's first read misses"
    assert hits[2], "the LRU half keeps the batch's own reuse"
    with pytest.raises(ValueError, match="hotness_pinned_share must be in"):
        cxl.System(hotness_pinned_share=0.0)


def test_placement_and_bad_names():
    lookups = make(rows_per_bag=4, bags=4, tables=3)
    system = cxl.System(devices=2)
    assert cxl.device_of(lookups, system, "table").tolist() == (lookups.table % 2).tolist()
    with pytest.raises(ValueError, match="placement must be"):
        cxl.device_of(lookups, system, "row")
    with pytest.raises(ValueError, match="buffer must be one of"):
        cxl.buffer_hits(lookups, system, "fifo")
    with pytest.raises(ValueError, match="hits must be None"):
        cxl.simulate(lookups, system, cxl.DESIGNS["pond"], np.ones(lookups.row.size, dtype=bool))
    with pytest.raises(ValueError, match="row ids must be"):
        cxl.lookups([(np.array([5000]), np.array([0]))], 1, 1000, 64)


def test_a_slower_host_link_slows_pond_but_barely_pifs():
    lookups = make(rows_per_bag=50, bags=64, tables=4)
    fast, slow = cxl.System(), cxl.System(upstream_bytes_per_s=cxl.System().upstream_bytes_per_s / 4)
    pond = [cxl.simulate(lookups, s, cxl.DESIGNS["pond"]).latency_s for s in (fast, slow)]
    pifs = [cxl.simulate(lookups, s, cxl.DESIGNS["pifs_pooling"]).latency_s for s in (fast, slow)]
    assert pond[1] / pond[0] > 2 and pifs[1] / pifs[0] < pond[1] / pond[0]
