"""A trace-driven model of DLRM's embedding stage on CXL memory: a host, a CXL switch and N memory devices, and
where the rows of each bag are summed (PIFS-Rec, Huo et al., MICRO 2024, and the systems it is compared with).

Every row a batch reads travels through a fixed path of FIFO servers (:mod:`mlsysrepro.recsys.queues`): links per
direction (bytes over bandwidth), DRAM banks (one random row per row cycle) and channels (bytes over bandwidth),
pooling units (bytes over their add rate) and the host's cores, with fixed wire and controller latencies between
them. The designs differ in where a bag is summed and what crosses each link (:data:`DESIGNS`):

- ``local``: the tables in the host's own DRAM; the host reads and sums every row;
- ``cxl`` / ``pond``: the tables in CXL memory behind the switch (``cxl``: each table whole on one device; ``pond``:
  pages interleaved over the devices, Pond's pooled memory); the host reads every row over the links and sums it;
- ``beacon``: near-memory processing in each device (BEACON-D): the host sends each device the indices of its rows
  per bag, the device sums them, and one partial vector per (bag, device) goes up; the host adds the partials;
- ``pifs_*`` and ``pifs``: processing in the switch's downstream ports (PIFS-Rec): the host sends one command per
  bag, the devices return rows to the switch, the switch sums them and sends one vector per bag up. PIFS-Rec's
  steps, in the ablation's order: pooling in the switch, an on-switch buffer (LRU), the buffer filled by global
  hotness (the most accessed rows, pinned), and embedding spreading (pages interleaved over the devices).

The batch's latency is when its last bag is complete. Every parameter of :class:`System` names its source; the
ones the paper's PDF would fix (its switch's buffer and adder) are stated assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .l2 import simulate as cache_hits
from .queues import completion, fifo

FLIT = 64  # bytes of a request or a command header (a CXL flit's payload)
INDEX_BYTES = 8


@dataclass(frozen=True)
class System:
    """A host, a CXL switch and ``devices`` memory devices. Sources: PCIe 5.0 is 32 GT/s per lane (x16: 64 GB/s
    per direction, x8: 32 GB/s), less CXL's 68-B flit framing (64 of 68 bytes carry data); DDR5-4800 is 38.4 GB/s
    per channel and 32 banks per rank, with tRCD + tCL + tRP of about 46 ns; local load-to-use is about 110 ns, a
    direct CXL expander about 190 ns and one switch level about 90 ns more (Pond, ASPLOS 2023). A core keeps about
    10 misses in flight (its line fill buffers). The switch's pooling unit (64 B per cycle at 1 GHz per downstream
    port), its buffer (4 MiB SRAM, 20 ns) and the device's near-memory adder (BEACON's; as fast as the switch's
    pooling unit, which favours BEACON) are assumptions, not the paper's."""

    devices: int = 8
    hosts: int = 1
    upstream_bytes_per_s: float = 64e9 * 64 / 68
    downstream_bytes_per_s: float = 32e9 * 64 / 68
    host_hop_s: float = 45e-9
    device_hop_s: float = 40e-9
    controller_s: float = 64e-9
    bank_busy_s: float = 46e-9
    banks: int = 32
    channel_bytes_per_s: float = 38.4e9
    local_channels: int = 8
    host_cores: int = 16
    host_outstanding: int = 10
    host_add_s_per_row: float = 20e-9
    adder_bytes_per_s: float = 64e9
    device_adder_bytes_per_s: float = 64e9
    buffer_bytes: int = 4 * 2**20
    buffer_hit_s: float = 20e-9
    buffer_ways: int = 16
    hotness_pinned_share: float = 1.0  # of the buffer, under global hotness (the rest is LRU)
    page_bytes: int = 4096

    def __post_init__(self):
        if self.devices < 1 or self.hosts < 1:
            raise ValueError(f"devices and hosts must be >= 1, got {self.devices}, {self.hosts}")
        if not 0 < self.hotness_pinned_share <= 1:
            raise ValueError(f"hotness_pinned_share must be in (0, 1], got {self.hotness_pinned_share}")

    def unloaded_read_s(self, memory: str) -> float:
        """Load-to-use of one row read with nothing queued (local DRAM, or CXL through the switch)."""
        dram = self.controller_s + self.bank_busy_s
        return dram if memory == "local" else dram + 2 * (self.host_hop_s + self.device_hop_s)


