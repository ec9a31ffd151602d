import pytest
import torch

from mlsysrepro.gnn.datasets import contextual_sbm
from mlsysrepro.gnn.partition import partition_graph

from .conftest import toy_data


def global_edges(graph, ids=None):
    """The set of (u, v) edges, self loops excluded, mapped to global ids through ``ids``."""
    rows, cols = graph.rows, graph.indices
    keep = rows != cols
    rows, cols = rows[keep], cols[keep]
    if ids is not None:
        rows, cols = ids[rows], ids[cols]
    return set(zip(rows.tolist(), cols.tolist()))


@pytest.mark.parametrize("method", ["metis", "random"])
def test_parts_cover_every_node_once_and_drop_exactly_the_cut_edges(method):
    data = toy_data(80, 300, seed=1)
    parting = partition_graph(data, 4, method, seed=0)
    nodes = torch.cat(parting.nodes)
    assert torch.equal(nodes.sort().values, torch.arange(80))
    assert all(torch.equal(parting.parts[n], torch.full_like(n, p)) for p, n in enumerate(parting.nodes))
    kept = set().union(*(global_edges(local.graph, n) for local, n in zip(parting.local, parting.nodes)))
    every = global_edges(data.graph)
    same_part = {(u, v) for u, v in every if parting.parts[u] == parting.parts[v]}
    assert kept == same_part
    assert parting.edge_cut == pytest.approx(1 - len(same_part) / len(every))


def test_local_graphs_are_renormalised_and_keep_their_splits():
    data = toy_data(80, 300, seed=2)
    parting = partition_graph(data, 3, "random", seed=0)
    for local, n in zip(parting.local, parting.nodes):
        row_sums = torch.zeros(local.num_nodes).index_add_(0, local.graph.rows, local.graph.values)
        assert torch.allclose(row_sums, torch.ones(local.num_nodes))
        assert torch.equal(local.x, data.x[n]) and torch.equal(local.y, data.y[n])
        assert set(n[local.train_idx].tolist()) == set(data.train_idx.tolist()) & set(n.tolist())
    assert parting.train_sizes().sum() == data.train_idx.numel()


def test_metis_cuts_far_fewer_edges_than_random_parts_on_a_clustered_graph():
    data = contextual_sbm(2_000, torch.Generator().manual_seed(0), homophily=0.95)
    metis = partition_graph(data, 4, "metis").edge_cut
    random = partition_graph(data, 4, "random").edge_cut
    assert random == pytest.approx(0.75, abs=0.03)  # an edge stays inside with probability 1/P
    assert metis < random / 2


def test_partition_rejects_bad_input():
    data = toy_data()
    with pytest.raises(ValueError, match="method must be one of"):
        partition_graph(data, 2, "spectral")
    with pytest.raises(ValueError, match="num_parts"):
        partition_graph(data, 0)


def test_label_skew_is_zero_for_the_graphs_mix_and_grows_as_parts_hold_their_own_classes():
    from mlsysrepro.gnn.partition import label_skew

    data = contextual_sbm(4_000, torch.Generator().manual_seed(0), num_classes=4, homophily=0.95)
    metis = label_skew(data, partition_graph(data, 4, "metis"))
    random = label_skew(data, partition_graph(data, 4, "random"))
    assert random.max() < 0.06, "random parts see the graph's label mix"
    assert metis.mean() > 0.4, "METIS follows the near-pure communities, so each part holds mostly one class"
    # one part per class: a part's shares are (1, 0, 0, 0) against about a quarter each, a distance of about 3/4
    parts = data.y.clone()
    from mlsysrepro.gnn.partition import Partitioning, local_graph
    nodes = [(parts == p).nonzero().view(-1) for p in range(4)]
    pure = Partitioning(parts, nodes, [local_graph(data, n) for n in nodes], 0.0)
    shares = torch.bincount(data.y[data.train_idx], minlength=4).float() / data.train_idx.numel()
    assert torch.allclose(label_skew(data, pure), 1 - shares, atol=1e-6)
