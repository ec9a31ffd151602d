"""The simulator on a hand-checked schedule and on random traces under every policy."""

import numpy as np
import pytest

from mlsysrepro.cluster.examples import delay_example, delay_scheduling_only
from mlsysrepro.cluster.jobs import Trace
from mlsysrepro.cluster.metrics import check_invariants, summary, utilisation
from mlsysrepro.cluster.placement import Placement, in_one_machine
from mlsysrepro.cluster.policies import POLICIES, Policy, fifo, make_policy
from mlsysrepro.cluster.simulator import simulate
from mlsysrepro.cluster.topology import Topology

TRACE, TWO_MACHINES = delay_example()


def scenario() -> Trace:
    """A..D hold both machines (2 GPUs each, 1 s per iteration, no gradient); E (4 GPUs, 40 iterations, 1 GB
    gradient) arrives at 0 too. B ends at 20 (2 GPUs free in machine 0), C at 30 (2 free in machine 1), A and D
    at 100. E spread over both machines: 1 + (2*1/2 * 1 GB / 1 GB/s) + (2*1/2 * 1 GB / 0.5 GB/s) = 4 s per
    iteration; inside one machine it is 1 + 2*3/4 * 1 = 2.5 s."""
    return TRACE.take(np.arange(5))


def run(policy, **knobs):
    policy = delay_scheduling_only(**knobs) if policy == "delay" else make_policy(policy, **knobs)
    result = simulate(scenario(), TWO_MACHINES, policy, lease=10.0, checkpoint_seconds=0.0)
    check_invariants(result)
    return result


def test_fifo_places_the_big_job_across_machines_as_soon_as_four_gpus_are_free():
    result = run("fifo")
    np.testing.assert_allclose(result.finish, [100, 20, 30, 100, 30 + 40 * 4.0])
    assert result.start[4] == 30.0
    assert result.log_level[result.log_job == 4].tolist() == [1]  # rack level, to the end: FIFO never migrates


def test_delay_scheduling_waits_exactly_until_its_rack_timer_then_takes_the_rack_placement():
    """Timer 5 leases = 50 s: E spreads at 50; at 100 (A and D end) the lease round moves it into one machine.
    50..100 at 4 s: 12.5 iterations; the other 27.5 at 2.5 s: 68.75 s."""
    result = run("delay", rack_wait=5, network_wait=10)
    assert result.start[4] == 50.0
    np.testing.assert_allclose(result.finish, [100, 20, 30, 100, 100 + 27.5 * 2.5])
    assert result.log_level[result.log_job == 4].tolist() == [1, 0]
    assert result.migrations[4] == 1 and result.preemptions.sum() == 0


def test_delay_scheduling_with_a_timer_already_expired_spreads_at_once_like_fifo():
    """Waited 3 leases at t = 30 >= 2: spread at 30; 30..100 at 4 s is 17.5 iterations, 22.5 left at 2.5 s."""
    result = run("delay", rack_wait=2, network_wait=4)
    assert result.start[4] == 30.0 and result.finish[4] == pytest.approx(100 + 22.5 * 2.5)


def test_a_consolidated_wait_pays_off_when_a_machine_frees_before_the_timer():
    """With D ending at 60 and a 7-lease timer (70 s), E gets all of machine 1 at 60: 60 + 40 * 2.5 = 160,
    earlier than FIFO's spread run (190)."""
    trace = scenario()
    trace.iterations[3] = 60.0
    result = simulate(trace, TWO_MACHINES, delay_scheduling_only(7, 14), 10.0, 0.0)
    check_invariants(result)
    assert result.start[4] == 60.0 and result.finish[4] == pytest.approx(160.0)
    assert result.log_level[result.log_job == 4].tolist() == [0]
    assert result.comm_seconds[4] == pytest.approx(40 * 1.5)


def test_full_dally_auctions_the_expiring_leases_and_a_job_that_never_ran_wins_them():
    """At t = 10 every lease expires and E (bid 0: it has not run) outbids A..D (bid 1): it takes the whole of
    machine 1 (a machine-level placement needs no timer), preempting C and D. At t = 20 E's lease expires with
    E, C and D all at the ideal pace (bid 1): C and D, who lost their GPUs first, win them back. Nobody is placed
    across machines before the rack timer."""
    result = run("dally_fixed", rack_wait=5, network_wait=10)
    assert result.start[4] == 10.0
    assert result.preemptions[[2, 3, 4]].tolist() == [1, 1, 1]
    first = np.flatnonzero(result.log_job == 4)[0]
    assert (result.log_start[first], result.log_end[first], result.log_level[first]) == (10.0, 20.0, 0)
    spread = result.log_level[result.log_job == 4] > 0
    assert (result.log_start[result.log_job == 4][spread] >= 20.0 + 5 * 10.0).all()  # waiting since 20: timer at 70


def random_trace(seed: int, jobs: int = 80) -> Trace:
    rng = np.random.default_rng(seed)
    return Trace(f"random{seed}", arrival=np.sort(rng.uniform(0, 2_000, jobs)).round(),
                 gpus=rng.choice([1, 2, 4, 8], jobs, p=[0.5, 0.2, 0.2, 0.1]),
                 iterations=rng.integers(10, 400, jobs).astype(float), compute_seconds=rng.uniform(0.2, 1.0, jobs),
                 gradient_bytes=rng.choice([0.0, 5e7, 5e8], jobs), model=np.array(["x"] * jobs))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", [0, 1])