@dataclass(frozen=True)
class Design:
    """Where bags are summed (``host``, ``device`` or ``switch``), where the tables live (``local`` or ``cxl``),
    the switch buffer (``none``, ``lru`` or ``global`` hotness) and the placement (``table`` or ``page``)."""

    pooling: str
    memory: str = "cxl"
    buffer: str = "none"
    placement: str = "page"


DESIGNS = {
    "local": Design("host", "local"),
    "cxl": Design("host", placement="table"),
    "pond": Design("host"),
    "beacon": Design("device"),
    "pifs_pooling": Design("switch", placement="table"),
    "pifs_buffer": Design("switch", buffer="lru", placement="table"),
    "pifs_hotness": Design("switch", buffer="global", placement="table"),
    "pifs": Design("switch", buffer="global"),
}
ABLATION = ("cxl", "pifs_pooling", "pifs_buffer", "pifs_hotness", "pifs")


@dataclass(frozen=True)
class Lookups:
    """One batch's row reads: per read its host, table, bag (numbered over hosts and tables) and row; and the
    shape (tables, rows per table, dim) and the number of bags."""

    host: np.ndarray
    table: np.ndarray
    bag: np.ndarray
    row: np.ndarray
    tables: int
    table_rows: int
    dim: int
    bags: int

    @property
    def row_bytes(self) -> int:
        return self.dim * 4

    def address(self) -> np.ndarray:
        return (self.table.astype(np.int64) * self.table_rows + self.row) * self.row_bytes


def lookups(streams: list[tuple[np.ndarray, np.ndarray]], tables: int, table_rows: int, dim: int) -> Lookups:
    """Lookups of ``tables`` tables reading the same stream (as the artifact's tables do), one (indices, offsets)
    stream per host; bags are numbered host by host, table by table."""
    hosts, table_ids, bags, rows = [], [], [], []
    first = 0
    for host, (indices, offsets) in enumerate(streams):
        indices, offsets = np.asarray(indices, dtype=np.int64), np.asarray(offsets, dtype=np.int64)
        if indices.size and indices.max() >= table_rows:
            raise ValueError(f"row ids must be < table_rows={table_rows}")
        bag_of = np.searchsorted(offsets, np.arange(indices.size), side="right") - 1
        for table in range(tables):
            hosts.append(np.full(indices.size, host))
            table_ids.append(np.full(indices.size, table))
            bags.append(first + bag_of)
            rows.append(indices)
            first += offsets.size
    return Lookups(np.concatenate(hosts), np.concatenate(table_ids), np.concatenate(bags), np.concatenate(rows),
                   tables, table_rows, dim, first)


@dataclass(frozen=True)
class Result:
    """One batch on one design: its latency, every bag's completion, bytes per link direction (and read from DRAM),
    each resource's busy seconds and count, and how many rows the switch buffer served."""

    latency_s: float
    bag_done_s: np.ndarray
    bytes: dict
    busy_s: dict
    servers: dict
    buffer_hits: int
    rows: int

    def utilisation(self) -> dict:
        """Busy share of each resource class over the batch's latency."""
        return {name: self.busy_s[name] / (self.latency_s * self.servers[name]) for name in self.busy_s}


