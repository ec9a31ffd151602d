import random

import numpy as np
import pytest
import torch

from mlsysrepro.core import seed_everything


def draws():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_same_seed_same_numbers_other_seed_other_numbers():
    g = seed_everything(3)
    first = draws() + (float(torch.rand(1, generator=g)),)
    g = seed_everything(3)
    assert draws() + (float(torch.rand(1, generator=g)),) == first
    seed_everything(4)
    assert draws() != first[:3]


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_bad_seed_is_rejected(bad):
    with pytest.raises(ValueError, match="seed must be a non-negative int"):
        seed_everything(bad)
