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


def test_a_packed_share_holds_its_part_of_the_vm_and_its_price():
    from mlsysrepro.serving.fleet import packed, service_time

    series = np.full(10, 0.5)
    vm = VMType("one", 1, 2.0, 1.0, series)
    types = packed((vm,), 4)
    assert [t.share for t in types] == [1.0, 1 / 2, 1 / 3, 1 / 4]
    quarter = types[-1]
    assert capacity(quarter, 10.0) == pytest.approx(capacity(vm, 10.0) / 4)
    assert quarter.price(False, 0) == pytest.approx(0.25) and quarter.price(True, 3) == pytest.approx(0.125)
    assert service_time(quarter, 8.0) == pytest.approx(8.0 / 2.0 * 4), "a quarter of the VM's time: 4x slower"
    # a small residual demand rents the smallest share that covers it; a large one, whole VMs
    assert cheapest(types, 10.0, uncovered=4.0, spot=False, second=0) == 3
    assert cheapest(types, 10.0, uncovered=40.0, spot=False, second=0) == 0
    allowed = np.array([True, True, False, False])
    assert cheapest(types, 10.0, uncovered=4.0, spot=False, second=0, allowed=allowed) == 1
    assert packed((vm,), 1) == (vm,)
    with pytest.raises(ValueError, match="models_per_vm"):
        packed((vm,), 0)
