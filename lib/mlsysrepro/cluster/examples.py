"""Hand-checkable scenarios: small traces whose schedules can be worked out on paper, for lessons and tests.

- :func:`delay_example` — Dally's delay scheduling in one picture: a job that either spreads over two machines now
  or waits for one machine to free up;
- :func:`delay_scheduling_only` — Dally's placement (delay timers, re-placement at renewal) under FIFO order and no
  preemption: the mechanism of the example in isolation. The full Dally also auctions the GPUs at every lease
  expiry, where a job that has not run outbids the running ones.
"""

from __future__ import annotations

import numpy as np

from .jobs import Trace
from .placement import DelayScheduling
from .policies import Policy, fifo
from .topology import Link, Topology


def delay_example() -> tuple[Trace, Topology]:
    """The notebook's worked example (and the tests' hand-checked schedule): one rack of two 4-GPU machines whose
    links cost 1 s (inside a machine) and 2 s (across the rack switch) per ring member for a 1 GB gradient.
    Jobs A..D (2 GPUs, 1 s per iteration, no gradient) fill both machines at t = 0 and end at 100, 20, 30, 100;
    job E (4 GPUs, 40 iterations, 1 GB gradient) arrives at 0 and needs 4 s per iteration spread over the two
    machines, 2.5 s inside one."""
    links = (Link(1e9, 0.0), Link(0.5e9, 0.0), Link(0.1e9, 0.0))
    trace = Trace("delay example", arrival=np.zeros(5), gpus=np.array([2, 2, 2, 2, 4]),
                  iterations=np.array([100.0, 20.0, 30.0, 100.0, 40.0]), compute_seconds=np.ones(5),
                  gradient_bytes=np.array([0, 0, 0, 0, 1e9]), model=np.array(list("ABCDE")))
    return trace, Topology(racks=1, machines_per_rack=2, gpus_per_machine=4, links=links)


def delay_scheduling_only(rack_wait: float, network_wait: float) -> Policy:
    """FIFO order, no preemption, Dally's delay-scheduling placement with fixed timers (in leases) and re-placement
    of spread jobs at lease renewal."""
    return Policy("delay_scheduling_only", fifo, DelayScheduling(rack_wait, network_wait), preemptive=False,
                  migrates=True)
