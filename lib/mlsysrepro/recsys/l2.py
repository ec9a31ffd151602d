"""A set-associative LRU cache with evict-last lines: the GPU's L2 as the embedding stage sees it.

Lines of ``line_bytes`` map to ``sets = size / (line_bytes * ways)`` sets by their address modulo ``sets``, the
textbook map. The A100 hashes addresses over its L2 slices, by a function NVIDIA does not publish, and splits its L2
into two partitions, each caching the accesses of the SMs wired to it. Neither is known well enough to copy, so
:data:`MAPPINGS` names three maps a claim is re-judged over (:func:`mapped`): ``modulo``; ``hashed`` (the upper
address bits offset the set index, so rows equal modulo the sets no longer collide); ``hashed_half`` (hashed, in a
cache of half the sets: an SM's accesses fill only its near partition, lines shared by both halves held twice). Within a set the least recently
used line is evicted, except that lines loaded *evict-last* (PTX ``prefetch.global.L2::evict_last``, what the
paper's L2-pinning kernel issues for the hot rows before each embedding kernel) are passed over while a normal line
can be evicted instead. At most ``pin_share`` of a set's ways hold evict-last lines (the rest of the hot list is not
pinned), so every set keeps room for the stream.

:func:`simulate` runs a stream of keys (line addresses) through the cache, vectorised over sets: accesses are
grouped by set, and round ``k`` applies the ``k``-th access of every set at once to a (sets x ways) table of tags
and last-use times, so the Python loop runs over rounds (the most accesses any one set sees), never over accesses.
An access that repeats the key its set saw last is a hit that changes nothing (the line is already the set's most
recent), so such runs are collapsed first: on a high-reuse stream, where one hot set sees most accesses, that cuts
the rounds many-fold.

:func:`row_hits` is the embedding stage's stream: a row of ``dim`` float32 values is ``dim * 4 / line_bytes``
consecutive lines. When a row is a whole number of lines and that number divides the sets (A100: 512 B rows, 4
lines), the lines of one row land in consecutive sets whose access sequences are identical, so simulating rows
against ``sets / lines_per_row`` sets of the same ways is exact, and four times cheaper.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Cache:
    """Geometry of a set-associative cache: ``size_bytes``, ``line_bytes``, ``ways``, and the largest share of a
    set's ways that evict-last lines may hold (``pin_share``)."""

    size_bytes: int
    line_bytes: int = 128
    ways: int = 16
    pin_share: float = 0.75

    def __post_init__(self):
        if self.size_bytes % (self.line_bytes * self.ways):
            raise ValueError(f"size_bytes must be a multiple of line_bytes * ways = {self.line_bytes * self.ways}, "
                             f"got {self.size_bytes}")
        if not 0 <= self.pin_share < 1:
            raise ValueError(f"pin_share must be in [0, 1) (a set keeps a way for the stream), got {self.pin_share}")

    @property
    def sets(self) -> int:
        return self.size_bytes // (self.line_bytes * self.ways)

    @property
    def pin_ways(self) -> int:
        return int(self.pin_share * self.ways)


def _rank_within(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stable order grouping equal values, and each element's rank among its equals (in that order)."""
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_groups)) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, sorted_groups.size]))
    return order, np.arange(sorted_groups.size) - first


