"""The L2 model against hand-made address streams: LRU hits and evictions, evict-last protection, and the row
reduction's exactness."""

import numpy as np
import pytest

from mlsysrepro.recsys.l2 import MAPPINGS, Cache, mapped, pins_that_fit, row_hits, simulate


def test_lru_hits_and_evicts_the_least_recently_used_line():
    # one set of two ways (keys 0, 4, 8, 12 share set 0 of 4): 0, 4 fill; 0 hits; 8 evicts 4; 0 hits; 12 evicts 8
    hits = simulate(np.array([0, 4, 0, 8, 0, 12, 4]), sets=4, ways=2)
    assert hits.tolist() == [False, False, True, False, True, False, False]


def test_sets_are_independent():
    hits = simulate(np.array([0, 1, 2, 3, 0, 1, 2, 3]), sets=4, ways=1)
    assert hits.tolist() == [False] * 4 + [True] * 4


def test_an_evict_last_line_survives_a_stream_that_would_evict_it():
    stream = np.array([4, 8, 12, 16, 0])  # set 0 of 4, two ways: without pinning 0 is never there
    assert not simulate(stream, sets=4, ways=2)[-1]
    pinned = simulate(stream, sets=4, ways=2, pinned=np.array([0]), pin_ways=1)
    assert pinned.tolist() == [False, False, False, False, True]


def test_pins_beyond_a_sets_share_are_not_kept():
    hits = simulate(np.array([0, 4]), sets=4, ways=2, pinned=np.array([0, 4]), pin_ways=1)
    assert hits.tolist() == [True, False]


def zipf_stream(size: int = 3000) -> np.ndarray:
    return np.random.default_rng(0).zipf(1.3, size=size) % 97


def runs_stream() -> np.ndarray:
    """Runs of one key (collapsed by the simulator before its rounds) between other keys of the same sets."""
    base = zipf_stream(600)
    return np.repeat(base, np.random.default_rng(1).integers(1, 6, size=base.size))


@pytest.mark.parametrize("make_keys", [zipf_stream, runs_stream], ids=["zipf", "runs"])
def test_matches_a_per_access_reference(make_keys):
    keys = make_keys()
    sets, ways = 8, 3
    cache = [[] for _ in range(sets)]  # most recent last
    expected = []
    for key in keys:
        lines = cache[key % sets]
        expected.append(key in lines)
        if key in lines:
            lines.remove(key)
        elif len(lines) == ways:
            lines.pop(0)
        lines.append(key)
    assert simulate(keys, sets, ways).tolist() == expected


def test_row_hits_equal_the_line_level_simulation():
    cache = Cache(size_bytes=128 * 4 * 16, line_bytes=128, ways=4)  # 16 sets
    rows = np.random.default_rng(1).integers(0, 40, size=500)
    lines = (rows[:, None] * 4 + np.arange(4)).ravel()  # a 512-B row is four consecutive lines
    by_line = simulate(lines, cache.sets, cache.ways).reshape(-1, 4)
    assert (by_line == by_line[:, :1]).all()
    assert row_hits(rows, 128, cache).tolist() == by_line[:, 0].tolist()


def test_bad_geometry_is_refused():
    with pytest.raises(ValueError, match="size_bytes"):
        Cache(size_bytes=1000)
    with pytest.raises(ValueError, match="pin_share"):
        Cache(size_bytes=128 * 16, pin_share=1.0)
    with pytest.raises(ValueError, match="whole lines"):
        row_hits(np.array([0]), 10, Cache(size_bytes=128 * 16 * 4))


@pytest.mark.parametrize("mapping", MAPPINGS)
def test_a_mapping_renames_keys_one_to_one_and_keeps_the_sets_it_says(mapping):
    keys = np.arange(50_000)
    renamed, sets = mapped(keys, 1024, mapping)
    assert np.unique(renamed).size == keys.size  # two keys collide only if equal
    assert sets == (512 if mapping == "hashed_half" else 1024)
    with pytest.raises(ValueError, match="mapping must be one of"):
        mapped(keys, 1024, "xor")


def test_hashing_spreads_rows_that_modulo_puts_in_one_set():
    cache = Cache(size_bytes=128 * 16 * 64, ways=16)  # 64 sets, 16 row-sets of 4 lines
    strided = np.tile(np.arange(40) * 16, 3)  # 40 rows, all in row-set 0 under modulo, each read three times
    assert row_hits(strided, 128, cache).sum() == 0  # 40 rows thrash a 16-way set
    assert row_hits(strided, 128, cache, mapping="hashed").sum() == 80  # spread out, every reread hits


@pytest.mark.parametrize("mapping", MAPPINGS)
def test_pins_that_fit_are_exactly_the_pins_that_always_hit(mapping):
    cache = Cache(size_bytes=128 * 16 * 64, ways=16)
    pins = np.arange(0, 4000, 7)
    fits = pins_that_fit(pins, 128, cache, mapping)
    hits = row_hits(fits, 128, cache, pinned_rows=pins, mapping=mapping)  # the kept pins, read before any stream
    assert hits.all()
    per_set = np.bincount(mapped(fits, cache.sets // 4, mapping)[0] % mapped(fits, cache.sets // 4, mapping)[1])
    assert per_set.max() <= cache.pin_ways
