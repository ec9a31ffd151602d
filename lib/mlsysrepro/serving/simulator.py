"""The serving simulator: a day of requests, per second, through autoscaled pools of VMs, one pool per model.

Time advances in whole seconds; what happens inside a second is solved in closed form, so a day costs the same
86,400 steps whether it carries 10^3 or 10^9 requests (:mod:`benchmarks.serving_simulator` checks the queues
against a per-request event simulation). In each second ``t``:

1. **VM events** due by ``t`` (a heap): a booted VM adds its capacity; a spot VM's revocation warning launches an
   on-demand replacement (policies with ``fallback``); a revocation removes the VM.
2. **Admission.** Class ``c``'s requests of this second go to the members of its current ensemble
   (``members[t // window, c]``). They are admitted when the longest virtual wait among those members' queues
   (backlog / capacity) is at most ``timeout`` seconds, and dropped otherwise: every request is served or dropped
   exactly once (:func:`check_invariants`).
3. **Queues.** Each model's pool is one FIFO fluid queue: ``backlog <- max(0, backlog + demand - capacity)``. A
   cohort's latency is the mean wait of its second's arrivals in the slowest member's queue (the backlog's
   trajectory within the second is linear) plus that member's service: the time of a full batch, or, where the
   workload gives the model's batching table, the latency of servers that batch what is queued at the pool's load
   (:func:`.batching.batched_service`).
4. **Scaling**, on the policy's clock (:mod:`.policies`): reactive every ``reactive_interval`` (add capacity for
   the recent rate and for draining the backlog), scale-in every ``scale_in_interval`` for reactive-only policies
   (release while the rest still covers the interval's peak), proactive every ``plan_interval`` (fill or kill to
   the forecast, raised by the recent misses' ``margin_quantile`` (:func:`forecast_margin`), times each model's
   share of requests). New VMs take the cheapest type per request
   (:func:`.fleet.cheapest`), on spot when the policy rents spot, and boot for ``launch_delay`` seconds. A policy
   that packs (Cocktail) may also rent a k-th of a VM for a model, k up to ``models_per_vm``
   (:func:`.fleet.packed`), where the model's batch, served in its share of the VM's time, still fits the model's
   latency budget (``Workload.budget_ms``).

After the last second the queues drain with no new arrivals; every VM still running is then released. Billing is
per second (:func:`.fleet.billed`).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from .batching import LOADS, batched_service
from .fleet import VMType, billed, capacity, cheapest, packed, service_time
from .policies import Policy, proactive_target, reactive_deficit


@dataclass(frozen=True)
class Workload:
    """What the simulator serves: per-second ``arrivals`` (seconds x classes), the ensemble schedule ``members``
    (windows x classes x models, bool) of ``window`` seconds per entry, and each model's ``rate_per_slot``
    (requests/s on a K80 slot), ``service_ms`` (one batch on a K80 slot) and ``budget_ms``: the longest a batch
    may take on a shared VM (the tightest latency SLO of the classes it serves; default: no share allowed).
    ``service_table`` (models x :data:`.batching.LOADS`, :func:`.batching.latency_table`): given, servers batch
    what is queued and ``service_ms`` is the time of a full batch; default: every batch is full."""

    arrivals: np.ndarray
    members: np.ndarray
    window: int
    rate_per_slot: np.ndarray
    service_ms: np.ndarray
    budget_ms: np.ndarray | None = None
    service_table: np.ndarray | None = None

    def __post_init__(self):
        seconds, classes = self.arrivals.shape
        windows = math.ceil(seconds / self.window)
        if self.members.shape[:2] != (windows, classes) or self.members.shape[2] != len(self.rate_per_slot):
            raise ValueError(f"members must be (windows={windows}, classes={classes}, models="
                             f"{len(self.rate_per_slot)}), got {self.members.shape}")
        if np.any(self.arrivals < 0):
            raise ValueError("arrivals must be non-negative counts")
        if np.any(self.members.sum(2) == 0):
            raise ValueError("every class needs at least one member in every window")
        if self.budget_ms is not None and np.shape(self.budget_ms) != np.shape(self.rate_per_slot):
            raise ValueError(f"budget_ms must hold one budget per model ({len(self.rate_per_slot)}), "
                             f"got shape {np.shape(self.budget_ms)}")
        if self.service_table is not None and np.shape(self.service_table) != (len(self.rate_per_slot), LOADS.size):
            raise ValueError(f"service_table must be (models={len(self.rate_per_slot)}, loads={LOADS.size}), "
                             f"got {np.shape(self.service_table)}")


@dataclass(frozen=True)
class Config:
    launch_delay: int = 100  # seconds from launch to serving (AWS GPU instances boot in 1-2 minutes)
    timeout: float = 2.0  # a request is dropped when its ensemble's queue wait exceeds this (seconds)
    reactive_interval: int = 5
    scale_in_interval: int = 60
    plan_interval: int = 60
    horizon: int = 2  # minutes ahead the forecast looks (entry k of a forecast is for minute k + horizon)
    margin_quantile: float = 0.95  # the proactive plan adds this quantile of the forecast's recent misses ...
    margin_window: int = 60  # ... over this many minutes
    utilisation: float = 0.8  # target share of capacity in use
    drain_seconds: float = 10.0  # the reactive rule provisions to clear a backlog within this
    revocation_per_hour: float = 0.0  # spot VMs are revoked at this rate (exponential lifetimes)
    warning: int = 120  # seconds of notice before a revocation (AWS gives two minutes)
    minimum_billing: float = 60.0
    max_drain: int = 3_600  # seconds the queues may drain after the last arrival
    models_per_vm: int = 1  # how many models a policy that packs may put on one VM (1: one model per VM)

    def __post_init__(self):
        for name in ("launch_delay", "reactive_interval", "scale_in_interval", "plan_interval", "models_per_vm"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.utilisation <= 1:
            raise ValueError(f"utilisation must be in (0, 1], got {self.utilisation}")
        if self.horizon < 1 or self.margin_window < 1 or not 0 < self.margin_quantile <= 1:
            raise ValueError("horizon and margin_window must be >= 1 minute and margin_quantile in (0, 1]")
        if self.timeout <= 0 or self.revocation_per_hour < 0:
            raise ValueError("timeout must be > 0 and revocation_per_hour >= 0")


@dataclass(frozen=True)
class Run:
    """One simulation. Per second and class: ``admitted``, ``dropped``, ``latency_s`` (the cohort's mean; NaN where
    nothing was admitted), ``models`` (ensemble size). Per second: ``vms`` and ``slots`` serving (a share of a
    VM counts as its share). Per model:
    ``demand`` and ``served`` (totals). Per VM (``vm_*``): model, type index, spot, launch / ready / end seconds,
    revoked, cost ($). ``backlog_left``: requests still queued when the drain limit ran out (counted dropped)."""

    admitted: np.ndarray
    dropped: np.ndarray
    latency_s: np.ndarray
    models: np.ndarray
    vms: np.ndarray
    slots: np.ndarray
    demand: np.ndarray
    served: np.ndarray
    vm_model: np.ndarray
    vm_type: np.ndarray
    vm_spot: np.ndarray
    vm_launch: np.ndarray
    vm_ready: np.ndarray
    vm_end: np.ndarray
    vm_revoked: np.ndarray
    vm_cost: np.ndarray
    backlog_left: np.ndarray
    end: int

    @property
    def cost(self) -> float:
        return float(self.vm_cost.sum())


class _Fleet:
    """The VMs of one run: who serves which model, what is booting, and the log billing reads."""

    def __init__(self, workload: Workload, types: tuple[VMType, ...], policy: Policy, config: Config,
                 rng: np.random.Generator):
        self.types, self.policy, self.config, self.rng = types, policy, config, rng
        self.rate = workload.rate_per_slot
        models = len(self.rate)
        budget = np.full(models, -np.inf) if workload.budget_ms is None else np.asarray(workload.budget_ms)
        # per model, the types it may rent: whole VMs always, a share where its batch still fits the budget
        self.allowed = np.array([[vm.share == 1 or service_time(vm, workload.service_ms[m]) <= budget[m]
                                  for vm in types] for m in range(models)])
        self.ready_capacity = np.zeros(models)
        self.speed_capacity = np.zeros(models)  # sum of capacity x speed x share over ready VMs (mean service speed)
        self.booting = np.zeros(models)
        self.ready_vms: list[list[int]] = [[] for _ in range(models)]
        self.booting_vms: list[list[int]] = [[] for _ in range(models)]
        self.log: dict[str, list] = {k: [] for k in ("model", "type", "spot", "launch", "ready", "end", "revoked",
                                                      "capacity")}
        self.events: list[tuple[float, int, int, str]] = []
        self.sequence = 0
        self.vms = 0.0
        self.slots = 0.0

    def _push(self, time: float, kind: str, vm: int):
        heapq.heappush(self.events, (time, self.sequence, vm, kind))
        self.sequence += 1

    def launch(self, model: int, uncovered: float, now: int, spot: bool, delay: int):
        """Launch VMs for ``model`` until ``uncovered`` requests/s are covered, the cheapest type per request."""
        while uncovered > 1e-9:
            kind = cheapest(self.types, self.rate[model], uncovered, spot, now, self.allowed[model])
            cap = capacity(self.types[kind], self.rate[model])
            vm = len(self.log["model"])
            for key, value in (("model", model), ("type", kind), ("spot", spot), ("launch", now),
                               ("ready", now + delay), ("end", math.inf), ("revoked", False), ("capacity", cap)):
                self.log[key].append(value)
            self.booting_vms[model].append(vm)
            self._recount(model)
            self._push(now + delay, "ready", vm)
            if spot and self.config.revocation_per_hour > 0:
                revoke_at = now + self.rng.exponential(3600 / self.config.revocation_per_hour)
                self._push(revoke_at, "revoke", vm)
                if self.policy.fallback:
                    self._push(max(now, revoke_at - self.config.warning), "warn", vm)
            uncovered -= cap

    def _stop(self, vm: int, now: float, revoked: bool):
        model = self.log["model"][vm]
        if vm in self.ready_vms[model]:
            self.ready_vms[model].remove(vm)
            vm_type = self.types[self.log["type"][vm]]
            self.vms -= vm_type.share
            self.slots -= vm_type.slots * vm_type.share
        else:
            self.booting_vms[model].remove(vm)
        self._recount(model)
        self.log["end"][vm], self.log["revoked"][vm] = now, revoked

    def _recount(self, model: int):
        """A pool's ready and booting capacity and its speed-weighted capacity, summed afresh (no drift from adding
        and subtracting)."""
        self.booting[model] = sum(self.log["capacity"][vm] for vm in self.booting_vms[model])
        vms = self.ready_vms[model]
        self.ready_capacity[model] = sum(self.log["capacity"][vm] for vm in vms)
        self.speed_capacity[model] = sum(self.log["capacity"][vm] * self.types[self.log["type"][vm]].speed
                                         * self.types[self.log["type"][vm]].share for vm in vms)

    def advance(self, now: int):
        """Process the VM events due by ``now``."""
        while self.events and self.events[0][0] <= now:
            time, _, vm, kind = heapq.heappop(self.events)
            if self.log["end"][vm] != math.inf:
                continue  # released before its event came
            model = self.log["model"][vm]
            if kind == "ready":
                self.booting_vms[model].remove(vm)
                self.ready_vms[model].append(vm)
                self._recount(model)
                vm_type = self.types[self.log["type"][vm]]
                self.vms += vm_type.share
                self.slots += vm_type.slots * vm_type.share
            elif kind == "warn":
                self.launch(model, self.log["capacity"][vm], now, False, self.config.launch_delay)
            else:
                self._stop(vm, time, revoked=True)

    def release_down_to(self, model: int, keep: float, now: int, warm: bool):
        """Release ready VMs of ``model``, the dearest per request first, while the rest cover ``keep`` (and, when
        ``warm``, while one VM stays)."""
        def dearness(vm):
            vm_type = self.types[self.log["type"][vm]]
            return vm_type.price(self.log["spot"][vm], now) / self.log["capacity"][vm]
        for vm in sorted(self.ready_vms[model], key=dearness, reverse=True):
            if warm and len(self.ready_vms[model]) == 1:
                break
            if self.ready_capacity[model] - self.log["capacity"][vm] >= keep - 1e-9:
                self._stop(vm, now, revoked=False)

    def service_speed(self) -> np.ndarray:
        return np.divide(self.speed_capacity, self.ready_capacity, out=np.ones_like(self.ready_capacity),
                         where=self.ready_capacity > 0)


def _mean_wait(backlog: np.ndarray, demand: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Mean wait (seconds) of one second's arrivals in fluid FIFO queues: the backlog moves linearly from
    ``backlog`` at rate ``demand - cap`` and stops at zero; a request arriving at ``s`` waits ``backlog(s) / cap``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        empties = np.where(demand < cap, backlog / np.maximum(cap - demand, 1e-12), np.inf)
        linear = (backlog + (demand - cap) / 2) / cap
        partial = backlog * empties / 2 / cap
        wait = np.where(empties >= 1, linear, partial)
    return np.where(cap > 0, np.maximum(wait, 0.0), np.inf)


def _backlogs(start: np.ndarray, demand: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """(seconds + 1) x models: the queues' backlog before each second and after the last, by Lindley's recursion
    ``B_t = max(0, B_{t-1} + d_t - c)`` in closed form: the running sum less its running minimum below zero."""
    running = np.vstack([start[None], start + np.cumsum(demand - cap, axis=0)])
    return running - np.minimum(np.minimum.accumulate(running, axis=0), 0.0)


def _start_wait(backlog: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """The virtual wait (seconds) a request arriving now would see: backlog / capacity; no capacity: infinite."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(cap > 0, np.where(backlog > 1e-9, backlog / cap, 0.0), np.inf)