def simulate(keys: np.ndarray, sets: int, ways: int, pinned: np.ndarray | None = None, pin_ways: int = 0
             ) -> np.ndarray:
    """Whether each access of the stream ``keys`` hits a cold LRU cache of ``sets`` x ``ways``.

    ``pinned`` keys are loaded evict-last before the stream (at most ``pin_ways`` per set, first come first kept):
    they hit from the first access and are evicted only when a set holds nothing else.
    """
    keys = np.asarray(keys, dtype=np.int64)
    if sets < 1 or ways < 1 or not 0 <= pin_ways < ways:
        raise ValueError(f"sets and ways must be >= 1 and 0 <= pin_ways < ways, got {sets}, {ways}, {pin_ways}")
    tags = np.full((sets, ways), -1, dtype=np.int64)
    last_use = np.full((sets, ways), -1, dtype=np.int64)
    protected = np.zeros((sets, ways), dtype=bool)
    if pinned is not None and len(pinned) and pin_ways:
        pins = np.unique(np.asarray(pinned, dtype=np.int64))
        order, rank = _rank_within(pins % sets)
        keep = order[rank < pin_ways]
        way = rank[rank < pin_ways]
        tags[pins[keep] % sets, way] = pins[keep] // sets
        protected[pins[keep] % sets, way] = True
    hits = np.zeros(keys.size, dtype=bool)
    if keys.size == 0:
        return hits
    order, rank = _rank_within(keys % sets)
    in_set = keys[order]  # each set's accesses in time order, the sets one after another
    repeat = np.r_[False, in_set[1:] == in_set[:-1]]  # the same key as its set's previous access: a hit
    if repeat.any():
        hits[order[repeat]] = True
        order = order[~repeat]
        _, rank = _rank_within(keys[order] % sets)  # already grouped: the stable sort keeps the order
    by_round = np.argsort(rank, kind="stable")  # round k: the k-th access of every set, sets in ascending order
    bounds = np.r_[0, np.cumsum(np.bincount(rank))]
    for k in range(bounds.size - 1):
        access = order[by_round[bounds[k]:bounds[k + 1]]]  # at most one access per set
        set_ids, tag = keys[access] % sets, keys[access] // sets
        match = tags[set_ids] == tag[:, None]
        hit = match.any(1)
        hits[access] = hit
        way = np.where(hit, match.argmax(1),
                       np.where(protected[set_ids], np.iinfo(np.int64).max, last_use[set_ids]).argmin(1))
        tags[set_ids, way] = tag
        last_use[set_ids, way] = access
    return hits


#: The address-to-set maps of the module docstring.
MAPPINGS = ("modulo", "hashed", "hashed_half")
#: Knuth's multiplicative hash constant (2^32 / golden ratio), spreading the upper bits over the sets.
_HASH = 2_654_435_761


def mapped(keys: np.ndarray, sets: int, mapping: str = "modulo") -> tuple[np.ndarray, int]:
    """``keys`` renamed so that :func:`simulate`'s modulo map places them as ``mapping`` does, and the sets to
    simulate: ``hashed`` adds a hash of ``key // sets`` to the set index (mod ``sets``), a bijection, so two keys
    still collide only if equal; ``hashed_half`` does so over half the sets."""
    if mapping not in MAPPINGS:
        raise ValueError(f"mapping must be one of {MAPPINGS}, got {mapping!r}")
    keys = np.asarray(keys, dtype=np.int64)
    if mapping == "modulo":
        return keys, sets
    sets = sets // 2 if mapping == "hashed_half" else sets
    high, low = np.divmod(keys, sets)
    return high * sets + (low + (high * _HASH) % sets) % sets, sets


def row_hits(rows: np.ndarray, dim: int, cache: Cache, pinned_rows: np.ndarray | None = None,
             dtype_bytes: int = 4, mapping: str = "modulo") -> np.ndarray:
    """Whether each row access of an embedding gather hits ``cache`` under ``mapping`` (all of a row's lines hit or
    miss together; see the module's note on why simulating rows is exact: the hashed maps place rows, not lines,
    an approximation that keeps a row's lines together)."""
    row_bytes = dim * dtype_bytes
    if row_bytes % cache.line_bytes or cache.sets % (row_bytes // cache.line_bytes):
        raise ValueError(f"dim * dtype_bytes = {row_bytes} B must be whole lines of {cache.line_bytes} B whose count "
                         f"divides the {cache.sets} sets")
    lines = row_bytes // cache.line_bytes
    keys, sets = mapped(rows, cache.sets // lines, mapping)
    pins = None if pinned_rows is None else mapped(pinned_rows, cache.sets // lines, mapping)[0]
    return simulate(keys, sets, cache.ways, pins, cache.pin_ways)


def pins_that_fit(pins: np.ndarray, dim: int, cache: Cache, mapping: str = "modulo", dtype_bytes: int = 4
                  ) -> np.ndarray:
    """The pinned rows :func:`row_hits` keeps: at most ``pin_ways`` per (row-)set under ``mapping``, first come
    first kept (as :func:`simulate` loads them)."""
    lines = dim * dtype_bytes // cache.line_bytes
    pins = np.unique(np.asarray(pins, dtype=np.int64))
    keys, sets = mapped(pins, cache.sets // lines, mapping)
    by_key = np.argsort(keys)  # simulate loads the unique keys in ascending order
    order, rank = _rank_within(keys[by_key] % sets)
    return pins[by_key][order][rank < cache.pin_ways]
