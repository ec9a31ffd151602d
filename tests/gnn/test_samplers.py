import pytest
import torch

from mlsysrepro.gnn import samplers as S
from mlsysrepro.gnn import subgraph as G
from mlsysrepro.gnn.mvs import MVSSampler
from mlsysrepro.gnn.models import GNN, History

from .conftest import random_graph, toy_data


def block_dense(batch, layer, num_nodes):
    """A batch block as a dense (num_dst x N) matrix over global node ids."""
    block = batch.blocks[layer].to_sparse_coo().coalesce()
    rows, cols = block.indices()
    out = torch.zeros(batch.num_dst[layer], num_nodes)
    return out.index_put_((rows, batch.src_ids[layer][cols]), block.values(), accumulate=True)


@pytest.mark.parametrize(
    "make",
    [
        lambda g: S.NodeWise(g, 1, fanout=3),
        lambda g: S.NodeWise(g, 1, fanout=3, replace=True),
        lambda g: S.LayerWise(g, 1, layer_size=8, kind="ladies"),
        lambda g: S.LayerWise(g, 1, layer_size=8, kind="fastgcn"),
    ],
    ids=["node-wise", "node-wise-with-replacement", "ladies", "fastgcn"],
)
def test_sampled_aggregation_is_unbiased(make):
    """The Monte-Carlo mean of block @ h matches the exact P[dst] @ h within 5 standard errors."""
    graph = random_graph(60, 200, seed=3, skew=True)
    builder = make(graph)
    h = torch.randn(60, 4, generator=torch.Generator().manual_seed(0))
    seeds = torch.tensor([0, 7, 13, 42, 59])
    exact = graph.adjacency().to_dense()[seeds] @ h
    g = torch.Generator().manual_seed(1)
    draws = torch.stack([block_dense(builder.build(seeds, torch.ones(5), g), 0, 60) @ h for _ in range(4_000)])
    stderr = draws.std(0) / draws.shape[0] ** 0.5
    assert ((draws.mean(0) - exact).abs() <= 5 * stderr + 1e-6).all()
    assert (draws.std(0) > 0).any()  # it really sampled


def test_distinct_offsets_are_a_uniform_subset_as_exact_enumeration_says():
    """Every 2-subset of 5 neighbours has probability 1/10 (all C(5, 2) enumerated); no offset repeats."""
    from itertools import combinations

    draws = 50_000
    chosen = S.distinct_offsets(torch.full((draws,), 5), 2, torch.Generator().manual_seed(0))
    assert (chosen[:, 0] != chosen[:, 1]).all() and chosen.min() >= 0 and chosen.max() < 5
    pairs = chosen.sort(1).values
    counts = torch.stack([((pairs[:, 0] == a) & (pairs[:, 1] == b)).sum() for a, b in combinations(range(5), 2)])
    expected, stderr = draws / 10, (draws * 0.1 * 0.9) ** 0.5
    assert ((counts - expected).abs() <= 5 * stderr).all()
    assert sorted(S.distinct_offsets(torch.tensor([4]), 4, None)[0].tolist()) == [0, 1, 2, 3]


def test_without_replacement_a_node_takes_each_neighbour_at_most_once():
    graph = random_graph(60, 200, seed=3, skew=True)
    seeds = torch.arange(60)
    rows, cols, vals = S.NodeWise(graph, 1, fanout=3).entries(seeds, 0, torch.Generator().manual_seed(0))
    pairs = torch.stack((rows, cols))
    assert pairs.unique(dim=1).shape[1] == pairs.shape[1]  # no (node, neighbour) pair twice
    assert torch.equal(torch.bincount(rows, minlength=60), graph.degree.clamp(max=3))
    with pytest.raises(ValueError, match="fanout"):
        S.NodeWise(graph, 1, fanout=0)


def test_without_replacement_matches_pygs_sampler():
    """Where pyg-lib is installed: each neighbour's inclusion frequency equals PyG's (k / d for all of them)."""
    sampler = pytest.importorskip("pyg_lib.sampler")
    graph = random_graph(60, 200, seed=3, skew=True)
    node = int(graph.degree.argmax())
    degree, k, draws = int(graph.degree[node]), 3, 20_000
    start = int(graph.indptr[node])
    ours = S.distinct_offsets(torch.full((draws,), degree), k, torch.Generator().manual_seed(0)).flatten()
    ours = torch.bincount(ours, minlength=degree) / draws
    torch.manual_seed(0)
    theirs = torch.zeros(degree)
    for _ in range(draws):
        edge_id = sampler.neighbor_sample(graph.indptr, graph.indices, torch.tensor([node]), [k], replace=False,
                                          directed=True, disjoint=False, return_edge_id=True)[3]
        theirs += torch.bincount(edge_id - start, minlength=degree)
    theirs /= draws
    stderr = (k / degree * (1 - k / degree) / draws) ** 0.5
    assert ((ours - theirs).abs() <= 6 * stderr).all()
    assert ((ours - k / degree).abs() <= 5 * stderr).all()


