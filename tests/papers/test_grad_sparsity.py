"""The gradient-sparsity paper module: speed-ups from hand-made cycle tables, the claims' measurements, bad names."""

import pandas as pd
import pytest

from mlsysrepro.core.claims import verdict
from mlsysrepro.papers import grad_sparsity

CLAIMS = {claim.id: claim for claim in grad_sparsity.CLAIMS}


def layers(cycles: dict[tuple[str, str], float], networks=("a", "b", "c"), seeds=(0, 1)) -> pd.DataFrame:
    return pd.DataFrame([dict(network=n, seed=s, epoch=1, layer=0, pass_=p, mode=m, cycles=c * (1 + 0.01 * s),
                              macs=c)
                         for n in networks for s in seeds for (p, m), c in cycles.items()])


CYCLES = {("forward", "dense"): 100, ("forward", "input_sparse"): 60, ("forward", "input_output_sparse"): 60,
          ("data_gradient", "dense"): 100, ("data_gradient", "input_sparse"): 50,
          ("data_gradient", "input_output_sparse"): 20, ("weight_gradient", "dense"): 100,
          ("weight_gradient", "input_sparse"): 40, ("weight_gradient", "input_output_sparse"): 40}


def test_speedups_sum_the_passes():
    speed = grad_sparsity.speedups(layers(CYCLES, networks=("a",), seeds=(0,))).iloc[0]
    assert speed.backprop_input_output == pytest.approx(200 / 60)
    assert speed.backprop_input_only == pytest.approx(200 / 90)
    assert speed.iteration_input_output == pytest.approx(300 / 120)
    assert speed.output_over_input == pytest.approx(90 / 60)


def test_s1_holds_inside_the_papers_range_and_fails_outside():
    speed = grad_sparsity.speedups(layers(CYCLES))
    assert verdict(CLAIMS["S1"], grad_sparsity.per_network(speed, "backprop_input_output", ""))[0] == "holds"
    flat = dict(CYCLES)
    flat.update({("data_gradient", "input_output_sparse"): 95, ("weight_gradient", "input_output_sparse"): 95})
    speed = grad_sparsity.speedups(layers(flat))
    assert verdict(CLAIMS["S1"], grad_sparsity.per_network(speed, "backprop_input_output", ""))[0] == "fails"


def test_correlation_per_network_and_seed():
    relus = pd.DataFrame([dict(network="a", seed=0, epoch=e, relu=i, activation=0.2 * i + 0.1, gradient=0.1 * i + 0.05)
                          for e in range(2) for i in range(4)])
    corr = grad_sparsity.correlation(relus)
    assert corr.r.iloc[0] == pytest.approx(1.0)


def test_k2_fails_when_cycles_undercut_the_macs():
    from mlsysrepro.core.settings import resolve

    settings = resolve("grad_sparsity", grad_sparsity.PRESETS, {"scale": "smoke"}, grad_sparsity.RANGES)
    frame = layers(CYCLES)
    assert grad_sparsity.cycles_bound_holds(frame, settings).value is True
    frame["macs"] = frame.cycles * 2000
    assert grad_sparsity.cycles_bound_holds(frame, settings).value is False


def test_an_unknown_network_is_named():
    with pytest.raises(ValueError, match="networks must name"):
        grad_sparsity.network("alexnet", 8)


def test_range_placement_sorts_networks_by_the_range():
    frame = pd.DataFrame([dict(network=n, seed=0, epoch=1, x=v) for n, v in (("a", 1.0), ("b", 3.0), ("c", 9.0))])
    assert grad_sparsity.range_placement(frame, "x", 2, 5) == "inside it for b (3.00x); above it for c (9.00x); " \
                                                              "below it for a (1.00x)"
