from pathlib import Path

import pytest
import torch

from mlsysrepro.gnn.datasets import contextual_sbm
from mlsysrepro.gnn.graph import CSRGraph

from .conftest import random_graph


def dense(graph: CSRGraph) -> torch.Tensor:
    return graph.adjacency().to_dense()


def test_row_normalisation_is_d_inverse_a_plus_i():
    edges = torch.tensor([[0, 0, 1, 2, 2], [1, 2, 2, 2, 0]])  # duplicate (0,2)/(2,0) and a self loop (2,2)
    graph = CSRGraph.from_edge_index(edges, 4)
    a = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 1.0]])
    assert torch.allclose(dense(graph), a / a.sum(1, keepdim=True))
    sym = CSRGraph.from_edge_index(edges, 4, norm="sym")
    d = a.sum(1).rsqrt()
    assert torch.allclose(dense(sym), d[:, None] * a * d[None, :])


def test_row_slice_and_column_norms_match_the_dense_matrix():
    graph = random_graph(40, 120, seed=1)
    p = dense(graph)
    nodes = torch.tensor([5, 0, 39, 5])
    rows, cols, vals = graph.row_slice(nodes)
    rebuilt = torch.zeros(4, 40).index_put_((rows, cols), vals, accumulate=True)
    assert torch.allclose(rebuilt, p[nodes])
    assert torch.allclose(graph.column_norms_sq(), (p**2).sum(0))


def test_contextual_sbm_is_seeded_and_homophilous():
    a = contextual_sbm(2_000, torch.Generator().manual_seed(0), homophily=0.9)
    b = contextual_sbm(2_000, torch.Generator().manual_seed(0), homophily=0.9)
    assert torch.equal(a.graph.indices, b.graph.indices) and torch.equal(a.x, b.x)
    rows, cols = a.graph.rows, a.graph.indices
    off_diagonal = rows != cols
    same = (a.y[rows] == a.y[cols])[off_diagonal].float().mean()
    assert same > 0.85  # 0.9 + 0.1/4 expected for 4 classes
    assert a.train_idx.numel() + a.val_idx.numel() + a.test_idx.numel() == 2_000


def test_a_tampered_processed_file_is_rebuilt_from_the_verified_raw_files():
    """PyG's processed/ files are derived data: one changed feature value must not reach a run."""
    from pathlib import Path

    from torch_geometric.datasets import Planetoid

    from mlsysrepro.core import fetch
    from mlsysrepro.gnn.datasets import PROCESSED_RECORD, load_graph

    original = load_graph("cora").x.clone()
    processed = Path(fetch("cora")) / "Cora" / "processed"
    assert (processed / PROCESSED_RECORD).exists()
    stored = torch.load(processed / "data.pt", weights_only=False)
    stored[0]["x"][0, 0] += 1.0
    torch.save(stored, processed / "data.pt")
    assert Planetoid(str(fetch("cora")), "Cora", split="full")[0].x[0, 0] == original[0, 0] + 1.0  # PyG trusts it
    assert torch.equal(load_graph("cora").x, original)


def test_a_truncated_processed_file_is_rebuilt_before_pyg_loads_it(tmp_path):
    """A run killed while PyG wrote processed/data.pt leaves a truncated file that torch.load cannot read: it is
    deleted and built again, never loaded (and never met with the advice to load it with weights_only=False)."""
    from mlsysrepro.gnn.datasets import PROCESSED_RECORD, verified_pyg

    class Dataset:  # what a PyG dataset does: load processed/data.pt if it is there, else build it from raw
        builds = 0

        def __init__(self, root):
            self.processed_dir = f"{root}/Toy/processed"
            path = Path(self.processed_dir) / "data.pt"
            if path.exists():
                self.data = torch.load(path)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                self.data = torch.arange(1000)
                torch.save(self.data, path)
                Dataset.builds += 1

    assert torch.equal(verified_pyg(Dataset, tmp_path).data, torch.arange(1000)) and Dataset.builds == 1
    assert (tmp_path / "Toy" / "processed" / PROCESSED_RECORD).exists()
    verified_pyg(Dataset, tmp_path)
    assert Dataset.builds == 1  # a recorded folder is read as it is
    data = tmp_path / "Toy" / "processed" / "data.pt"
    data.write_bytes(data.read_bytes()[:100])  # truncated
    with pytest.raises(Exception):
        torch.load(data)
    assert torch.equal(verified_pyg(Dataset, tmp_path).data, torch.arange(1000)) and Dataset.builds == 2
