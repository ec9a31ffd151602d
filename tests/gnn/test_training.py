"""The Fig. 2 measurement at given parameters: bias and variance of a sampler's full-model mini-batch gradient."""

import pytest
import torch

from mlsysrepro.gnn.models import GNN
from mlsysrepro.gnn.samplers import FullNeighborhood, UniformBatches
from mlsysrepro.gnn.training import gradient_error

from .conftest import toy_data


class Scaled:
    """A sampler whose loss weights are off by a factor: a biased estimator of the full gradient."""

    uses_history = False

    def __init__(self, sampler, factor: float):
        self.sampler, self.factor = sampler, factor

    def sample(self, generator):
        batch = self.sampler.sample(generator)
        batch.loss_weight = batch.loss_weight * self.factor
        return batch


@pytest.fixture(scope="module")
def setting():
    data = toy_data(60, 240, seed=4)
    torch.manual_seed(0)
    model = GNN(data.x.shape[1], 8, 3, 2, "gcn", 0.0)
    return data, model, UniformBatches(FullNeighborhood(data.graph, 2), data.train_idx, 8)


def test_uniform_seeds_with_every_neighbour_give_an_unbiased_full_model_gradient(setting):
    data, model, sampler = setting
    draws = 400
    measured = gradient_error(model, data, sampler, None, data.graph.adjacency(), torch.Generator().manual_seed(1),
                              draws)
    assert measured["error"] == pytest.approx(measured["bias2"] + measured["variance"])
    # for an unbiased estimator, E bias² of a mean over draws is variance / draws: allow four times that
    assert measured["bias2"] <= 4 * measured["variance"] / draws
    assert measured["variance"] > 0 and measured["full"] > 0


def test_a_biased_estimator_shows_its_bias(setting):
    data, model, sampler = setting
    measured = gradient_error(model, data, Scaled(sampler, 2.0), None, data.graph.adjacency(),
                              torch.Generator().manual_seed(1), 100)
    assert measured["bias2"] == pytest.approx(measured["full"], rel=0.5)  # E g_B = 2 g: the bias is g itself
    with pytest.raises(ValueError, match="draws must be >= 2"):
        gradient_error(model, data, sampler, None, data.graph.adjacency(), torch.Generator(), 1)


def sampler(name, data, model):
    from mlsysrepro.gnn.models import History
    from mlsysrepro.gnn.registry import SamplerOptions, make_sampler

    options = SamplerOptions(8, model.num_layers, 3, 2, 16, 1.0, 1)
    built = make_sampler(name, data, options, torch.Generator().manual_seed(5))
    history = None
    if built.uses_history:  # fresh, as at a checkpoint
        history = History(model.num_layers, data.num_nodes, model.hidden)
        history.fill(model.exact_pass(data.x, data.graph.adjacency())[0])
    built.refresh(model, data, history, 0)
    return built, history


@pytest.mark.parametrize("name", ["UNS", "MVS (all neighbours)", "VR-GCN"])
def test_samplers_that_read_every_neighbour_or_a_fresh_history_are_unbiased(setting, name):
    data, model, _ = setting
    built, history = sampler(name, data, model)
    draws = 1000
    measured = gradient_error(model, data, built, history, data.graph.adjacency(), torch.Generator().manual_seed(2),
                              draws)
    assert measured["bias2"] <= 4 * measured["variance"] / draws


def test_mvs_gnn_history_biases_its_gradient_even_when_fresh(setting):
    """Eq. 7 of the paper: out-of-batch neighbours enter the first layer as history, a constant, so no gradient
    reaches the first layer's weights through them; all-neighbour MVS on the same seeds has no such bias."""
    data, model, _ = setting
    draws = 1000  # an unbiased estimator's bias² is about variance / draws; this one's stays while draws grow
    built, history = sampler("MVS-GNN", data, model)
    biased = gradient_error(model, data, built, history, data.graph.adjacency(), torch.Generator().manual_seed(2),
                            draws)
    assert biased["bias2"] > 8 * biased["variance"] / draws


@pytest.mark.parametrize("name", ["Cluster-GCN", "MVS-GNN", "GraphSAGE"])
def test_measuring_the_variance_leaves_the_training_run_as_it_was(name):
    """The variance's batches come from a generator of their own and a copy of the sampler: Cluster-GCN's epoch
    queue and the training stream stay as they were, so the losses match a run that never measures."""
    from mlsysrepro.gnn.registry import SamplerOptions, make_sampler
    from mlsysrepro.gnn.training import train

    data = toy_data(120, 400, seed=3)
    losses = []
    for draws in (0, 3):
        generator = torch.Generator().manual_seed(0)
        torch.manual_seed(0)
        model = GNN(data.x.shape[1], 8, data.num_classes, 2, "gcn", 0.1)
        sampler = make_sampler(name, data, SamplerOptions(16, 2, cluster_size=20, inner_steps=3), generator)
        frame = train(model, data, sampler, 8, generator, 0.01, log_every=2, variance_draws=draws,
                      probe_generator=torch.Generator().manual_seed(1)).frame()
        losses.append(frame.train_loss.tolist())
    assert losses[0] == losses[1]
    with pytest.raises(ValueError, match="probe_generator"):
        train(model, data, sampler, 2, generator, variance_draws=1)
