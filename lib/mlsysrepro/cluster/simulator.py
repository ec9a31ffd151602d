"""The discrete-event cluster simulator: one heap of timestamped events, no per-tick loop.

Events are job arrivals, job finishes, lease rounds and delay-timer wake-ups. After all events of one instant
are applied, one scheduling pass runs:

- at a lease round (every ``lease`` seconds, while a round can change anything) a preemptive policy
  re-decides who holds GPUs: the running jobs whose lease has expired (held for a lease or more) compete
  with the waiting ones; the policy ranks them, keeps the top ranks that fit in the cluster and preempts the
  other running jobs (each pays ``checkpoint_seconds`` before it progresses again). A migrating policy moves
  spread jobs to tighter free GPUs;
- at any instant, waiting jobs in rank order get GPUs from the placement policy, or wait.

A running job's progress is brought up to date only when something happens to it (lazy accounting), and a
finish event is invalidated by a version number when its job is preempted. The iteration time of a placement
(compute + ring all-reduce) is cached per (gradient bytes, ring sizes per level), as the authors' simulator
caches its ASTRA-sim slowdowns. Every allocation is logged; :mod:`.metrics` reads the log.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from .jobs import Trace
from .placement import FreeGPUs, tightest
from .policies import JobView, Policy
from .topology import Topology

FINISH, ARRIVAL, ROUND, WAKE = range(4)  # at one instant: free GPUs first, then admit, then re-decide
WAITING, RUNNING, DONE = 1, 2, 3


@dataclass(frozen=True)
class Run:
    """One simulation's outcome: per-job columns and the allocation log (one row per stretch on GPUs)."""

    trace: Trace
    topology: Topology
    policy: str
    lease: float
    start: np.ndarray  # first time on GPUs
    finish: np.ndarray
    held_seconds: np.ndarray  # wall time on GPUs, checkpoint restarts included
    comm_seconds: np.ndarray  # wall time in all-reduce
    done: np.ndarray  # iterations completed (equals the trace's at the end)
    preemptions: np.ndarray
    migrations: np.ndarray
    log_job: np.ndarray
    log_start: np.ndarray
    log_end: np.ndarray
    log_level: np.ndarray
    log_gpus: tuple  # one array of GPU ids per row
    events: int
    final_timers: dict


