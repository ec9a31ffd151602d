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
