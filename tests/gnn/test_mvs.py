import pytest
import torch

from mlsysrepro.gnn import samplers as S
from mlsysrepro.gnn.models import GNN, History
from mlsysrepro.gnn.losses import output_gradient
from mlsysrepro.gnn.mvs import MVSSampler, last_layer_grad_norms, mvs_probabilities, sampling_variance

from .conftest import toy_data


def check_minimal_variance(w: torch.Tensor, batch: float, p: torch.Tensor) -> None:
    """p sums to B and equals min(1, w / mu) for one mu (recovered from an uncapped entry)."""
    assert p.dtype == torch.float64 and abs(float(p.sum()) - batch) < 1e-6
    w = w.double()
    assert ((p >= 0) & (p <= 1)).all()
    uncapped = (p < 1) & (w > 0)
    mu = float((w[uncapped] / p[uncapped]).median())
    assert torch.allclose(p, torch.clamp(w / mu, max=1.0), atol=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_probabilities_on_random_weights(seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(500, generator=g) ** 4
    check_minimal_variance(w, 50, mvs_probabilities(w, 50))


def test_probabilities_with_ties_zeros_and_a_weight_above_mu():
    w = torch.tensor([100.0, 50.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 2.0, 2.0])
    p = mvs_probabilities(w, 4)
    check_minimal_variance(w, 4, p)
    assert p[0] == 1 and p[1] == 1  # both exceed mu: capped
    assert p[2] == p[3] == p[4] == p[5] and p[8] == p[9] == 2 * p[2]  # ties stay tied, proportional
    assert p[6] == 0 and p[7] == 0


def test_probabilities_edge_cases():
    assert torch.equal(mvs_probabilities(torch.tensor([3.0, 0.0, 1.0]), 2).float(), torch.tensor([1.0, 0.0, 1.0]))
    assert torch.allclose(mvs_probabilities(torch.ones(8), 2).float(), torch.full((8,), 0.25))
    with pytest.raises(ValueError, match="batch_size must be in"):
        mvs_probabilities(torch.ones(3), 4)
    with pytest.raises(ValueError, match="non-negative"):
        mvs_probabilities(torch.tensor([1.0, -1.0]), 1)


def bernoulli_estimates(grads: torch.Tensor, p: torch.Tensor, draws: int, g: torch.Generator) -> torch.Tensor:
    """``sum_{i chosen} G_i / (p_i n)`` for each draw: the importance-weighted mean gradient."""
    chosen = torch.rand(draws, p.numel(), generator=g) < p
    return (chosen.float() / (p.float() * p.numel())) @ grads


def test_mvs_is_unbiased_and_beats_uniform_on_skewed_gradient_norms():
    g = torch.Generator().manual_seed(0)
    n, batch = 400, 40
    scale = torch.rand(n, generator=g) ** 6 * 20  # a few nodes with large gradients
    grads = torch.randn(n, 8, generator=g) * scale[:, None]
    exact = grads.mean(0)
    uniform = bernoulli_estimates(grads, torch.full((n,), batch / n), 20_000, g)
    mvs = bernoulli_estimates(grads, mvs_probabilities(grads.norm(dim=1), batch), 20_000, g)
    for est in (uniform, mvs):
        stderr = est.std(0) / est.shape[0] ** 0.5
        assert ((est.mean(0) - exact).abs() <= 5 * stderr).all()
    var = lambda est: float(((est - exact) ** 2).sum(1).mean())  # noqa: E731
    assert var(mvs) < 0.5 * var(uniform)


def test_mvs_sampler_aggregation_is_unbiased():
    """With MVS's Bernoulli batches and 1/(p_i |C|) weights, the weighted sum of the batch's
    aggregations estimates the mean exact aggregation over the candidates."""
    data = toy_data(80, 300, seed=2)
    g = torch.Generator().manual_seed(0)
    sampler = MVSSampler(S.FullNeighborhood(data.graph, 1), data.train_idx, 6, gamma=1.0, inner_steps=10, generator=g)
    torch.manual_seed(0)
    model = GNN(data.x.shape[1], 8, data.num_classes, 1)
    sampler.refresh(model, data, History(1, data.num_nodes, 8), step=0)
    h = torch.randn(data.num_nodes, 3, generator=g)
    exact = (data.graph.adjacency().to_dense()[data.train_idx] @ h).mean(0)
    draws = []
    for _ in range(4_000):
        batch = sampler.sample(g)
        draws.append(batch.loss_weight @ (batch.blocks[0] @ h[batch.src_ids[0]]))
    draws = torch.stack(draws)
    stderr = draws.std(0) / draws.shape[0] ** 0.5
    assert ((draws.mean(0) - exact).abs() <= 5 * stderr).all()


@pytest.mark.parametrize("kind", ["gcn", "sage"])
def test_history_equal_to_exact_embeddings_gives_the_full_batch_forward(kind):
    data = toy_data(60, 200, seed=5)
    torch.manual_seed(1)
    model = GNN(data.x.shape[1], 16, data.num_classes, num_layers=3, kind=kind).eval()
    adjacency = data.graph.adjacency()
    history = History(3, data.num_nodes, 16)
    history.fill(model.exact_pass(data.x, adjacency)[0])
    seeds = data.train_idx[:7]
    batch = S.OneHopHistory(data.graph, 3).build(seeds, torch.ones(7))
    full = model.forward_full(data.x, adjacency)[seeds]
    assert torch.allclose(model(data.x, batch, history), full, atol=1e-5)
    history.tables[1].zero_()  # a stale history changes the result: the test can fail
    assert not torch.allclose(model(data.x, batch, history), full, atol=1e-3)


def test_gradient_norm_trick_matches_per_node_autograd():
    data = toy_data(40, 120, seed=6)
    torch.manual_seed(2)
    model = GNN(data.x.shape[1], 8, data.num_classes, num_layers=2, kind="sage")
    logits, last_input = model.forward_full(data.x, data.graph.adjacency(), return_last_input=True)
    norms = last_layer_grad_norms(logits.detach(), last_input.detach(), data.y)
    last = model.linears[-1]
    for i in (0, 5, 17):
        model.zero_grad()
        logits = model.forward_full(data.x, data.graph.adjacency())
        torch.nn.functional.cross_entropy(logits[i : i + 1], data.y[i : i + 1]).backward()
        expected = torch.sqrt((last.weight.grad**2).sum() + (last.bias.grad**2).sum())
        assert torch.isclose(norms[i], expected, rtol=1e-4)


def test_sampling_variance_alignment_is_1_for_equal_and_0_for_cancelling_gradients():
    logits = torch.tensor([[2.0, 0.0], [2.0, 0.0], [2.0, 0.0]])
    z = torch.tensor([[1.0, 3.0], [1.0, 3.0], [1.0, 3.0]])
    equal = sampling_variance(logits, z, torch.tensor([1, 1, 1]), batch_size=1)
    assert equal["alignment"] == pytest.approx(1.0) and equal["rho"] == pytest.approx(1.0)
    # two nodes with the same features and opposite labels: their gradients cancel exactly
    cancelling = sampling_variance(torch.zeros(2, 2), z[:2], torch.tensor([0, 1]), batch_size=1)
    assert cancelling["alignment"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="batch_size"):
        sampling_variance(logits, z, torch.tensor([1, 1, 1]), batch_size=3)


def _estimator_variances(logits, z, y, batch_size, draws, generator):
    """Monte Carlo variances of MVS's Bernoulli estimator and of a uniform batch's, of the mean last-layer gradient."""
    n = y.numel()
    per_node = torch.einsum("ic,id->icd", output_gradient(logits, y).double(),
                            torch.cat([z.double(), torch.ones(n, 1, dtype=torch.double)], 1)).reshape(n, -1)
    mean = per_node.mean(0)
    p = mvs_probabilities(per_node.norm(dim=1), batch_size)
    chosen = (torch.rand(draws, n, generator=generator, dtype=torch.double) < p).double()
    mvs = (chosen / p / n) @ per_node
    picks = torch.rand(draws, n, generator=generator).argsort(1)[:, :batch_size]
    uniform = per_node[picks].mean(1)
    return float(((mvs - mean) ** 2).sum(1).mean()), float(((uniform - mean) ** 2).sum(1).mean())


@pytest.mark.parametrize("spread", [0.3, 3.0])
def test_sampling_variance_ratio_matches_monte_carlo_of_both_estimators(spread):
    generator = torch.Generator().manual_seed(0)
    n, batch_size = 60, 12
    logits = torch.randn(n, 3, generator=generator) * spread
    z = torch.randn(n, 4, generator=generator) * torch.rand(n, 1, generator=generator) * spread
    y = torch.randint(0, 3, (n,), generator=generator)
    result = sampling_variance(logits, z, y, batch_size)
    v_mvs, v_uniform = _estimator_variances(logits, z, y, batch_size, 40_000, generator)
    assert result["last_layer_ratio"] == pytest.approx(v_mvs / v_uniform, rel=0.05)
    assert result["alignment"] <= result["rho"] + 1e-12


def test_rule_of_thumb_is_the_exact_ratio_when_no_probability_is_capped():
    generator = torch.Generator().manual_seed(1)
    n = 200
    logits = torch.randn(n, 2, generator=generator)
    z = torch.rand(n, 3, generator=generator) + 0.5  # norms within a small factor: no p_i reaches 1 at B = 10
    y = torch.randint(0, 2, (n,), generator=generator)
    result = sampling_variance(logits, z, y, batch_size=10)
    # exact up to the finite-population factor N / (N - 1) that the rule of thumb drops
    assert result["rule_of_thumb"] * (n - 1) / n == pytest.approx(result["last_layer_ratio"], rel=1e-9)


def test_rule_of_thumb_stays_the_variance_ratio_when_probabilities_are_capped():
    """A few nodes with huge gradients: rho < f, the uncapped formula goes negative, the capped one matches the
    Monte Carlo ratio of the two estimators (up to the finite-population factor the rule drops)."""
    generator = torch.Generator().manual_seed(2)
    n, batch_size = 60, 20
    logits = torch.randn(n, 3, generator=generator)
    z = torch.randn(n, 4, generator=generator) * 0.05
    z[:4] *= 400  # four dominant nodes
    y = torch.randint(0, 3, (n,), generator=generator)
    result = sampling_variance(logits, z, y, batch_size)
    assert result["capped"] >= 1 and result["rho"] < batch_size / n
    assert result["rule_of_thumb"] > 0
    v_mvs, v_uniform = _estimator_variances(logits, z, y, batch_size, 40_000, generator)
    assert result["rule_of_thumb"] * (n - 1) / n == pytest.approx(v_mvs / v_uniform, rel=0.08)