def forecast_margin(forecast: np.ndarray, rates: np.ndarray, minute: int, horizon: int, window: int,
                    quantile: float) -> float:
    """How much to add to the forecast made at ``minute``: the ``quantile`` of ``actual / forecast`` over the
    forecasts of the last ``window`` minutes whose target minute has passed (at least 1: a plan never provisions
    below its forecast; 1 before any has)."""
    made = np.arange(max(minute - horizon - window + 1, 0), minute - horizon + 1)
    made = made[(made + horizon < len(rates)) & (forecast[made] > 0)]
    if made.size == 0:
        return 1.0
    return max(1.0, float(np.quantile(rates[made + horizon] / forecast[made], quantile)))


def simulate(workload: Workload, policy: Policy, types: tuple[VMType, ...], config: Config = Config(),
             forecast: np.ndarray | None = None, seed: int = 0) -> Run:
    """Serve ``workload`` under ``policy`` on VMs of ``types``; ``forecast`` is required by proactive policies: per
    minute ``k``, the total arrival rate the predictor expects a few minutes ahead (past a VM's boot), having seen
    minutes up to ``k`` (a plan at second ``t`` reads the entry of minute ``t // 60 - 1``, the last whole one).

    The seconds between two moments where anything can change (a scaling tick, a VM event) share one capacity, so
    they are solved together (:func:`_backlogs`); from the first second where some request would wait past the
    timeout, a stretch is redone second by second, because its drops change the queues."""
    if policy.proactive and forecast is None:
        raise ValueError(f"policy {policy.name} plans proactively and needs a forecast")
    arrivals, members = workload.arrivals, workload.members
    seconds, classes = arrivals.shape
    models = len(workload.rate_per_slot)
    if policy.packing and config.models_per_vm > 1:
        types = packed(types, config.models_per_vm)
    fleet = _Fleet(workload, types, policy, config, np.random.default_rng(seed))
    # start warm: each model its classes may select provisioned for the first minute, serving from second 0
    first = arrivals[:60].mean(0) @ members.any(axis=0).astype(float)
    for model in np.flatnonzero(first > 0):
        fleet.launch(int(model), first[model] / config.utilisation, 0, policy.spot, 0)
    fleet.advance(0)
    selected = workload.members.any(axis=(0, 1))  # models a policy keeps warm: never scaled below one VM

    backlog = np.zeros(models)
    admitted = np.zeros((seconds, classes), dtype=np.int64)
    latency = np.full((seconds, classes), np.nan)
    vms = np.zeros(seconds)
    slots = np.zeros(seconds)
    demand_log = np.zeros((seconds, models))  # requests entering each model's queue, per second
    offered_log = np.zeros((seconds, models))  # requests sent its way, admitted or not: what autoscalers see
    served_total = np.zeros(models)
    service_s = workload.service_ms / 1e3
    member_float = members.astype(float)
    minute_rates = arrivals.sum(1)[: seconds // 60 * 60].reshape(-1, 60).mean(1)  # what forecasts are scored on
    reactive = config.reactive_interval
    scaling = config.plan_interval if policy.proactive else config.scale_in_interval
    t = 0
    while t < seconds:
        fleet.advance(t)
        cap = fleet.ready_capacity.copy()
        stop = min(seconds, t - t % scaling + scaling)
        if fleet.events:
            stop = min(stop, max(t + 1, math.ceil(fleet.events[0][0])))
        seconds_in = np.arange(t, stop)
        counts = arrivals[t:stop]
        member = members[seconds_in // workload.window]  # seconds x classes x models
        offered = np.einsum("sc,scm->sm", counts.astype(float), member_float[seconds_in // workload.window])
        demand = offered.copy()
        queue = _backlogs(backlog, demand, cap)
        waits = np.where(member, _start_wait(queue[:-1], cap)[:, None, :], 0.0).max(2)
        admit_counts = counts
        late = np.flatnonzero(((waits > config.timeout) & (counts > 0)).any(1))
        if late.size:  # drops from the first late second on change the queues: from there, second by second
            rows, queue = list(counts[:late[0]]), list(queue[:late[0] + 1])
            for offset in range(late[0], stop - t):
                wait = np.where(member[offset], _start_wait(queue[-1], cap), 0.0).max(1)
                rows.append(np.where(wait <= config.timeout, counts[offset], 0))
                demand[offset] = rows[-1] @ member_float[(t + offset) // workload.window]
                queue.append(np.maximum(queue[-1] + demand[offset] - cap, 0.0))
            admit_counts, queue = np.array(rows), np.array(queue)
        demand_log[t:stop], offered_log[t:stop] = demand, offered
        # a reactive tick inside the stretch that would launch VMs ends the stretch there
        ticks = np.arange(t - t % reactive + reactive, stop, reactive)
        if ticks.size:
            rates = np.stack([offered_log[max(k - reactive, 0):k].sum(0) for k in ticks]) / reactive
            deficits = reactive_deficit(rates, queue[ticks - t], fleet.ready_capacity + fleet.booting,
                                        config.utilisation, config.drain_seconds)
            acting = np.flatnonzero(deficits.max(1) > 0)
            if acting.size:
                stop = int(ticks[acting[0]])
                demand_log[stop:t + len(demand)] = 0.0
                offered_log[stop:t + len(demand)] = 0.0
                demand, admit_counts, member = demand[:stop - t], admit_counts[:stop - t], member[:stop - t]
                queue = queue[:stop - t + 1]
        speed = fleet.service_speed()
        if workload.service_table is None:
            service = service_s / speed
        else:
            load = np.divide(demand, cap, out=np.full_like(demand, np.inf), where=cap > 0)
            service = batched_service(load, workload.service_table, service_s / speed, queue[:-1])
        cohort = _mean_wait(queue[:-1], demand, cap) + service
        admitted[t:stop] = admit_counts
        latency[t:stop] = np.where(admit_counts > 0, np.where(member, cohort[:, None, :], -np.inf).max(2), np.nan)
        vms[t:stop], slots[t:stop] = fleet.vms, fleet.slots
        served_total += (queue[:-1] + demand - queue[1:]).sum(0)
        backlog = queue[-1]
        t = stop
        if t >= seconds:
            break
        if t % reactive == 0:
            deficit = reactive_deficit(offered_log[t - reactive:t].sum(0) / reactive, backlog,
                                       fleet.ready_capacity + fleet.booting, config.utilisation,
                                       config.drain_seconds)
            for model in np.flatnonzero(deficit > 0):
                fleet.launch(int(model), deficit[model], t, policy.spot, config.launch_delay)
        if t % scaling:
            continue
        if not policy.proactive:
            peak = offered_log[max(t - scaling, 0):t].max(0)
            for model in range(models):
                if fleet.booting[model] == 0 and backlog[model] <= 1e-9:
                    fleet.release_down_to(model, peak[model] / config.utilisation, t, selected[model])
            continue
        recent = offered_log[max(t - scaling, 0):t].sum(0)
        if policy.importance:
            shares = recent / max(float(arrivals[max(t - scaling, 0):t].sum()), 1.0)
        else:
            shares = (recent > 0).astype(float)
        made = max(min(t // 60 - 1, len(forecast) - 1), 0)  # the last whole minute: entry k has seen minutes to k
        margin = forecast_margin(forecast, minute_rates, made, config.horizon, config.margin_window,
                                 config.margin_quantile)
        target = proactive_target(float(forecast[made]) * margin, shares, config.utilisation)
        for model in range(models):
            provisioned = fleet.ready_capacity[model] + fleet.booting[model]
            if target[model] > provisioned + 1e-9:
                fleet.launch(model, target[model] - provisioned, t, policy.spot, config.launch_delay)
            elif backlog[model] <= 1e-9:  # kill down to the forecast: the predictor decides what is kept
                fleet.release_down_to(model, target[model], t, selected[model])
    while backlog.sum() > 1e-9 and t < seconds + config.max_drain:  # drain, no new arrivals
        fleet.advance(t)
        served = np.minimum(backlog, fleet.ready_capacity)
        served_total += served
        backlog = backlog - served
        t += 1
    end = t
    log = fleet.log
    vm_end = np.minimum(np.array(log["end"], dtype=float), end)
    vm_type, vm_spot = np.array(log["type"], dtype=np.int64), np.array(log["spot"], dtype=bool)
    vm_launch = np.array(log["launch"], dtype=float)
    return Run(admitted=admitted, dropped=arrivals - admitted, latency_s=latency,
               models=members[np.arange(seconds) // workload.window].sum(2),
               vms=vms, slots=slots, demand=demand_log.sum(0), served=served_total,
               vm_model=np.array(log["model"], dtype=np.int64), vm_type=vm_type, vm_spot=vm_spot,
               vm_launch=vm_launch, vm_ready=np.array(log["ready"], dtype=float), vm_end=vm_end,
               vm_revoked=np.array(log["revoked"], dtype=bool),
               vm_cost=billed(types, vm_type, vm_spot, vm_launch, vm_end, config.minimum_billing),
               backlog_left=backlog, end=end)


def check_invariants(run: Run, workload: Workload) -> list[str]:
    """What every run must satisfy; the problems found (empty: none). Every request is admitted or dropped exactly
    once; every admitted request reaches each member's queue, and every queued one is served or left when the drain
    ran out; no VM ends before it launched or is billed past the run's end; every VM's cost is its per-second bill."""
    problems = []
    if not np.array_equal(run.admitted + run.dropped, workload.arrivals) or np.any(run.dropped < 0):
        problems.append("admitted + dropped differs from the arrivals")
    expected_demand = np.einsum("tc,tcm->m", run.admitted.astype(float),
                                workload.members[np.arange(len(run.admitted)) // workload.window].astype(float))
    if not np.allclose(run.demand, expected_demand):
        problems.append("the queues' demand differs from the admitted requests times their ensembles")
    if not np.allclose(run.served + run.backlog_left, run.demand, rtol=1e-9, atol=1e-6):
        problems.append("served + still queued differs from the demand")
    if np.any(run.vm_end < run.vm_launch) or np.any(run.vm_end > run.end):
        problems.append("a VM ends before its launch or after the run")
    if np.any(run.vm_cost < 0):
        problems.append("a VM has a negative cost")
    return problems
