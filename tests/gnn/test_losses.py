import json

import numpy as np
import pytest
import torch

from mlsysrepro.gnn.datasets import GraphData, load_graphsaint
from mlsysrepro.gnn.losses import f1_micro, node_losses, output_gradient
from mlsysrepro.gnn.models import GNN
from mlsysrepro.gnn.registry import SamplerOptions, make_sampler
from mlsysrepro.gnn.training import train

from .conftest import random_graph


def targets(kind: str, n: int, classes: int, g: torch.Generator) -> torch.Tensor:
    if kind == "multi":
        return (torch.rand(n, classes, generator=g) < 0.3).float()
    return torch.randint(classes, (n,), generator=g)


@pytest.mark.parametrize("kind", ["single", "multi"])
def test_output_gradient_is_the_autograd_gradient(kind):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 4, generator=g, requires_grad=True)
    y = targets(kind, 7, 4, g)
    node_losses(logits, y).sum().backward()  # node i's loss depends on row i only
    assert torch.allclose(output_gradient(logits.detach(), y), logits.grad, atol=1e-6)


def test_multilabel_loss_averages_binary_cross_entropy_over_labels():
    logits = torch.tensor([[0.0, 2.0]])
    y = torch.tensor([[1.0, 0.0]])
    expected = (np.log(2) + np.log(1 + np.exp(2.0))) / 2
    assert float(node_losses(logits, y)) == pytest.approx(expected, rel=1e-6)


def test_f1_micro():
    assert f1_micro(torch.tensor([[2.0, 1.0], [0.0, 3.0]]), torch.tensor([0, 0])) == 0.5
    logits = torch.tensor([[1.0, -1.0, 1.0], [1.0, 1.0, -1.0]])  # predicted pairs: (0,0) (0,2) (1,0) (1,1)
    y = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # true pairs: (0,0) (1,0) (1,1) (1,2)
    assert f1_micro(logits, y) == pytest.approx(2 * 3 / (4 + 4))


def write_graphsaint(root, multilabel: bool):
    graph = random_graph(30, 60, seed=1)
    keep = graph.indices != graph.rows  # the release stores the plain adjacency, no self loops
    indptr = np.zeros(31, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(graph.rows[keep].numpy(), minlength=30))
    np.savez(root / "adj_full.npz", indptr=indptr, indices=graph.indices[keep].numpy(), data=np.ones(int(keep.sum())),
             shape=np.array([30, 30]), format=np.array("csr"))
    rng = np.random.default_rng(0)
    np.save(root / "feats.npy", rng.normal(3.0, 2.0, size=(30, 5)).astype(np.float32))
    labels = {str(i): ([int(v) for v in rng.random(4) < 0.5] if multilabel else int(rng.integers(3)))
              for i in range(30)}
    (root / "class_map.json").write_text(json.dumps(labels))
    roles = {"tr": list(range(20)), "va": list(range(20, 25)), "te": list(range(25, 30))}
    (root / "role.json").write_text(json.dumps(roles))
    return graph


@pytest.mark.parametrize("multilabel", [False, True])
def test_graphsaint_format_loads(tmp_path, multilabel):
    graph = write_graphsaint(tmp_path, multilabel)
    data = load_graphsaint(tmp_path, "toy")
    assert torch.equal(data.graph.indptr, graph.indptr) and torch.equal(data.graph.indices, graph.indices)
    assert data.y.shape == ((30, 4) if multilabel else (30,)) and data.num_classes == (4 if multilabel else 3)
    assert (data.train_idx.numel(), data.val_idx.numel(), data.test_idx.numel()) == (20, 5, 5)
    assert torch.allclose(data.x[data.train_idx].mean(0), torch.zeros(5), atol=1e-5)


@pytest.mark.parametrize("name", ["MVS-GNN", "GraphSAGE", "GraphSAINT"])
def test_samplers_train_on_a_multilabel_graph(tmp_path, name):
    write_graphsaint(tmp_path, multilabel=True)
    data: GraphData = load_graphsaint(tmp_path, "toy")
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = GNN(data.x.shape[1], 16, data.num_classes, 2, "gcn", 0.1)
    sampler = make_sampler(name, data, SamplerOptions(8, model.num_layers, cluster_size=8), generator)
    frame = train(model, data, sampler, 4, generator, 0.01, log_every=2, variance_draws=1,
                  probe_generator=torch.Generator().manual_seed(1)).frame()
    assert frame.train_loss.notna().all() and (frame.grad_variance > 0).all()
    assert frame.train_loss.iloc[-1] < frame.train_loss.iloc[0]
