"""The figure tables assembled from hand-made profiles: the stall arithmetic is wired to the right runs."""

import pandas as pd
import pytest

from mlsysrepro.core.settings import validate_presets
from mlsysrepro.papers import ddl_stalls


def row(experiment, run, configuration, seconds, workers=8, dilation=100.0, data=0.0, exposed=0.0, batch=32,
        model="m"):
    return dict(experiment=experiment, model=model, configuration=configuration, run=run, workers=workers,
                batch_size=batch, samples_per_iteration=batch * workers, dilation=dilation, seconds=seconds,
                seconds_std=0.0, repeat_seconds=[seconds * 0.9, seconds * 1.1], data_seconds=data,
                comm_exposed_seconds=exposed, bucket_bytes=[], bucket_modelled=[], bucket_measured=[])


@pytest.fixture
def table():
    rows = [row("breakdown", "RUN0", "RUN0", 0.10, workers=1, dilation=1.0),
            row("breakdown", "RUN1", "p3.16xlarge", 0.40, exposed=0.28),
            row("breakdown", "RUN3", "p3.16xlarge", 0.46, data=0.05),
            row("breakdown", "RUN2", "p3.16xlarge", 0.50, data=0.09),
            row("breakdown", "RUN1", "2xp3.8xlarge", 1.60)]
    frame = pd.DataFrame(rows)
    frame["instance_seconds"] = frame.seconds / frame.dilation
    return frame


def test_breakdown_subtracts_the_right_runs(table):
    b = ddl_stalls.breakdown(table, [["2xp3.8xlarge", "p3.16xlarge"]]).set_index("configuration")
    one = b.loc["p3.16xlarge"]
    assert one.communication == pytest.approx(0.30) and one.interconnect_share == pytest.approx(0.75)
    assert one.prep == pytest.approx(0.06) and one.fetch == pytest.approx(0.04)
    assert one.prep_waited == pytest.approx(0.05) and one.fetch_waited == pytest.approx(0.04)
    two = b.loc["2xp3.8xlarge"]
    # 1.6 s: 0.1 compute, 0.3 as on one machine, 1.2 more for the network
    assert two.network_share == pytest.approx(1.2 / 1.6)
    assert two.interconnect_share == pytest.approx(0.3 / 1.6)
    # each repeat's RUN1 beside the RUN0s bracketing that repeat: C1's interval
    assert one.RUN1_repeats == pytest.approx([0.36, 0.44]) and one.RUN0_repeats == pytest.approx([0.09, 0.11])


def test_a_runs_repeats_are_its_iterations_split_in_run_order():
    from types import SimpleNamespace

    import numpy as np

    spec = SimpleNamespace(model_name="m", label="RUN0", run="RUN0", batch_size=4, samples_per_iteration=4,
                           cluster=SimpleNamespace(machines=1, workers_per_machine=1, workers=1))
    result = SimpleNamespace(spec=spec, times={"iteration": np.array([1.0, 3.0, 2.0, 10.0, 12.0, 11.0])},
                             seconds_per_iteration=6.5, bucket_bytes=[], bucket_modelled=[], bucket_measured=[])
    rows = ddl_stalls._rows([result], "breakdown", {}, repeats=2)
    assert rows[0]["repeat_seconds"] == [2.0, 11.0]


def test_network_table_reports_the_slowdown(table):
    n = ddl_stalls.network_table(table, [["2xp3.8xlarge", "p3.16xlarge"]]).iloc[0]
    assert n.slowdown == pytest.approx(4.0) and n.share == pytest.approx(3.0)
    assert n.compute == pytest.approx(0.10 / 100.0)  # RUN0 over the pair's dilation: instance seconds


def test_epoch_costs_and_the_recommendation():
    rows = [row("breakdown", "RUN1", "p3.2xlarge", 0.1, workers=1, dilation=1.0),
            row("breakdown", "RUN1", "p3.16xlarge", 0.2, workers=8, dilation=1.0)]
    frame = pd.DataFrame(rows)
    frame["instance_seconds"] = frame.seconds / frame.dilation
    price = {"p3.2xlarge": 3.0, "p3.16xlarge": 24.0}
    epochs = ddl_stalls.epoch_table(frame, 3200 * 36, price, price).set_index("configuration")
    # 3600 iterations of 0.1 s = 0.1 h on one GPU; 450 of 0.2 s = 0.025 h on eight
    assert epochs.loc["p3.2xlarge", "hours_per_epoch"] == pytest.approx(0.1)
    assert epochs.loc["p3.16xlarge", "hours_per_epoch"] == pytest.approx(0.025)
    assert epochs.loc["p3.16xlarge", "cost_per_epoch"] == pytest.approx(0.6)
    verdict = ddl_stalls.expensive_not_cheapest(epochs.reset_index()).iloc[0]
    assert verdict.most_expensive == "p3.16xlarge" and verdict.cheapest_per_epoch == "p3.2xlarge"
    assert verdict.most_expensive_is_fastest and not verdict.cheapest_beyond_noise
    tied = epochs.reset_index().assign(samples_per_second_std=lambda f: 0.3 * f.samples_per_second)
    tied.loc[tied.configuration == "p3.16xlarge", "cost_per_epoch"] = 0.25  # cheapest, but within 30 % noise
    close = ddl_stalls.expensive_not_cheapest(tied).iloc[0]
    assert close.most_expensive_is_cheapest and not close.cheapest_beyond_noise
    clear = ddl_stalls.expensive_not_cheapest(tied.assign(samples_per_second_std=0.0)).iloc[0]
    assert clear.cheapest_beyond_noise
    rec = ddl_stalls.recommendations(epochs.reset_index(), 10, [0.5, 1.0, 4.0]).set_index("budget_factor")
    assert rec.loc[0.5, "choice"] == "none meets the budget"
    assert rec.loc[1.0, "choice"] == "p3.16xlarge" and rec.loc[4.0, "choice"] == "p3.2xlarge"


def test_presets_are_complete():
    validate_presets(ddl_stalls.PRESETS)
