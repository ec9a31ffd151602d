"""The discrete-event cluster simulator: one heap of timestamped events, no per-tick loop.

Events are job arrivals, job finishes, lease rounds and delay-timer wake-ups. After all events of one instant
are applied, one scheduling pass runs:

- at a lease round (every ``lease`` seconds, while a round can change anything) a preemptive policy
  re-decides who holds GPUs: the running jobs whose lease has expired (held for a lease or more) compete
  with the waiting ones; the policy ranks them, keeps the top ranks that fit in the cluster and preempts the
  other running jobs (each pays ``checkpoint_seconds`` before it progresses again). A migrating policy moves
  spread jobs to tighter free GPUs;
- at any instant, waiting jobs in rank order get GPUs from the placement policy, or wait; nothing is tried
  while the free GPUs are fewer than the smallest waiting job asks for.

Where a policy's keys do not move while a job waits (every policy here but Themis), the waiting jobs stay sorted
between events (:class:`.queue.RankedQueue`): each is ranked once when it starts waiting, and a lease round only
ranks the running jobs and merges them in.

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
from .policies import JobView, Policy, admit_all
from .queue import RankedQueue, merged
from .topology import Topology

#: waiting jobs read from the ranked queue at a time when placing (the rest may not fit once these are placed)
PLACE_BLOCK = 32
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
        self.waiting_demand = np.zeros(topology.gpus + 1, dtype=np.int64)  # waiting jobs per GPU count
        self.queue = (RankedQueue(n) if policy.waiting_keys_fixed and policy.admission is admit_all else None)
        self.entering: list[int] = []  # jobs that started waiting at this instant, not yet in the queue
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

    def _wait(self, job: int, now: float) -> None:
        self.state[job] = WAITING
        self.waiting.add(job)
        self.waiting_demand[self.trace.gpus[job]] += 1
        self.wait_since[job] = now
        self.entering.append(job)

    def _run(self, job: int, gpus: np.ndarray, level: int, now: float) -> None:
        self.free.take(job, gpus)
        if job in self.waiting:
            self.waiting.remove(job)
            self.waiting_demand[self.trace.gpus[job]] -= 1
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

    def _waiting_in_order(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """The queue's waiting jobs in rank order and their keys, after ranking those that just started waiting."""
        if self.entering:
            entering = np.unique(np.array(self.entering, dtype=np.int64))
            entering = entering[self.state[entering] == WAITING]
            self.entering.clear()
            if entering.size:
                self.queue.add(entering, self.policy.order(self._view(entering, now)))
        return self.queue.ordered(self.state == WAITING)

    def _ranked_waiting(self, now: float) -> np.ndarray:
        if self.queue is None:
            return self._ranked(self.waiting, now)
        return self._waiting_in_order(now)[0]

    def _ranked_all(self, now: float) -> np.ndarray:
        """Waiting and running jobs in rank order (a lease round): the running ones ranked now, merged in."""
        if self.queue is None:
            return self._ranked(self.waiting | self.running, now)
        ids, keys = self._waiting_in_order(now)
        running = np.fromiter(self.running, dtype=np.int64, count=len(self.running))
        if running.size == 0:
            return ids
        return merged(ids, keys, running, self.policy.order(self._view(running, now)).astype(float))

    def _smallest_waiting_demand(self) -> int:
        return int(np.flatnonzero(self.waiting_demand)[0])

    def _selection(self, ranked: np.ndarray, now: float) -> tuple[list[int], np.ndarray]:
        """A lease round's choice, GPU count wise: keep the running jobs whose lease has not expired (held for less
        than a lease), then the top-ranked jobs that fit. Returns the running jobs left out (the possible victims)
        and the waiting jobs kept, in rank order."""
        running = np.fromiter(self.running, dtype=np.int64, count=len(self.running))
        since = np.array([self.since[j] for j in running.tolist()])
        keep = np.zeros(len(self.trace), dtype=bool)
        keep[running[now - since < self.lease - 1e-9]] = True
        capacity = self.topology.gpus - int(self.trace.gpus[keep].sum())
        need = self.trace.gpus[ranked]
        candidates = np.flatnonzero(~keep[ranked] & (need <= capacity))
        # the smallest demand from each candidate on: once it exceeds what is left, nothing more fits
        smallest_after = np.minimum.accumulate(need[candidates][::-1])[::-1]
        for i, position in enumerate(candidates.tolist()):
            if smallest_after[i] > capacity:
                break
            if need[position] <= capacity:
                keep[ranked[position]] = True
                capacity -= int(need[position])
        kept = keep[ranked] & (self.state[ranked] == WAITING)
        return sorted(running[~keep[running]].tolist()), ranked[kept]

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
            self._wait(job, now)

    def _place_waiting(self, ranked: np.ndarray, now: float) -> None:
        """Waiting jobs, in rank order, get GPUs from the placement policy or wait (maybe until a timer). The queue
        is read a block at a time, and no further than the first job from which on none fits the free GPUs."""
        placement = self.policy.placement
        ranked = ranked[(self.state[ranked] == WAITING) & (self.trace.gpus[ranked] <= self.free.total)]
        demands = self.trace.gpus[ranked]
        smallest_after = np.minimum.accumulate(demands[::-1])[::-1]  # never decreases along the queue
        start = 0
        while self.free.total > 0:
            end = min(np.searchsorted(smallest_after, self.free.total, side="right"), start + PLACE_BLOCK)
            if start >= end:
                return
            for job, demand in zip(ranked[start:end].tolist(), demands[start:end].tolist()):
                if demand > self.free.total:
                    continue
                gpus, retry = placement.place(job, demand, now - self.wait_since[job], self.free, now)
                if gpus is not None:
                    self._run(job, gpus, self.topology.level(gpus), now)
                elif retry is not None and self.wake_at.get(job) != retry:
                    self.wake_at[job] = retry
                    self._push(retry, WAKE, job)
            start = end

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
            ranked = self._ranked_all(now)
            self._preempt_round(ranked, now)
            self._place_waiting(ranked, now)
        elif self.waiting and self.free.total >= self._smallest_waiting_demand():
            self._place_waiting(self._ranked_waiting(now), now)
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
                    self._wait(job, now)
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