def test_invariants_hold_on_random_traces(policy, seed):
    topology = Topology(racks=2, machines_per_rack=2, gpus_per_machine=4, contention=2.0)
    result = simulate(random_trace(seed), topology, make_policy(policy, las_threshold=200.0), lease=30.0,
                      checkpoint_seconds=3.0)
    check_invariants(result)
    row = summary(result)
    assert 0 < row["utilisation"] <= 1
    assert row["comm_share"] < 1
    assert sum(row[f"spread_{level}"] for level in ("machine", "rack", "network")) == pytest.approx(1.0)


def test_the_invariant_check_catches_a_gpu_held_twice():
    result = run("fifo")
    gpus = list(result.log_gpus)
    a, e = int(np.flatnonzero(result.log_job == 0)[0]), int(np.flatnonzero(result.log_job == 4)[0])
    gpus[e] = gpus[a]  # pretend E (30..190) ran on A's GPUs (0..100)
    broken = type(result)(**{**result.__dict__, "log_gpus": tuple(gpus)})
    with pytest.raises(AssertionError, match="two jobs"):
        check_invariants(broken)


def test_preemptive_policies_pay_the_checkpoint_and_still_finish_every_iteration():
    topology = Topology(racks=2, machines_per_rack=2, gpus_per_machine=4)
    trace = random_trace(3, jobs=120)
    for policy in ("srsf", "tiresias", "themis"):
        result = simulate(trace, topology, make_policy(policy, las_threshold=100.0), lease=20.0, checkpoint_seconds=5.0)
        check_invariants(result)
        assert result.preemptions.sum() > 0, policy
        ideal = trace.iterations * trace.compute_seconds
        assert np.all(result.held_seconds >= ideal - 1e-6)  # nobody runs faster than its compute


def test_utilisation_is_a_step_function_of_the_log():
    result = run("fifo")
    times, busy = utilisation(result)
    assert busy[times == 0.0][0] == 1.0  # all 8 GPUs held from t = 0
    assert busy[times == 20.0][0] == 0.75  # B's 2 GPUs free
    assert busy[-1] == 0.0


def test_a_job_larger_than_the_cluster_is_refused_with_a_clear_error():
    trace = scenario()
    trace.gpus[4] = 16
    with pytest.raises(ValueError, match="more than the cluster's 8 GPUs"):
        simulate(trace, TWO_MACHINES, make_policy("fifo"), 10.0, 0.0)


def test_unknown_policy_names_the_choices():
    with pytest.raises(ValueError, match="policy must be one of"):
        make_policy("lottery")


def test_placement_spread_weights_levels_by_gpu_time():
    """FIFO: A-D hold 2 GPUs in one machine for 100 + 20 + 30 + 100 s (500 GPU-s); E holds 4 across the rack for
    160 s (640 GPU-s)."""
    from mlsysrepro.cluster.metrics import placement_spread

    spread = placement_spread(run("fifo"))
    assert spread == pytest.approx({"machine": 500 / 1140, "rack": 640 / 1140, "network": 0.0})


class OneMachineOnly:
    """A placement written against the Placement protocol alone: a job starts only inside one machine."""

    name = "one machine only"

    def start(self, topology, lease):
        self.starts = 0

    def place(self, job, demand, waited, free, now):
        gpus = in_one_machine(free, demand)
        self.starts += gpus is not None
        return gpus, None

    def tuned_timers(self, demands, now):
        return {d: (self.starts, 0) for d in demands}


def test_the_simulator_needs_nothing_of_a_placement_but_its_protocol():
    placement = OneMachineOnly()
    assert isinstance(placement, Placement)
    result = simulate(scenario(), TWO_MACHINES, Policy("custom", fifo, placement, preemptive=False), 10.0, 0.0)
    check_invariants(result)
    assert result.start[4] == 100.0  # E waited for a whole machine (A and D end at 100)
    assert set(result.log_level.tolist()) == {0} and placement.starts == 5
    assert result.final_timers == {2: (5, 0), 4: (5, 0)}


@pytest.mark.parametrize("policy", ["fifo", "srsf", "tiresias", "dally"])
def test_the_ranked_queue_gives_the_run_that_ranking_every_event_gives(policy):
    """Keeping the waiting queue sorted between events (``waiting_keys_fixed``) changes nothing: the same run as
    re-ranking every waiting job at every event, on an overloaded random trace with preemptions."""
    topology = Topology(racks=2, machines_per_rack=2, gpus_per_machine=4, contention=2.0)
    trace = random_trace(3, jobs=300)
    fixed = simulate(trace, topology, make_policy(policy, las_threshold=200.0), lease=30.0, checkpoint_seconds=3.0)
    reranking = make_policy(policy, las_threshold=200.0)
    reranking.waiting_keys_fixed = False
    every_event = simulate(trace, topology, reranking, lease=30.0, checkpoint_seconds=3.0)
    assert np.array_equal(fixed.finish, every_event.finish) and np.array_equal(fixed.start, every_event.start)
    assert np.array_equal(fixed.preemptions, every_event.preemptions)
    assert policy in ("fifo",) or fixed.preemptions.sum() > 0  # the preemptive ones really re-queued jobs
