"""The sparsity recorder against known tensors, the cycle model against hand-computed GEMMs, and the sparse data
gradient against the dense one times the mask."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mlsysrepro.sparsity.activations import ConvRecord, Recorder, density
from mlsysrepro.sparsity.output_sparse import by_channels, by_positions, dense_masked
from mlsysrepro.sparsity.pe_array import PEArray, layer_cycles, macs, tile_cycles


def test_density_counts_nonzeros():
    assert density(torch.tensor([0.0, 1.0, 0.0, -2.0])) == 0.5
    with pytest.raises(ValueError, match="empty"):
        density(torch.empty(0))


def test_recorder_sees_the_mask_and_the_masked_gradient():
    conv = nn.Conv2d(1, 2, 1, bias=False)
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([1.0, -1.0]).reshape(2, 1, 1, 1))
    model = nn.Sequential(conv, nn.ReLU(), nn.Conv2d(2, 1, 1))
    x = torch.tensor([[[[1.0, -1.0], [2.0, -3.0]]]])  # channel 0 keeps the positives, channel 1 the negatives
    with Recorder(model, sample=1) as recorder:
        model(x).sum().backward()
    relu, = recorder.relus
    assert relu.activation_density == 0.5
    assert relu.gradient_density <= 0.5
    first, second = recorder.convs
    assert first.reads_images and not second.reads_images
    assert second.needed.float().mean() == 0.5
    assert second.dy is not None and first.dy.shape == (1, 2, 2, 2)


def test_tile_cycles_take_each_tiles_busiest_pe():
    macs_ = torch.tensor([[1.0, 5.0, 2.0], [3.0, 1.0, 1.0]])
    array = PEArray(rows=2, cols=2)
    assert tile_cycles(macs_, array) == 5 + 1  # packed in order: [1, 5, 2, 3] (max 5) and [1, 1] (max 1)
    needed = torch.tensor([[True, False, True], [False, True, True]])
    assert tile_cycles(macs_, array, needed) == 2  # the needed [1, 2, 1, 1] packed into one tile of 4
    assert tile_cycles(macs_, array, torch.zeros(2, 3, dtype=torch.bool)) == 0.0


def test_dense_cycles_of_a_full_gemm_are_tiles_times_k():
    x = torch.ones(1, 4, 6, 6)
    record = ConvRecord("c", x, (8, 4, 3, 3), (1, 1), (0, 0), reads_images=False, dy=torch.ones(1, 8, 4, 4))
    cycles = layer_cycles(record, PEArray(rows=4, cols=4))
    assert cycles[("forward", "dense")] == (8 * 16 // 16) * 36  # 8 tiles of 16 outputs, each of 4 * 3 * 3 MACs
    counted = macs(record)
    assert counted[("forward", "dense")] == 8 * 16 * 36
    assert counted[("data_gradient", "input_output_sparse")] == counted[("data_gradient", "dense")]


def test_zero_inputs_remove_forward_macs_and_unneeded_outputs():
    x = torch.ones(1, 2, 4, 4)
    x[:, 1] = 0.0
    record = ConvRecord("c", x, (3, 2, 1, 1), (1, 1), (0, 0), reads_images=False, dy=torch.ones(1, 3, 4, 4))
    counted = macs(record)
    assert counted[("forward", "input_sparse")] == counted[("forward", "dense")] / 2
    assert counted[("data_gradient", "input_output_sparse")] == counted[("data_gradient", "dense")] / 2


@pytest.mark.parametrize("stride, padding", [(1, 1), (2, 1), (1, 0)])
def test_sparse_data_gradients_equal_the_dense_one_times_the_mask(stride, padding):
    torch.manual_seed(0)
    x = F.relu(torch.randn(3, 5, 10, 10))
    weight = torch.randn(4, 5, 3, 3)
    dy = torch.randn_like(F.conv2d(x, weight, stride=stride, padding=padding))
    needed = x != 0
    needed[:, 3] = False  # a dead channel
    reference = dense_masked(dy, weight, needed, stride, padding)
    assert torch.allclose(reference, torch.nn.grad.conv2d_input(x.shape, weight, dy, stride=stride,
                                                                padding=padding) * needed)
    assert torch.allclose(by_channels(dy, weight, needed, stride, padding), reference, atol=1e-5)
    if stride == 1 and padding == 1:
        assert torch.allclose(by_positions(dy, weight, needed, padding), reference, atol=1e-5)


def test_the_image_reading_layer_counts_its_input_dense_unless_asked():
    x = torch.zeros(1, 1, 4, 4)
    x[..., :2, :2] = 1.0  # a quarter of the image is ink
    record = ConvRecord("c", x, (2, 1, 1, 1), (1, 1), (0, 0), reads_images=True, dy=torch.ones(1, 2, 4, 4))
    paper, beyond = macs(record), macs(record, image_zeros=True)
    assert ("data_gradient", "dense") not in paper  # nothing below the images needs a gradient
    assert paper[("forward", "input_sparse")] == paper[("forward", "dense")]
    assert paper[("weight_gradient", "input_output_sparse")] == paper[("weight_gradient", "dense")]
    assert beyond[("forward", "input_sparse")] == paper[("forward", "dense")] / 4
    assert beyond[("weight_gradient", "input_sparse")] == paper[("weight_gradient", "dense")] / 4
