"""Benchmark of Cocktail's serving simulator (issue 24): requests simulated per second, against per-request queues.

    .venv/bin/python benchmarks/serving_simulator.py [--seconds 600] [--rate 2000] [--day-rate 4000] [--repeats 3]

1. **One queue, three ways.** A pool of constant capacity (5 % above the mean arrival rate, so requests queue in
   the bursts) serves ``--seconds`` seconds of Poisson arrivals at ``--rate`` per second: SimPy's discrete-event
   engine, the peer a user would pick (where ``pip install simpy`` has been done), one process per request and a
   ``Resource`` as the server; the same queue as a per-request Python loop (Lindley's recursion,
   :func:`mlsysrepro.serving.reference.per_request_waits`); and the collection's simulator, whose per-second fluid
   queues are solved in closed form. Printed: seconds, requests per second, speed-up over the per-request loop
   (the median of the interleaved rounds' ratios, :func:`mlsysrepro.core.timing.ratios`), and the largest
   difference of per-second mean waits against the loop where the queue is busy.
2. **A served day.** Every policy serves a full day of the ``openb_folded`` trace at ``--day-rate`` requests per
   second on a synthetic three-model zoo: the requests (the script prints their count), wall seconds and requests
   simulated per second. The issue's target: a day of at least 10^6 requests in under a minute.

Not a test: timings depend on the machine; compare the ratios.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from mlsysrepro.core.timing import interleaved, machine, ratios
from mlsysrepro.serving import traces
from mlsysrepro.serving.fleet import VMType, vm_types
from mlsysrepro.serving.policies import POLICIES, make_policy
from mlsysrepro.serving.reference import per_request_waits
from mlsysrepro.serving.simulator import Config, Workload, simulate


def simpy_waits(counts: np.ndarray, capacity: float, rng: np.random.Generator):
    """The same queue in SimPy: a generator process per request requesting a one-slot Resource."""
    import simpy

    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    waits = np.empty(int(counts.sum()))
    arrivals = np.concatenate([second + np.sort(rng.random(n)) for second, n in enumerate(counts)])

    def request(index, at):
        yield env.timeout(at - env.now)
        with server.request() as slot:
            yield slot
            waits[index] = env.now - at
            yield env.timeout(1.0 / capacity)

    for index, at in enumerate(arrivals):
        env.process(request(index, at))
    env.run()
    sums = np.bincount(np.repeat(np.arange(len(counts)), counts), weights=waits, minlength=len(counts))
    return sums / np.maximum(counts, 1)


def one_queue(seconds: int, rate: float, repeats: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    counts = rng.poisson(rate * (1 + 0.3 * np.sin(np.linspace(0, 6 * np.pi, seconds))))
    capacity = 1.05 * rate
    never = 10**7
    # start the pool at exactly the capacity: the warm start sizes it from the first minute at 100 % utilisation
    work = Workload(np.r_[np.full((60, 1), int(capacity)), counts[:, None]], np.ones((seconds + 60, 1, 1), bool), 1,
                    np.array([capacity]), np.array([0.0]))
    config = Config(launch_delay=never, timeout=1e9, reactive_interval=never, scale_in_interval=never, utilisation=1.0)
    one_vm = (VMType("one", 1, 1.0, 1.0, np.ones(seconds + 60)),)
    arrivals = work.arrivals[:, 0]
    results = {}
    variants = {
        "per-request loop": lambda: results.__setitem__("loop", per_request_waits(arrivals, capacity,
                                                                                  np.random.default_rng(1))),
        "closed-form seconds (ours)": lambda: results.__setitem__("ours", simulate(work, make_policy("infaas"),
                                                                                   one_vm, config).latency_s[:, 0]),
    }
    try:
        import simpy  # noqa: F401

        variants["SimPy (peer)"] = lambda: results.__setitem__("simpy", simpy_waits(arrivals, capacity,
                                                                                    np.random.default_rng(1)))
    except ImportError:
        print("SimPy is not installed (pip install simpy): the peer row is skipped")
    timings = interleaved(variants, repeats, warmup=0)
    speedup = ratios(timings, "per-request loop")
    busy = results["loop"] > 0.05
    rows = []
    for name, timing in timings.items():
        key = {"per-request loop": "loop", "closed-form seconds (ours)": "ours", "SimPy (peer)": "simpy"}[name]
        gap = np.nanmax(np.abs(results[key][busy] - results["loop"][busy]))
        rows.append(dict(variant=name, requests=int(arrivals.sum()), seconds=timing.median,
                         requests_per_s=arrivals.sum() / timing.median, vs_loop=speedup[name].median,
                         max_wait_gap_s=gap))
    return pd.DataFrame(rows)


def served_day(day_rate: float) -> pd.DataFrame:
    shape = traces.daily_shape(traces.submission_times("openb"), 1, "folded")
    arrivals = traces.per_second_arrivals(shape, day_rate, seed=0)[:, None]
    seconds = len(arrivals)
    window = 30
    members = np.zeros((math.ceil(seconds / window), 1, 3), dtype=bool)
    members[:, 0, :2] = True
    members[1::4, 0, 2] = True  # a third member in some windows, as pruning leaves it
    work = Workload(arrivals, members, window, np.array([1200.0, 2500.0, 9000.0]), np.array([27.0, 13.0, 3.5]))
    types = vm_types(seconds)
    forecast = traces.per_minute(arrivals[:, 0])
    rows = []
    for name in POLICIES:
        timing = interleaved({name: lambda name=name: simulate(work, make_policy(name), types, Config(), forecast)},
                             1, warmup=0)[name]
        rows.append(dict(policy=name, requests=int(arrivals.sum()), seconds=timing.median,
                         requests_per_s=arrivals.sum() / timing.median))
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--day-rate", type=float, default=4000.0)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds per measurement")
    args = parser.parse_args()
    print(machine())
    print(f"One queue: {args.seconds} s at {args.rate:g} requests/s")
    print(one_queue(args.seconds, args.rate, args.repeats).set_index("variant").round(4).to_string())
    print(f"\nA served day of openb_folded at {args.day_rate:g} requests/s (mean)")
    print(served_day(args.day_rate).set_index("policy").round(2).to_string())


if __name__ == "__main__":
    main()
