import pytest
import torch

from mlsysrepro.gnn.llcg import (LLCGConfig, Machine, Server, bytes_per_round, flatten, make_model, run_serial,
                                 state_bytes, unflatten, weighted_average)
from mlsysrepro.gnn.partition import partition_graph
from mlsysrepro.gnn.samplers import FullNeighborhood
from mlsysrepro.gnn.training import weighted_loss

from .conftest import toy_data

SMALL = dict(rounds=3, local_steps=2, batch_size=8, server_batch=16, hidden=8, fanout=3, server_fanout=3)


def test_weighted_average_of_known_state_dicts():
    a = {"w": torch.tensor([[1.0, 2.0]]), "b": torch.tensor([0.0])}
    b = {"w": torch.tensor([[3.0, 6.0]]), "b": torch.tensor([4.0])}
    avg = weighted_average([a, b], [1, 3])  # (1 a + 3 b) / 4
    assert torch.equal(avg["w"], torch.tensor([[2.5, 5.0]]))
    assert torch.equal(avg["b"], torch.tensor([3.0]))
    with pytest.raises(ValueError, match="one non-negative weight per state"):
        weighted_average([a, b], [1.0])
    with pytest.raises(ValueError, match="positive sum"):
        weighted_average([a, b], [0.0, 0.0])


def test_flatten_round_trips():
    state = make_model(LLCGConfig(hidden=8), toy_data(), seed=0).state_dict()
    vector = flatten(state)
    assert vector.numel() * 4 == state_bytes(state)
    assert all(torch.equal(state[k], v) for k, v in unflatten(vector, state).items())


def test_local_steps_schedule_grows_in_the_paper_and_shrinks_in_the_authors_code():
    paper = LLCGConfig(local_steps=8, rho=1.5)
    authors = LLCGConfig(local_steps=8, rho=1.5, schedule="authors")
    assert [paper.steps_in_round(r) for r in range(4)] == [8, 12, 18, 27]
    assert [authors.steps_in_round(r) for r in range(4)] == [8, 6, 4, 3]
    assert LLCGConfig(local_steps=8).steps_in_round(10) == 8


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="method must be one of"):
        LLCGConfig(method="fedavg")
    with pytest.raises(ValueError, match="schedule must be one of"):
        LLCGConfig(schedule="linear")
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        LLCGConfig(rounds=0)


def test_server_correction_reads_full_graph_neighbours():
    """Seeds with cut edges: the server's batch reaches other parts, a machine's cannot, and the gradients differ."""
    data = toy_data(60, 240, seed=4)
    parting = partition_graph(data, 3, "random", seed=0)
    cfg = LLCGConfig(hidden=8, server_fanout=None, num_layers=2)
    server = Server(data, cfg, seed=0)
    nodes = parting.nodes[0]
    seeds = nodes[:5]
    server_batch = server.sampler.builder.build(seeds, torch.full((5,), 0.2))
    assert bool((parting.parts[server_batch.src_ids[0]] != 0).any())
    local = parting.local[0]
    local_batch = FullNeighborhood(local.graph, 2).build(torch.arange(5), torch.full((5,), 0.2))
    assert bool((parting.parts[nodes[local_batch.src_ids[0]]] == 0).all())

    def gradient(x, y, batch):
        model = make_model(cfg, data, seed=0)
        weighted_loss(model(x, batch), y[batch.output_ids], batch.loss_weight).backward()
        return flatten({k: p.grad for k, p in model.named_parameters()})

    g_global = gradient(data.x, data.y, server_batch)
    g_local = gradient(local.x, local.y, local_batch)
    assert not torch.allclose(g_global, g_local, atol=1e-4)


def test_rounds_exchange_one_model_each_way_per_machine():
    data = toy_data(60, 240, seed=5)
    parting = partition_graph(data, 3, "metis", seed=0)
    model_bytes = state_bytes(make_model(LLCGConfig(hidden=8), data, 0).state_dict())
    for method in ("psgd_pa", "llcg"):
        log, _ = run_serial(data, parting, LLCGConfig(method=method, **SMALL))
        assert (log.model_bytes[1:] == 2 * 3 * model_bytes).all() and (log.feature_bytes == 0).all()
    single, _ = run_serial(data, parting, LLCGConfig(method="single", **SMALL))
    assert (single.bytes == 0).all()


def test_ggs_counts_remote_features_and_random_parts_fetch_more():
    data = toy_data(120, 500, seed=6)
    cfg = LLCGConfig(method="ggs", **SMALL)
    fetched = {m: run_serial(data, partition_graph(data, 4, m, seed=0), cfg)[0].feature_bytes.sum()
               for m in ("metis", "random")}
    assert fetched["metis"] > 0
    assert fetched["random"] > fetched["metis"]
    assert fetched["random"] % (data.x.shape[1] * 4) == 0  # whole feature rows


def test_bytes_per_round_counts_the_first_round_without_training():
    data = toy_data(120, 500, seed=6)
    parting = partition_graph(data, 4, "random", seed=0)
    for method in ("ggs", "llcg"):
        cfg = LLCGConfig(method=method, **SMALL)
        first = run_serial(data, parting, cfg, seed=3)[0].iloc[1]
        assert bytes_per_round(data, parting, cfg, seed=3) == {"model_bytes": first.model_bytes,
                                                               "feature_bytes": first.feature_bytes}
    assert bytes_per_round(data, parting, LLCGConfig(method="ggs", **SMALL))["feature_bytes"] > 0


def test_llcg_without_correction_steps_is_psgd_pa_and_runs_repeat():
    data = toy_data(60, 240, seed=7)
    parting = partition_graph(data, 2, "metis", seed=0)
    psgd_log, psgd = run_serial(data, parting, LLCGConfig(method="psgd_pa", dropout=0.3, **SMALL), seed=1)
    llcg0_log, llcg0 = run_serial(data, parting, LLCGConfig(method="llcg", server_steps=0, dropout=0.3, **SMALL),
                                  seed=1)
    assert all(torch.equal(psgd[k], llcg0[k]) for k in psgd)
    again_log, _ = run_serial(data, parting, LLCGConfig(method="psgd_pa", dropout=0.3, **SMALL), seed=1)
    columns = ["val_score", "train_loss", "bytes"]
    assert psgd_log[columns].equals(again_log[columns])
    _, llcg = run_serial(data, parting, LLCGConfig(method="llcg", dropout=0.3, **SMALL), seed=1)
    assert not all(torch.equal(psgd[k], llcg[k]) for k in psgd)  # the correction changes the model


def test_a_machine_without_training_nodes_returns_the_model_unchanged():
    data = toy_data()
    cfg = LLCGConfig(hidden=8)
    machine = Machine(data, torch.empty(0, dtype=torch.long), cfg, 8, None, seed=0)
    state = make_model(cfg, data, seed=3).state_dict()
    new, fetched = machine.train_round(state, steps=5, seed=0)
    assert fetched == 0 and all(torch.equal(state[k], new[k]) for k in state)
