"""The Triton kernel equals torch's EmbeddingBag: on CUDA where there is one, else under Triton's interpreter."""

import os

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():  # Triton reads this when it is first imported
    os.environ.setdefault("TRITON_INTERPRET", "1")

from mlsysrepro.recsys import triton_bag  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(not triton_bag.available(), reason="triton is not installed (optional)")


@pytest.mark.parametrize("warps, stages", [(4, 1), (1, 3)])
def test_equals_embedding_bag_with_empty_and_uneven_bags(warps, stages):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(100, 24, generator=generator).to(DEVICE)
    indices = torch.randint(0, 100, (60,), generator=generator).to(DEVICE)
    offsets = torch.tensor([0, 5, 5, 20, 59], device=DEVICE)
    got = triton_bag.embedding_bag(weight, indices, offsets, warps, stages)
    assert torch.allclose(got, F.embedding_bag(indices, weight, offsets, mode="sum"), atol=1e-5)


def test_bad_launch_is_refused():
    with pytest.raises(ValueError, match="num_warps must be one of"):
        triton_bag.embedding_bag(torch.zeros(2, 2), torch.tensor([0]), torch.tensor([0]), num_warps=3)
