"""The template experiment's maths: equation (1) against Monte Carlo, and the slope estimator."""

import torch

from mlsysrepro.core.claims import verdict
from mlsysrepro.papers import template


def test_monte_carlo_variance_matches_equation_1():
    g = torch.Generator().manual_seed(0)
    x, y = template.make_regression(4_000, 6, g)
    w = template.fit_least_squares(x, y, steps=200)
    grads = template.per_example_gradients(x, y, w)
    assert grads.mean(0).norm() < 1e-4  # at the optimum the full gradient vanishes
    sizes = [1, 4, 16, 64]
    measured = template.minibatch_gradient_variance(grads, sizes, n_draws=4_000, generator=g)
    theory = template.theoretical_variance(grads, sizes)
    assert torch.allclose(measured, theory, rtol=0.08)


def test_per_example_gradients_average_to_the_autograd_gradient():
    g = torch.Generator().manual_seed(1)
    x, y = template.make_regression(50, 3, g)
    w = torch.randn(3, generator=g, requires_grad=True)
    (0.5 * ((x @ w - y) ** 2).mean()).backward()
    assert torch.allclose(template.per_example_gradients(x, y, w.detach()).mean(0), w.grad, atol=1e-6)


def test_loglog_slope_recovers_a_power_law():
    xs = [1, 2, 4, 8, 16]
    assert abs(template.loglog_slope(xs, [3.0 / x**1.5 for x in xs]) + 1.5) < 1e-9


def test_claim_c1_holds_for_a_1_over_b_law_and_fails_for_a_flat_one():
    from mlsysrepro.core.claims import verdict

    (claim,) = template.CLAIMS
    sizes = [1, 2, 4, 8]
    assert verdict(claim, template.inverse_batch_law(sizes, torch.tensor([2.0 / b for b in sizes])))[0] == "holds"
    assert verdict(claim, template.inverse_batch_law(sizes, torch.tensor([2.0 / b**0.5 for b in sizes])))[0] == "fails"


def test_the_negative_control_repeats_one_example_so_the_variance_cannot_fall_and_the_rule_fails():
    generator = torch.Generator().manual_seed(0)
    x, y = template.make_regression(2_000, 4, generator)
    grads = template.per_example_gradients(x, y, template.fit_least_squares(x, y, 200))
    sizes = [1, 4, 16, 64]
    repeated = template.minibatch_gradient_variance(grads, sizes, 400, generator, repeated=True)
    control = template.inverse_batch_law(sizes, repeated)
    assert abs(control.value) < 0.1  # a batch of copies is as noisy as one example
    claim = template.CLAIMS[0]
    independent = template.inverse_batch_law(sizes, template.minibatch_gradient_variance(grads, sizes, 400, generator))
    assert verdict(claim, independent.controlled(control))[0] == "holds"
    assert verdict(claim, control)[0] == "fails"
