"""Benchmark of PIFS-Rec's CXL model (issue 26): our closed-form FIFO stages against SimPy, the discrete-event
engine a user would pick, on the same system, with how the cost grows with requests and devices.

    .venv/bin/python benchmarks/cxl_simulator.py [--rows 1000 10000 100000] [--devices 2 8 32] [--simpy-max 20000]

For each size, one batch of the medium trace (pooling 50, one 256-B row per read) runs through Pond's path (host
link, device link, DRAM bank, channel, device link, host link, host core) twice: as
:func:`mlsysrepro.recsys.cxl.simulate` (each stage one sort and one running maximum) and as SimPy processes, one
per read, queueing on ``simpy.Resource`` servers in the same order (where ``pip install -e ".[simpy]"`` has been
done and the batch is at most ``--simpy-max`` reads). Printed: seconds, reads simulated per second, the speed-up
over SimPy (the median of interleaved rounds' ratios), and the two batch latencies, which agree to rounding.
Why our own engine: every read follows a fixed path, so each stage is a FIFO queue in closed form, and the whole
batch costs a few sorts where an event engine pays per event.

Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse

from mlsysrepro.core.timing import interleaved, machine, ratios
from mlsysrepro.recsys import cxl, traces


def simpy_pond(lookups: cxl.Lookups, system: cxl.System) -> float:
    """Pond's path in SimPy: a process per read through the same servers; the batch's latency."""
    import simpy

    env = simpy.Environment()
    row, up, down = lookups.row_bytes, system.upstream_bytes_per_s, system.downstream_bytes_per_s
    device = cxl.device_of(lookups, system, "page")
    bank = device * system.banks + (lookups.address() // 64) % system.banks
    host_link = [simpy.Resource(env) for _ in range(2)]
    device_down = [simpy.Resource(env) for _ in range(system.devices)]
    device_up = [simpy.Resource(env) for _ in range(system.devices)]
    banks = [simpy.Resource(env) for _ in range(system.devices * system.banks)]
    channels = [simpy.Resource(env) for _ in range(system.devices)]
    cores = [simpy.Resource(env) for _ in range(system.host_cores)]
    rate = system.host_cores * system.host_outstanding / system.unloaded_read_s("cxl")
    finished = []

    def serve(resource, seconds):
        with resource.request() as request:
            yield request
            yield env.timeout(seconds)

    def read(i):
        yield env.timeout(i / rate)
        yield from serve(host_link[0], 64 / up)
        yield env.timeout(system.host_hop_s)
        yield from serve(device_down[device[i]], 64 / down)
        yield env.timeout(system.device_hop_s + system.controller_s)
        yield from serve(banks[bank[i]], system.bank_busy_s)
        yield from serve(channels[device[i]], row / system.channel_bytes_per_s)
        yield from serve(device_up[device[i]], row / down)
        yield env.timeout(system.device_hop_s)
        yield from serve(host_link[1], row / up)
        yield env.timeout(system.host_hop_s)
        yield from serve(cores[lookups.bag[i] % system.host_cores], system.host_add_s_per_row)
        finished.append(env.now)

    for i in range(lookups.row.size):
        env.process(read(i))
    env.run()
    return max(finished)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 8, 32])
    parser.add_argument("--simpy-max", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    try:
        import simpy  # noqa: F401
        have_simpy = True
    except ImportError:
        have_simpy = False
        print('SimPy is not installed (pip install -e ".[simpy]"): our engine is timed alone')
    ids = traces.load_trace("medium")
    print(f"{'reads':>8} {'devices':>7} {'ours (s)':>9} {'reads/s':>10} {'SimPy (s)':>10} {'speed-up':>9} "
          f"{'latency ours / SimPy (us)':>26}")
    for rows in args.rows:
        indices, offsets = traces.batches(ids, max(1, rows // 50), 50, 1)[0]
        lookups = cxl.lookups([(indices.numpy(), offsets.numpy())], 1, traces.TABLE_ROWS, 64)
        for devices in args.devices:
            system = cxl.System(devices=devices)
            calls = {"ours": lambda: cxl.simulate(lookups, system, cxl.DESIGNS["pond"])}
            if have_simpy and lookups.row.size <= args.simpy_max:
                calls["simpy"] = lambda: simpy_pond(lookups, system)
            timings = interleaved(calls, args.repeats)
            ours = timings["ours"].median
            line = f"{lookups.row.size:>8,} {devices:>7} {ours:>9.4f} {lookups.row.size / ours:>10.3g}"
            if "simpy" in timings:
                speedup = ratios(timings, "simpy")["ours"].median
                latencies = (cxl.simulate(lookups, system, cxl.DESIGNS["pond"]).latency_s * 1e6,
                             simpy_pond(lookups, system) * 1e6)
                line += (f" {timings['simpy'].median:>10.3f} {speedup:>8.0f}x "
                         f"{latencies[0]:>12.3f} / {latencies[1]:.3f}")
            print(line)


if __name__ == "__main__":
    main()