def test_full_neighbourhood_is_exact(toy):
    batch = S.FullNeighborhood(toy.graph, 2).build(toy.train_idx[:5], torch.ones(5))
    p = toy.graph.adjacency().to_dense()
    for l in range(2):
        assert torch.allclose(block_dense(batch, l, toy.num_nodes), p[batch.src_ids[l][: batch.num_dst[l]]])


def samplers_for(data, g):
    L, B = 2, 8
    full = S.FullNeighborhood(data.graph, L)
    mvs = MVSSampler(S.OneHopHistory(data.graph, L), data.train_idx, B, gamma=1.0, inner_steps=5, generator=g)
    torch.manual_seed(0)
    model = GNN(data.x.shape[1], 8, data.num_classes, L)
    history = History(L, data.num_nodes, 8)
    mvs.refresh(model, data, history, step=0)
    return {
        "uns": S.UniformBatches(full, data.train_idx, B),
        "graphsage": S.UniformBatches(S.NodeWise(data.graph, L, 3), data.train_idx, B),
        "vrgcn": S.UniformBatches(S.VRGCN(data.graph, L, 2), data.train_idx, B),
        "ladies": S.UniformBatches(S.LayerWise(data.graph, L, B, "ladies"), data.train_idx, B),
        "fastgcn": S.UniformBatches(S.LayerWise(data.graph, L, B, "fastgcn"), data.train_idx, B),
        "clustergcn": G.ClusterGCN(data.graph, data.train_idx, L, num_clusters=5, clusters_per_batch=2),
        "graphsaint": G.SaintNode(data.graph, data.train_idx, L, budget=15, generator=g),
        "mvs": mvs,
    }


SAMPLERS = ["uns", "graphsage", "vrgcn", "ladies", "fastgcn", "clustergcn", "graphsaint", "mvs"]


@pytest.mark.parametrize("name", SAMPLERS)
def test_batch_shapes_and_indices_are_valid(name):
    data = toy_data()
    batch = samplers_for(data, torch.Generator().manual_seed(0))[name].sample(torch.Generator().manual_seed(5))
    n = data.num_nodes
    assert batch.num_layers == 2
    for l in range(2):
        src, block = batch.src_ids[l], batch.blocks[l]
        assert src.min() >= 0 and src.max() < n and src.unique().numel() == src.numel()
        assert block.shape == (batch.num_dst[l], src.numel())
        assert block.layout == torch.sparse_csr and block.col_indices().min() >= 0
        if l + 1 < 2:  # layer l's outputs open the next layer's inputs
            assert torch.equal(batch.src_ids[l + 1][: batch.num_dst[l]], src[: batch.num_dst[l]])
    assert batch.loss_weight.shape == batch.output_ids.shape and (batch.loss_weight >= 0).all()
    model = GNN(data.x.shape[1], 8, data.num_classes, 2)
    history = History(2, n, 8)
    logits = model(data.x, batch, history)
    assert logits.shape == (batch.output_ids.numel(), data.num_classes) and torch.isfinite(logits).all()


@pytest.mark.parametrize("name", SAMPLERS)
def test_sampling_is_deterministic_under_a_seed(name):
    def draw():
        data = toy_data()
        sampler = samplers_for(data, torch.Generator().manual_seed(0))[name]
        g = torch.Generator().manual_seed(9)
        return [sampler.sample(g) for _ in range(3)]

    for a, b in zip(draw(), draw()):
        assert all(torch.equal(x, y) for x, y in zip(a.src_ids, b.src_ids))
        assert all(torch.equal(x.to_dense(), y.to_dense()) for x, y in zip(a.blocks, b.blocks))
        assert torch.equal(a.loss_weight, b.loss_weight)


def test_cluster_gcn_covers_every_training_node_once_per_epoch():
    data = toy_data(200, 600, seed=4)
    sampler = G.ClusterGCN(data.graph, data.train_idx, 2, num_clusters=10, clusters_per_batch=3)
    batches = sampler.epoch(torch.Generator().manual_seed(0))
    nodes = torch.cat(batches)
    assert torch.equal(torch.sort(nodes).values, torch.arange(200))  # every node exactly once
    assert len(batches) == 4  # ceil(10 clusters / 3)
    seen = []
    for _ in range(len(batches)):  # sample() walks the same epoch
        batch = sampler.sample(torch.Generator().manual_seed(0))
        seen.append(batch.output_ids[batch.loss_weight > 0])
        assert torch.isclose(batch.loss_weight.sum(), torch.tensor(1.0))
    assert torch.equal(torch.sort(torch.cat(seen)).values, torch.sort(data.train_idx).values)