def device_of(lookups: Lookups, system: System, placement: str) -> np.ndarray:
    """The device holding each read: the table's device (``table``: tables round-robin) or the page's (``page``:
    pages interleaved over the devices)."""
    if placement == "table":
        return lookups.table % system.devices
    if placement == "page":
        return (lookups.address() // system.page_bytes) % system.devices
    raise ValueError(f"placement must be 'table' or 'page', got {placement!r}")


def _lru_hits(keys: np.ndarray, prefix: np.ndarray, capacity: int, ways: int) -> np.ndarray:
    """Hits of a set-associative LRU buffer of ``capacity`` rows over ``keys``, warmed by ``prefix``."""
    sets = max(1, capacity // ways)
    return cache_hits(np.concatenate([prefix, keys]), sets, min(ways, capacity))[prefix.size:]


def buffer_hits(lookups: Lookups, system: System, policy: str, hot: np.ndarray | None = None,
                warmup: Lookups | None = None) -> np.ndarray:
    """Which reads the switch buffer serves: ``lru`` (a set-associative LRU buffer, warmed by ``warmup``'s
    reads) or ``global`` (``system.hotness_pinned_share`` of the buffer holds the most accessed rows, ``hot`` in
    order of hotness, split evenly over the tables, pinned; the rest, if any, is an LRU buffer over the other rows);
    ``none``: no read."""
    capacity = system.buffer_bytes // lookups.row_bytes
    if policy == "none" or capacity == 0:
        return np.zeros(lookups.row.size, dtype=bool)
    keys = lookups.table.astype(np.int64) * lookups.table_rows + lookups.row
    prefix = np.empty(0, dtype=np.int64) if warmup is None else (
        warmup.table.astype(np.int64) * warmup.table_rows + warmup.row)
    if policy == "global":
        if hot is None:
            raise ValueError("buffer 'global' needs the hot rows (most accessed first)")
        per_table = int(capacity * system.hotness_pinned_share) // lookups.tables
        pinned = np.zeros(lookups.table_rows, dtype=bool)
        pinned[np.asarray(hot)[:per_table]] = True
        hits = pinned[lookups.row]
        rest = capacity - per_table * lookups.tables
        if system.hotness_pinned_share < 1 and rest > 0:
            warm = prefix if warmup is None else prefix[~pinned[warmup.row]]
            hits[~hits] = _lru_hits(keys[~hits], warm, rest, system.buffer_ways)
        return hits
    if policy == "lru":
        return _lru_hits(keys, prefix, capacity, system.buffer_ways)
    raise ValueError(f"buffer must be one of 'none', 'lru', 'global', got {policy!r}")


def simulate(lookups: Lookups, system: System, design: Design, hits: np.ndarray | None = None) -> Result:
    """One batch through ``design`` on ``system``; ``hits`` marks the reads the switch buffer serves."""
    n, row_bytes, cores = lookups.row.size, lookups.row_bytes, system.host_cores
    host_core = lookups.host * cores + lookups.bag % cores
    bytes_moved = {"host to switch": 0.0, "switch to host": 0.0, "switch to devices": 0.0, "devices to switch": 0.0,
                   "dram": float(n * row_bytes)}
    busy: dict[str, float] = {}
    servers = {"host cores": system.hosts * cores}

    def stage(name: str, arrivals, service, ids, count):
        service = np.broadcast_to(np.asarray(service, dtype=float), np.shape(arrivals))
        busy[name] = busy.get(name, 0.0) + float(service.sum())
        servers[name] = count
        return fifo(arrivals, service, ids)

    def issue(memory: str) -> np.ndarray:
        """Open-loop issue at the host's rate by Little's law: cores x misses in flight / unloaded latency."""
        rate = cores * system.host_outstanding / system.unloaded_read_s(memory)
        order = np.lexsort((np.arange(n), lookups.host))
        rank = np.empty(n)
        rank[order] = np.arange(n) - np.searchsorted(lookups.host[order], lookups.host[order])
        return rank / rate

    if design.memory == "local":
        banks = system.local_channels * system.banks
        bank = (lookups.address() // 64) % banks
        t = stage("dram banks", issue("local") + system.controller_s, system.bank_busy_s, bank, banks)
        t = stage("dram channels", t, row_bytes / system.channel_bytes_per_s, bank // system.banks,
                  system.local_channels)
        t = stage("host cores", t, system.host_add_s_per_row, host_core, system.hosts * cores)
        done = completion(t, lookups.bag, lookups.bags)
        return Result(float(done.max()), done, bytes_moved, busy, servers, 0, n)

    device = device_of(lookups, system, design.placement)
    hits = np.zeros(n, dtype=bool) if hits is None else np.asarray(hits, dtype=bool)
    if design.pooling != "switch" and hits.any():
        raise ValueError("only the switch designs have a buffer: hits must be None for pooling "
                         f"{design.pooling!r}")
    up, down = system.upstream_bytes_per_s, system.downstream_bytes_per_s

    def dram(arrive, mask):
        """Bank then channel of the device, for the reads in ``mask`` arriving at ``arrive``."""
        bank = device[mask] * system.banks + (lookups.address()[mask] // 64) % system.banks
        t = stage("dram banks", arrive + system.controller_s, system.bank_busy_s, bank,
                  system.devices * system.banks)
        return stage("dram channels", t, row_bytes / system.channel_bytes_per_s, device[mask], system.devices)

    if design.pooling == "host":
        t = stage("host to switch", issue("cxl"), FLIT / up, lookups.host, system.hosts) + system.host_hop_s
        t = stage("switch to devices", t, FLIT / down, device, system.devices) + system.device_hop_s
        t = dram(t, np.ones(n, dtype=bool))
        t = stage("devices to switch", t, row_bytes / down, device, system.devices) + system.device_hop_s
        t = stage("switch to host", t, row_bytes / up, lookups.host, system.hosts) + system.host_hop_s
        t = stage("host cores", t, system.host_add_s_per_row, host_core, system.hosts * cores)
        bytes_moved.update({"host to switch": float(n * FLIT), "switch to host": float(n * row_bytes),
                            "switch to devices": float(n * FLIT), "devices to switch": float(n * row_bytes)})
        done = completion(t, lookups.bag, lookups.bags)
        return Result(float(done.max()), done, bytes_moved, busy, servers, 0, n)

    # the near-data designs: commands carry each part's indices; pooled vectors come back
    if design.pooling == "device":
        part_key = lookups.bag * system.devices + device  # one command and one partial per (bag, device)
        parts, part_of = np.unique(part_key, return_inverse=True)
        counts = np.bincount(part_of)
        part_host = np.zeros(parts.size, dtype=np.int64)
        part_host[part_of] = lookups.host
        part_device = parts % system.devices
        command = FLIT + INDEX_BYTES * counts
        c = stage("host to switch", np.zeros(parts.size), command / up, part_host, system.hosts) + system.host_hop_s
        c = stage("switch to devices", c, command / down, part_device, system.devices) + system.device_hop_s
        t = dram(c[part_of], np.ones(n, dtype=bool))
        t = stage("pooling units", t, row_bytes / system.device_adder_bytes_per_s, device, system.devices)
        partial = completion(t, part_of, parts.size)
        p = stage("devices to switch", partial, row_bytes / down, part_device, system.devices) + system.device_hop_s
        p = stage("switch to host", p, row_bytes / up, part_host, system.hosts) + system.host_hop_s
        p = stage("host cores", p, system.host_add_s_per_row, part_host * cores + (parts // system.devices) % cores,
                  system.hosts * cores)
        bytes_moved.update({"host to switch": float(command.sum()), "switch to host": float(parts.size * row_bytes),
                            "switch to devices": float(command.sum()),
                            "devices to switch": float(parts.size * row_bytes)})
        done = completion(p, parts // system.devices, lookups.bags)
        return Result(float(done.max()), done, bytes_moved, busy, servers, 0, n)

    if design.pooling != "switch":
        raise ValueError(f"pooling must be 'host', 'device' or 'switch', got {design.pooling!r}")
    bag_host = np.zeros(lookups.bags, dtype=np.int64)
    bag_host[lookups.bag] = lookups.host
    per_bag = np.bincount(lookups.bag, minlength=lookups.bags)
    command = FLIT + INDEX_BYTES * per_bag
    at_switch = stage("host to switch", np.zeros(lookups.bags), command / up, bag_host,
                      system.hosts) + system.host_hop_s
    miss = ~hits
    part_key = lookups.bag[miss] * system.devices + device[miss]
    parts, part_of = np.unique(part_key, return_inverse=True)
    part_command = FLIT + INDEX_BYTES * np.bincount(part_of, minlength=parts.size)
    c = stage("switch to devices", at_switch[parts // system.devices], part_command / down, parts % system.devices,
              system.devices) + system.device_hop_s
    arrive = np.empty(n)
    arrive[miss] = stage("devices to switch", dram(c[part_of], miss), row_bytes / down, device[miss],
                         system.devices) + system.device_hop_s
    arrive[hits] = at_switch[lookups.bag[hits]] + system.buffer_hit_s
    t = stage("pooling units", arrive, row_bytes / system.adder_bytes_per_s, device, system.devices)
    pooled = completion(t, lookups.bag, lookups.bags)
    done = stage("switch to host", pooled, row_bytes / up, bag_host, system.hosts) + system.host_hop_s
    bytes_moved.update({"host to switch": float(command.sum()), "switch to host": float(lookups.bags * row_bytes),
                        "switch to devices": float(part_command.sum()),
                        "devices to switch": float(miss.sum() * row_bytes), "dram": float(miss.sum() * row_bytes)})
    return Result(float(done.max()), done, bytes_moved, busy, servers, int(hits.sum()), n)
