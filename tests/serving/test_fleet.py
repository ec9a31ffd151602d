"""VM types from the registry's prices, MArk's cheapest type per request."""

import numpy as np
import pytest

from mlsysrepro.serving.fleet import SLOT_SPEED, VMType, capacity, cheapest, vm_types


def test_vm_types_carry_real_prices_and_gpu_speeds():
    types = {vm.name: vm for vm in vm_types(3600)}
    assert types["p3.2xlarge"].on_demand == 3.06 and types["p2.16xlarge"].slots == 16
    assert types["p3.2xlarge"].speed == pytest.approx(15.7 / 4.37) and SLOT_SPEED["K80"] == 1.0
    for vm in types.values():
        assert len(vm.spot) == 3600 and 0 < vm.spot.min() < vm.on_demand, "spot undercuts on-demand"
    with pytest.raises(ValueError, match="vm types must be"):
        vm_types(10, ("m5.large",))


def test_mark_picks_the_cheapest_type_per_request_served():
    series = np.ones(10)
    small = VMType("small", 1, 1.0, 1.0, series)
    large = VMType("large", 8, 1.0, 6.0, series * 6)  # cheaper per slot, but only if its slots are used
    assert capacity(large, 10.0) == 80.0
    assert cheapest((small, large), 10.0, uncovered=5.0, spot=False, second=0) == 0
    assert cheapest((small, large), 10.0, uncovered=200.0, spot=False, second=0) == 1
    with pytest.raises(ValueError, match="uncovered"):
        cheapest((small,), 10.0, 0.0, False, 0)