def test_graphsaint_normalisation_matches_its_authors_estimator():
    # path 0-1-2-3 and an edge 0-3, self loops, node 4 alone; three pre-drawn node sets, none with node 4
    graph = G.CSRGraph.from_edge_index(torch.tensor([[0, 1, 2, 0], [1, 2, 3, 3]]), 5)
    samples = [torch.tensor([0, 1]), torch.tensor([1, 2, 3]), torch.tensor([0, 1, 2])]
    loss_norm, aggregation = G.saint_norms(graph, samples, num_train=2)
    # C_v = [2, 3, 2, 1, 0 -> 0.1]; loss norm = draws / C_v / num_train
    assert torch.allclose(loss_norm, 3.0 / (2.0 * torch.tensor([2.0, 3, 2, 1, 0.1])))
    expected = {  # C_u / C_uv per stored entry (u = row); never together: the 1e4 cap; 0 / 0: 0.1
        (0, 0): 2 / 2, (0, 1): 2 / 2, (0, 3): 1e4, (1, 0): 3 / 2, (1, 1): 3 / 3, (1, 2): 3 / 2,
        (2, 1): 2 / 2, (2, 2): 2 / 2, (2, 3): 2 / 1, (3, 0): 1e4, (3, 2): 1 / 1, (3, 3): 1 / 1, (4, 4): 0.1,
    }
    assert graph.num_edges == len(expected)
    for (u, v), value in expected.items():
        pos = graph.indptr[u] + (graph.indices[graph.indptr[u]: graph.indptr[u + 1]] == v).nonzero()[0, 0]
        assert aggregation[pos] == pytest.approx(value), (u, v)


def test_graphsaint_counts_converge_to_the_exact_probabilities():
    graph = random_graph(40, 160, seed=3)
    exact = G.SaintNode(graph, torch.arange(20), 2, budget=12, generator=torch.Generator())
    counted = G.SaintNode(graph, torch.arange(20), 2, budget=12, generator=torch.Generator().manual_seed(0),
                          coverage=3000, normalisation="counted")
    assert torch.allclose(counted.loss_norm, exact.loss_norm, rtol=0.05)
    assert torch.allclose(counted.aggregation, exact.aggregation, rtol=0.1)
    with pytest.raises(ValueError, match="normalisation must be one of"):
        G.SaintNode(graph, torch.arange(20), 2, budget=12, generator=torch.Generator(), normalisation="guess")


def test_graphsaint_aggregation_is_unbiased_on_a_small_graph():
    """Zeng et al.'s Proposition: given v in the subgraph, the normalised aggregation sum_u P_vu x_u / alpha_uv is an
    unbiased estimate of the full graph's (P x)_v; without the normalisation the subgraph aggregates a small share
    of the full sum."""
    graph = random_graph(40, 160, seed=3)
    sampler = G.SaintNode(graph, torch.arange(40), 2, budget=12, generator=torch.Generator().manual_seed(0))
    x = torch.rand(40, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) + 0.5
    full = torch.zeros(40, dtype=torch.float64).index_add_(0, graph.rows, graph.values.double() * x[graph.indices])
    normalised, plain, present = (torch.zeros(40, dtype=torch.float64) for _ in range(3))
    generator = torch.Generator().manual_seed(2)
    for _ in range(4000):
        nodes = sampler.draw_nodes(generator)
        rows, cols, pos = G.induced_entries(graph, nodes)
        terms = graph.values[pos].double() * x[nodes[cols]]
        normalised.index_add_(0, nodes[rows], terms * sampler.aggregation[pos].double())
        plain.index_add_(0, nodes[rows], terms)
        present[nodes] += 1
    error = (normalised / present / full - 1).abs()
    assert error.max() < 0.08, error.max()
    assert (plain / present / full).mean() < 0.6


def test_ladies_as_its_code_keeps_every_row_and_its_full_sum():
    """With ``renormalise`` (the registry's LADIES), the layer's own nodes join the drawn ones and every sampled
    row sums to its full row's sum; without it, most rows of a large layer would aggregate nothing."""
    graph = random_graph(300, 3000, seed=5)
    seeds = torch.arange(0, 300, 3)
    batch = S.LayerWise(graph, 1, layer_size=8, kind="ladies", renormalise=True).build(
        seeds, torch.ones(seeds.numel()), torch.Generator().manual_seed(2))
    sampled = block_dense(batch, 0, 300).sum(1)
    assert torch.allclose(sampled, graph.adjacency().to_dense()[seeds].sum(1))
    plain = S.LayerWise(graph, 1, layer_size=8, kind="ladies").build(seeds, torch.ones(seeds.numel()),
                                                                     torch.Generator().manual_seed(2))
    assert (block_dense(plain, 0, 300).sum(1) == 0).float().mean() > 0.5


def test_graphsaint_pre_draws_until_its_coverage(monkeypatch):
    graph = random_graph(200, 800, seed=6)
    drawn = []
    original = G.saint_norms
    def spy(graph_, samples, num_train):
        samples = list(samples)
        drawn.append(sum(s.numel() for s in samples))
        return original(graph_, samples, num_train)

    monkeypatch.setattr(G, "saint_norms", spy)
    G.SaintNode(graph, torch.arange(100), 2, budget=20, generator=torch.Generator().manual_seed(0), coverage=30,
                normalisation="counted")
    assert drawn[0] >= 30 * 200
