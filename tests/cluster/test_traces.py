"""The trace loaders on a few rows of each real trace (data from the registry)."""

import json

import numpy as np
import pandas as pd
import pytest

from mlsysrepro.cluster import traces
from mlsysrepro.cluster.jobs import Trace
from mlsysrepro.cluster.model_sizes import gradient_bytes
from mlsysrepro.cluster.topology import Topology
from mlsysrepro.core.data import fetch

TOPOLOGY = Topology(2, 16, 8)


def test_tiresias_60_job_rows():
    trace = traces.load("tiresias_60", TOPOLOGY)
    assert len(trace) == 60
    # first row: 0,1,0,606,vgg19,164
    assert (trace.arrival[0], trace.gpus[0], trace.iterations[0], trace.model[0]) == (0, 1, 606, "vgg19")
    assert trace.compute_seconds[0] == pytest.approx(164 / 606)
    assert trace.gradient_bytes[0] == gradient_bytes("vgg19")
    assert trace.gpus[1] == 8 and trace.arrival[1] == 30


def test_gavel_generated_trace_recounts_iterations_but_keeps_the_duration():
    trace = traces.load("philly_gavelgen_5000", TOPOLOGY)
    raw = pd.read_csv(fetch("gavel_generated_traces") / "philly_gavelgen_seed0_lam110_n5000.csv")
    assert len(trace) == len(raw) == 5000
    np.testing.assert_allclose(trace.iterations * trace.compute_seconds, raw.duration.to_numpy(), rtol=1e-9)
    assert trace.gpus[0] == 8 and trace.model[0] == "resnet50"


def test_gavel_msr_trace_uses_measured_throughputs():
    name = traces.gavel_trace_names()[0]
    trace = traces.load(name, TOPOLOGY)
    root = fetch("gavel_throughputs_traces")
    trace_file = root / traces.GAVEL_TRACES / f"{name.removeprefix('gavel_')}.trace"
    first = trace_file.read_text().splitlines()[0].split("\t")
    rates = json.loads((root / traces.GAVEL_THROUGHPUTS).read_text())["v100"]
    assert trace.model[0] == first[0] and trace.iterations[0] == float(first[4]) and trace.gpus[0] == int(first[6])
    if trace.gpus[0] == 1:  # one GPU: no all-reduce, so one iteration is exactly Gavel's measured step
        assert trace.compute_seconds[0] == pytest.approx(1 / rates[str((first[0], 1))]["null"])


def test_gavel_calibration_reproduces_the_measured_spread_slowdown():
    root = fetch("gavel_throughputs_traces")
    table = traces._throughput_table(root / traces.GAVEL_THROUGHPUTS)
    volume, compute = traces.gavel_calibration(table, TOPOLOGY)["LM (batch size 20)"]
    measured_packed = 1 / table["v100"][("LM (batch size 20)", 2)]
    ours_packed = compute[2] + TOPOLOGY.allreduce_seconds(volume, [0, 1])
    assert ours_packed == pytest.approx(measured_packed)
    assert volume > 0  # the LM is measured much slower spread out


def test_yarn_durations_are_kept_and_the_load_is_as_asked():
    trace = traces.load("yarn_1000", TOPOLOGY, seed=0, load=0.5)
    raw = pd.read_csv(fetch("tiresias_sim_traces") / "simulator/yarn-gput1000.csv")
    np.testing.assert_allclose(np.sort(trace.iterations * trace.compute_seconds), np.sort(raw.duration))
    assert set(np.unique(trace.gpus)) <= {1, 2, 4, 8}
    work = np.sum(trace.gpus * trace.iterations * trace.compute_seconds)
    assert 0.4 < work / (np.ptp(trace.arrival) * TOPOLOGY.gpus) < 0.6  # Poisson arrivals: work per second near 0.5


def test_alibaba_openb_keeps_ended_gpu_pods():
    trace = traces.load("alibaba_openb", TOPOLOGY)
    raw = pd.read_csv(fetch("alibaba_gpu_traces_small") / traces.TRACES["alibaba_openb"][1])
    ended = raw[(raw.num_gpu >= 1) & raw.pod_phase.isin(["Succeeded", "Failed"])]
    assert len(trace) == len(ended)
    np.testing.assert_allclose(np.sort(trace.iterations * trace.compute_seconds),
                               np.sort((ended.deletion_time - ended.scheduled_time).clip(lower=1)))


def test_unknown_trace_names_the_choices():
    with pytest.raises(ValueError, match="trace must be one of"):
        traces.load("helios", TOPOLOGY)


def test_bad_trace_columns_are_refused():
    with pytest.raises(ValueError, match="needs >= 1 GPU"):
        Trace("bad", np.zeros(1), np.zeros(1, dtype=int), np.ones(1), np.ones(1), np.zeros(1), np.array(["x"]))
    with pytest.raises(ValueError, match="sorted"):
        Trace("bad", np.array([1.0, 0.0]), np.ones(2, dtype=int), np.ones(2), np.ones(2), np.zeros(2),
              np.array(["x", "y"]))


def test_a_users_job_table_in_helios_layout(tmp_path):
    path = tmp_path / "cluster_log.csv"
    pd.DataFrame({"job_id": ["a", "b", "c", "d"], "gpu_num": [8, 0, 2, 1],
                  "submit_time": ["2020-04-01 00:00:10", "2020-04-01 00:00:20", "2020-04-01 00:01:10",
                                  "2020-04-01 00:00:00"],
                  "duration": [3600, 50, 120, 60], "state": ["COMPLETED", "COMPLETED", "COMPLETED", "FAILED"]}
                 ).to_csv(path, index=False)
    trace = traces.load_job_table(path)
    assert trace.gpus.tolist() == [8, 2]  # the CPU-only job and the failed one are dropped
    assert trace.arrival.tolist() == [0.0, 60.0]  # seconds from the first kept submission
    np.testing.assert_allclose(trace.iterations * trace.compute_seconds, [3600, 120])
    with pytest.raises(ValueError, match="columns \\['gpus'\\] are missing"):
        traces.load_job_table(path, gpus="gpus")
