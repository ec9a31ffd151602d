import pytest
import torch

from mlsysrepro.gnn.models import build_model
from mlsysrepro.gnn.samplers import FullNeighborhood

from .conftest import toy_data


@pytest.mark.parametrize("kind", ["gat", "appnp", "gcn", "sage"])
def test_a_full_neighbourhood_batch_computes_the_full_graph_rows(kind):
    """On the exact L-hop computation graph, a batch forward equals the whole-graph forward at its outputs."""
    data = toy_data(50, 150, seed=9)
    model = build_model(kind, 6, 8, 3, num_layers=2).eval()
    seeds = torch.tensor([3, 17, 29, 41])
    batch = FullNeighborhood(data.graph, 2).build(seeds, torch.full((4,), 0.25))
    full = model.forward_full(data.x, data.graph.adjacency())
    assert torch.allclose(model(data.x, batch), full[seeds], atol=1e-5)


def test_gat_attention_is_a_softmax_over_each_neighbourhood():
    """With zero attention vectors every neighbour gets weight 1/deg: GAT becomes mean aggregation of W h."""
    data = toy_data(30, 90, seed=10)
    model = build_model("gat", 6, 8, 3, num_layers=1)
    layer = model.layers[0]
    torch.nn.init.zeros_(layer.att_src), torch.nn.init.zeros_(layer.att_dst)
    out = model.forward_full(data.x, data.graph.adjacency())
    expected = data.graph.adjacency() @ layer.linear(data.x) + layer.bias  # row-normalised P = mean
    assert torch.allclose(out, expected, atol=1e-5)


def test_appnp_with_teleport_one_is_its_mlp():
    data = toy_data(30, 90, seed=11)
    model = build_model("appnp", 6, 8, 3, num_layers=3)
    model.alpha = 1.0
    mlp = model.mlp_out(torch.relu(model.mlp_in(data.x)))
    assert torch.allclose(model.forward_full(data.x, data.graph.adjacency()), mlp)


def test_build_model_names_the_allowed_models():
    with pytest.raises(ValueError, match=r"model must be one of \('gcn', 'sage', 'gat', 'appnp'\)"):
        build_model("gin", 6, 8, 3)


def test_gat_without_autograd_computes_what_it_computes_with_autograd():
    data = toy_data(40, 160, seed=12)
    model = build_model("gat", 6, 8, 3, num_layers=2).eval()
    adjacency = data.graph.adjacency()
    with torch.no_grad():
        fast = model.forward_full(data.x, adjacency)
    assert torch.allclose(fast, model.forward_full(data.x, adjacency), atol=1e-5)