class Simulator:
    def __init__(self, trace: Trace, topology: Topology, policy: Policy, lease: float, checkpoint_seconds: float):
        if lease <= 0 or checkpoint_seconds < 0:
            raise ValueError(f"lease must be > 0 and checkpoint_seconds >= 0, got {lease}, {checkpoint_seconds}")
        too_big = trace.gpus > topology.gpus
        if np.any(too_big):
            raise ValueError(f"trace {trace.name!r}: {int(too_big.sum())} jobs ask for more than the cluster's "
                             f"{topology.gpus} GPUs (largest {int(trace.gpus.max())})")
        self.trace, self.topology, self.policy = trace, topology, policy
        self.lease, self.checkpoint = float(lease), float(checkpoint_seconds)
        self.free = FreeGPUs(topology)
        self._iteration_cache: dict = {}
        n = len(trace)
        self.state = np.zeros(n, dtype=np.int8)
        self.done = np.zeros(n)
        self.mark = np.zeros(n)  # when ``done`` was last brought up to date
        self.iteration = np.zeros(n)  # seconds per iteration at the current placement
        self.comm = np.zeros(n)  # seconds of all-reduce per iteration at the current placement
        self.overhead = np.zeros(n)  # checkpoint-restore seconds still to pay
        self.held = np.zeros(n)
        self.comm_seconds = np.zeros(n)
        self.start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.wait_since = np.zeros(n)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.migrations = np.zeros(n, dtype=np.int64)
        self.version = np.zeros(n, dtype=np.int64)
        self.gpus_of: dict[int, np.ndarray] = {}
        self.level_of: dict[int, int] = {}
        self.since: dict[int, float] = {}
        self.waiting: set[int] = set()
        self.running: set[int] = set()
        self.spread: set[int] = set()  # running jobs placed wider than one machine
        self.freed = False  # GPUs were released since the last migration attempt
        # ideal iteration: compute + the all-reduce on the tightest packing (GPUs 0..g-1), once per (bytes, GPUs)
        pairs, which = np.unique(np.stack([trace.gradient_bytes, trace.gpus]), axis=1, return_inverse=True)
        comm = np.array([self._iteration_time(b, 0.0, np.arange(int(g)))[1] for b, g in pairs.T])
        self.ideal = trace.compute_seconds + comm[which.ravel()]
        self.log: list[tuple] = []
        self.heap: list[tuple] = []
        self.seq = 0
        self.now = 0.0
        self.round_pending = False
        self.wake_at: dict[int, float] = {}

    # -- bookkeeping -------------------------------------------------------------------------------------------
    def _push(self, time: float, kind: int, job: int = -1, version: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, kind, self.seq, job, version))

    def _iteration_time(self, volume: float, compute: float, gpus: np.ndarray) -> tuple[float, float]:
        rings = self.topology.participants(gpus) if len(gpus) > 1 else (1, 1, 1)
        key = (volume, rings)
        if key not in self._iteration_cache:
            self._iteration_cache[key] = self.topology.allreduce_seconds(volume, gpus) if len(gpus) > 1 else 0.0
        comm = self._iteration_cache[key]
        return compute + comm, comm

    def _advance(self, job: int, now: float) -> None:
        """Bring a running job's progress up to ``now``: checkpoint overhead first, then iterations."""
        elapsed = now - self.mark[job]
        paid = min(elapsed, self.overhead[job])
        self.overhead[job] -= paid
        iterations = (elapsed - paid) / self.iteration[job]
        self.done[job] += iterations
        self.comm_seconds[job] += iterations * self.comm[job]
        self.held[job] += elapsed
        self.mark[job] = now

    def _run(self, job: int, gpus: np.ndarray, level: int, now: float) -> None:
        self.free.take(job, gpus)
        self.waiting.discard(job)
        self.running.add(job)
        self.state[job] = RUNNING
        self.gpus_of[job], self.level_of[job], self.since[job] = gpus, level, now
        if level > 0:
            self.spread.add(job)
        self.iteration[job], self.comm[job] = self._iteration_time(
            self.trace.gradient_bytes[job], self.trace.compute_seconds[job], gpus)
        self.mark[job] = now
        if np.isnan(self.start[job]):
            self.start[job] = now
        remaining = max(self.trace.iterations[job] - self.done[job], 0.0)
        self.version[job] += 1
        self._push(now + self.overhead[job] + remaining * self.iteration[job], FINISH, job, self.version[job])

    def _stop(self, job: int, now: float, released: bool = False) -> None:
        """Take ``job`` off its GPUs at ``now`` (``released``: the caller already gave them back)."""
        self._advance(job, now)
        gpus = self.gpus_of.pop(job)
        if not released:
            self.free.release(job, gpus)
        self.running.discard(job)
        self.spread.discard(job)
        self.freed = True
        self.version[job] += 1
        self.log.append((job, self.since.pop(job), now, self.level_of.pop(job), gpus))

    # -- scheduling ----------------------------------------------------------------------------------------------
    def _view(self, jobs: np.ndarray, now: float) -> JobView:
        done, held = self.done[jobs].copy(), self.held[jobs].copy()
        running = self.state[jobs] == RUNNING
        if running.any():
            r = jobs[running]
            elapsed = now - self.mark[r]
            paid = np.minimum(elapsed, self.overhead[r])
            done[running] += (elapsed - paid) / self.iteration[r]
            held[running] += elapsed
        iteration = np.where(running, self.iteration[jobs], self.ideal[jobs])
        t = self.trace
        return JobView(now, jobs, t.arrival[jobs], t.gpus[jobs], t.iterations[jobs], done, held * t.gpus[jobs], held,
                       self.ideal[jobs], iteration)

    def _ranked(self, jobs: set[int], now: float) -> np.ndarray:
        """The admitted ``jobs`` in the policy's order (ties to the lower id, i.e. the earlier arrival)."""
        jobs = np.fromiter(jobs, dtype=np.int64, count=len(jobs))
        view = self._view(jobs, now)
        admitted = self.policy.admission(view)
        if not admitted.all():
            jobs = jobs[admitted]
            view = self._view(jobs, now)
        return jobs[np.lexsort((jobs, self.policy.order(view)))]

    def _selection(self, ranked: np.ndarray, now: float) -> tuple[list[int], np.ndarray]:
        """A lease round's choice, GPU count wise: keep the running jobs whose lease has not expired (held for less
        than a lease), then the top-ranked jobs that fit. Returns the running jobs left out (the possible victims)
        and the waiting jobs kept, in rank order."""
        keep = {j for j in self.running if now - self.since[j] < self.lease - 1e-9}
        capacity = self.topology.gpus - int(sum(self.trace.gpus[j] for j in keep))
        for job in ranked.tolist():
            need = int(self.trace.gpus[job])
            if job not in keep and need <= capacity:
                keep.add(job)
                capacity -= need
                if capacity == 0:
                    break
        kept = np.array([j in keep for j in ranked.tolist()], dtype=bool) & (self.state[ranked] == WAITING)
        return sorted(j for j in self.running if j not in keep), ranked[kept]

    def _preempt_round(self, ranked: np.ndarray, now: float) -> None:
        """A preemptive lease round. The kept waiting jobs first try the free GPUs; those still waiting then may
        use the victims' GPUs too. A victim is preempted (and pays the checkpoint) only if one of its GPUs was
        taken; the others keep running untouched."""
        victims, kept = self._selection(ranked, now)
        if not victims or kept.size == 0:
            return
        self._place_waiting(kept, now)
        kept = kept[self.state[kept] == WAITING]
        if kept.size == 0:
            return
        for job in victims:
            self.free.release(job, self.gpus_of[job])
        self._place_waiting(kept, now)
        for job in victims:
            gpus = self.gpus_of[job]
            if self.free.all_free(gpus):
                self.free.take(job, gpus)
                continue
            self._stop(job, now, released=True)
            self.overhead[job] += self.checkpoint
            self.preemptions[job] += 1
            self.state[job] = WAITING
            self.waiting.add(job)
            self.wait_since[job] = now

    def _place_waiting(self, ranked: np.ndarray, now: float) -> None:
        """Waiting jobs, in rank order, get GPUs from the placement policy or wait (maybe until a timer)."""
        placement = self.policy.placement
        ranked = ranked[(self.state[ranked] == WAITING) & (self.trace.gpus[ranked] <= self.free.total)]
        for job, demand in zip(ranked.tolist(), self.trace.gpus[ranked].tolist()):
            if demand > self.free.total:
                continue
            gpus, retry = placement.place(job, demand, now - self.wait_since[job], self.free, now)
            if gpus is not None:
                self._run(job, gpus, self.topology.level(gpus), now)
            elif retry is not None and self.wake_at.get(job) != retry:
                self.wake_at[job] = retry
                self._push(retry, WAKE, job)
            if self.free.total == 0:
                break

    def _migrate(self, now: float) -> None:
        """Gandiva-style: move a job whose GPUs span more than it needs to the tightest placement now free.
        Only worth trying when GPUs were freed since the last try."""
        if not self.freed or self.free.total == 0:
            return
        self.freed = False
        for job in sorted(self.spread):
            level = self.level_of[job]
            if level == 0:
                continue
            gpus = self.gpus_of[job]
            self.free.release(job, gpus)
            better, better_level = tightest(self.free, len(gpus))
            self.free.take(job, gpus)
            if better is not None and better_level < level:
                self._stop(job, now)
                self.overhead[job] += self.checkpoint
                self.migrations[job] += 1
                self._run(job, better, better_level, now)

    def _schedule(self, now: float, lease_round: bool) -> None:
        if lease_round and self.policy.preemptive and self.waiting:
            ranked = self._ranked(self.waiting | self.running, now)
            self._preempt_round(ranked, now)
            self._place_waiting(ranked, now)
        elif self.waiting and self.free.total > 0:
            self._place_waiting(self._ranked(self.waiting, now), now)
        if lease_round and self.policy.migrates:
            self._migrate(now)

    def _round_useful(self) -> bool:
        """A lease round can change something only for a preemptive policy with jobs waiting, or for a
        migrating one with spread jobs running."""
        return bool((self.policy.preemptive and self.waiting) or (self.policy.migrates and self.spread))

    # -- the event loop ------------------------------------------------------------------------------------------
    def run(self) -> Run:
        for job, t in enumerate(self.trace.arrival):
            self._push(float(t), ARRIVAL, job)
        events = 0
        while self.heap:
            now = self.heap[0][0]
            if now < self.now:
                raise RuntimeError(f"simulated time went backwards: {now} < {self.now}")
            self.now = now
            lease_round = False
            while self.heap and self.heap[0][0] == now:
                _, kind, _, job, version = heapq.heappop(self.heap)
                events += 1
                if kind == FINISH and version == self.version[job]:
                    self._stop(job, now)
                    self.done[job] = self.trace.iterations[job]  # exact, whatever the float rounding
                    self.state[job], self.finish[job] = DONE, now
                elif kind == ARRIVAL:
                    self.state[job] = WAITING
                    self.waiting.add(job)
                    self.wait_since[job] = now
                elif kind == ROUND:
                    lease_round, self.round_pending = True, False
            self._schedule(now, lease_round)
            if self._round_useful() and not self.round_pending:
                self._push((np.floor(now / self.lease) + 1) * self.lease, ROUND)
                self.round_pending = True
        if np.any(self.state != DONE):
            raise RuntimeError(f"{int(np.sum(self.state != DONE))} jobs never finished")
        log = self.log
        timers = self.policy.placement.tuned_timers(sorted(set(self.trace.gpus.tolist())), self.now)
        return Run(self.trace, self.topology, self.policy.name, self.lease, self.start, self.finish, self.held,
                   self.comm_seconds, self.done, self.preemptions, self.migrations,
                   np.array([r[0] for r in log], dtype=np.int64), np.array([r[1] for r in log]),
                   np.array([r[2] for r in log]), np.array([r[3] for r in log], dtype=np.int64),
                   tuple(r[4] for r in log), events, timers)


def simulate(trace: Trace, topology: Topology, policy: Policy, lease: float, checkpoint_seconds: float) -> Run:
    """Run ``trace`` on ``topology`` under ``policy`` (a fresh one from :func:`.policies.make_policy`)."""
    policy.placement.start(topology, lease)
    return Simulator(trace, topology, policy, lease, checkpoint_seconds).run()
