import pytest
import torch

from mlsysrepro.gnn.datasets import GraphData
from mlsysrepro.gnn.graph import CSRGraph


def random_graph(num_nodes: int, num_edges: int, seed: int, skew: bool = False) -> CSRGraph:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(num_nodes, (num_edges,), generator=g)
    if skew:  # a few hubs, so degrees (and column norms) vary a lot
        dst = (torch.rand(num_edges, generator=g) ** 3 * num_nodes).long()
    else:
        dst = torch.randint(num_nodes, (num_edges,), generator=g)
    return CSRGraph.from_edge_index(torch.stack([src, dst]), num_nodes)


def toy_data(num_nodes: int = 50, num_edges: int = 150, seed: int = 0, features: int = 6,
             classes: int = 3) -> GraphData:
    g = torch.Generator().manual_seed(seed)
    graph = random_graph(num_nodes, num_edges, seed)
    x = torch.randn(num_nodes, features, generator=g)
    y = torch.randint(classes, (num_nodes,), generator=g)
    perm = torch.randperm(num_nodes, generator=g)
    a, b = num_nodes // 2, 3 * num_nodes // 4
    return GraphData("toy", x, y, graph, perm[:a], perm[a:b], perm[b:], classes, "f1_micro")


@pytest.fixture
def toy():
    return toy_data()
