import pytest

from mlsysrepro.gnn.llcg import LLCGConfig, make_model, run_serial, state_bytes
from mlsysrepro.gnn.llcg_dist import run, run_distributed
from mlsysrepro.gnn.partition import partition_graph

from .conftest import toy_data


def test_serial_and_distributed_engines_give_the_same_model_and_bytes():
    """2 machines + the server on gloo over 127.0.0.1, 2 rounds of LLCG with dropout."""
    data = toy_data(80, 320, seed=8)
    parting = partition_graph(data, 2, "metis", seed=0)
    cfg = LLCGConfig(method="llcg", rounds=2, local_steps=3, batch_size=8, server_batch=16, hidden=8, fanout=3,
                     server_fanout=3, dropout=0.2)
    serial_log, serial = run_serial(data, parting, cfg, seed=2)
    dist_log, distributed = run_distributed(data, parting, cfg, seed=2, timeout=120)
    assert max(float((serial[k] - distributed[k]).abs().max()) for k in serial) <= 1e-5
    model_bytes = state_bytes(make_model(cfg, data, 0).state_dict())
    assert (dist_log.model_bytes[1:] == 2 * 2 * model_bytes).all()  # one broadcast copy and one gather per machine
    assert dist_log.model_bytes.tolist() == serial_log.model_bytes.tolist()
    assert dist_log.val_score.round(5).tolist() == serial_log.val_score.round(5).tolist()


def test_distributed_engine_rejects_methods_it_does_not_run():
    data = toy_data()
    parting = partition_graph(data, 2, "metis")
    with pytest.raises(ValueError, match="engine='distributed' runs method in"):
        run_distributed(data, parting, LLCGConfig(method="ggs"))
    with pytest.raises(ValueError, match="engine must be 'serial' or 'distributed'"):
        run(data, parting, LLCGConfig(), engine="mpi")


def test_the_worker_runs_under_torchrun(tmp_path):
    """The command the README documents for several hosts, here on one: the server plus 2 machines."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    torchrun = Path(sys.executable).with_name("torchrun")
    out = tmp_path / "log.json"
    done = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "3", "-m", "mlsysrepro.gnn.llcg_dist",
                           "--graph", "cora", "--parts", "2", "--rounds", "2", "--out", str(out)],
                          timeout=300, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [r["round"] for r in rows] == [0, 1, 2]
    assert rows[1]["model_bytes"] == rows[2]["model_bytes"] > 0
    assert rows[2]["val_score"] > rows[0]["val_score"]
