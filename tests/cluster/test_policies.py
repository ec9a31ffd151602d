"""Orderings, placement searches and Dally's auto-tuner formula."""

import math

import numpy as np
import pytest

from mlsysrepro.cluster.placement import DelayTimerTuner, FreeGPUs, anywhere, in_one_machine, in_one_rack, tuned_wait
from mlsysrepro.cluster.policies import JobView, least_attained_service, network_progress
from mlsysrepro.cluster.topology import Topology


def test_tuned_wait_is_the_papers_formula():
    # waits below one lease are ignored: kept 2, 4, 6 -> mean 4, population sigma sqrt(8/3) -> ceil(7.27) = 8
    assert tuned_wait([0.5, 2, 4, 6], floor=6, cap=16) == 8
    assert tuned_wait([0.5, 2, 4, 6], floor=6, cap=4) == 4  # the cap ceil(0.8 H) wins
    assert tuned_wait([], floor=6, cap=16) == 6  # nothing recorded: the statistic is 1, the floor wins
    assert tuned_wait([10, 20], floor=12, cap=20) == 20  # 15 + 2 * 5 = 25, capped at H


def test_tuner_bounds_are_its_floors_and_caps():
    assert DelayTimerTuner(history=20).bounds() == ((6, 16), (12, 20))
    assert DelayTimerTuner(history=5).bounds() == ((4, 4), (5, 5))  # caps below the floors: the caps win
    tuner = DelayTimerTuner(history=5)
    assert tuner.timers(2, now=0.0, lease=1.0) == (4, 5)


def test_tuner_forgets_waits_older_than_its_history_and_keys_by_demand():
    tuner = DelayTimerTuner(history=20)
    lease = 10.0
    for t, wait in [(0.0, 19.0), (100.0, 9.0), (150.0, 9.0)]:
        tuner.record(0, demand=2, now=t, wait=wait)
    # at t = 210 the window is [10, 210]: the 19-lease wait is gone, 9 and 9 remain -> ceil(9) = 9
    assert tuner.timers(2, now=210.0, lease=lease) == (9, 12)
    assert tuner.timers(4, now=210.0, lease=lease) == (6, 12)  # another demand has no history
    tuner.record(1, demand=2, now=210.0, wait=30.0)
    assert tuner.timers(2, now=210.0, lease=lease) == (9, 20)  # 30 > H = 20


def test_placements_prefer_best_fit_and_fewest_machines():
    topo = Topology(racks=2, machines_per_rack=2, gpus_per_machine=4)
    free = FreeGPUs(topo)
    free.take(0, np.array([0, 1, 2]))  # machine 0: 1 free
    free.take(1, np.array([4, 5]))  # machine 1: 2 free
    assert in_one_machine(free, 1).tolist() == [3]  # the fullest machine that fits
    assert in_one_machine(free, 2).tolist() == [6, 7]
    assert in_one_machine(free, 4).tolist() == [8, 9, 10, 11]
    assert sorted(in_one_rack(free, 3).tolist()) == [3, 6, 7]  # rack 0 has 3 free: best fit
    assert len(np.unique(in_one_rack(free, 6) // 4)) == 2  # rack 1, two machines
    assert anywhere(free, 12) is None and len(anywhere(free, 11)) == 11


def view(**columns):
    n = len(next(iter(columns.values())))
    base = dict(now=100.0, index=np.arange(n), arrival=np.zeros(n), gpus=np.ones(n), iterations=np.full(n, 100.0),
                done=np.zeros(n), attained=np.zeros(n), held=np.zeros(n), ideal_iteration=np.ones(n),
                iteration=np.ones(n))
    base.update(columns)
    return JobView(**base)


def test_las_queues_by_attained_service():
    order = least_attained_service((100.0, 1000.0))
    keys = order(view(attained=np.array([0.0, 99.0, 100.0, 5000.0])))
    assert keys.tolist() == [0, 0, 1, 2]


def test_dally_bids_favour_the_job_slowed_by_its_placement():
    # job 0 ran 50 s and did 50 ideal-second iterations; job 1 ran 50 s at half speed; job 2 never ran and, as in
    # the authors' simulator (mNwSlowdown starts at 0), goes first
    keys = network_progress(view(done=np.array([50.0, 25.0, 0.0]), held=np.array([50.0, 50.0, 0.0])))
    assert keys.tolist() == [1.0, 0.5, 0.0]
    assert np.argsort(keys, kind="stable").tolist() == [2, 1, 0]


def test_delay_timers_must_come_in_pairs():
    from mlsysrepro.cluster.placement import DelayScheduling

    with pytest.raises(ValueError, match="both"):
        DelayScheduling(rack_wait=3)
    assert math.isfinite(DelayScheduling(3, 6).fixed[0])
