"""A PE-array cycle model of a convolution's three passes, dense, skipping zero operands, and also skipping the
outputs nobody needs (Sarma et al., arXiv 2109.07710), fed with a training step's measured zero patterns.

**The work of every output.** Each output of a pass is a sum of MACs. Which of them have both operands nonzero
follows from the operands' zero patterns, and running the pass's own convolution on 0/1 indicators counts them
exactly, per output:

- forward ``Y = conv(X, W)``: ``conv2d([X != 0], 1)`` (weights dense);
- data gradient ``dX = conv2d_input(dY, W)``: ``conv2d_input([dY != 0], 1)``;
- weight gradient ``dW = conv2d_weight(X, dY)``: ``conv2d_weight([X != 0], [dY != 0])`` (both sides sparse).

The dense count is the same convolution on all-ones operands (edges of the image have fewer MACs).

**The array.** ``rows x cols`` processing elements, output-stationary, one MAC per cycle each. A pass's outputs,
in order (output channel, then position), are packed into tiles of ``rows x cols``; a tile runs in lockstep, so it
takes as many cycles as its busiest PE: the maximum of its outputs' MACs (load imbalance). A pass's cycles are the
sum over its tiles.
- *Dense*: every output's dense MACs.
- *Input-sparse*: the nonzero-pair MACs.
- *Input + output-sparse*: the outputs that are not needed (the data gradient where the forward input is zero) are
  removed and the needed ones packed into tiles in order.

**The images are dense.** The paper's sparsity is ReLU's: the layer that reads the images sees them as dense
operands in every mode (``image_zeros=False``, the default). MNIST's black background would otherwise make that
layer's forward and weight gradient skip 81 % of their MACs, input-image sparsity the paper does not claim;
``image_zeros=True`` counts it, reported apart as beyond the paper.

Memory stalls and the cost of finding nonzeros are not modelled: this is the compute bound the paper's
micro-architecture approaches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.grad import conv2d_input, conv2d_weight

from .activations import ConvRecord

PASSES = ("forward", "data_gradient", "weight_gradient")
MODES = ("dense", "input_sparse", "input_output_sparse")


@dataclass(frozen=True)
class PEArray:
    """``rows`` x ``cols`` processing elements (default 32 x 32), one MAC per PE per cycle."""

    rows: int = 32
    cols: int = 32

    def __post_init__(self):
        if self.rows < 1 or self.cols < 1:
            raise ValueError(f"rows and cols must be >= 1, got {self.rows}, {self.cols}")


def tile_cycles(macs: torch.Tensor, array: PEArray, needed: torch.Tensor | None = None) -> float:
    """Cycles of a pass whose outputs (in order: output channel, then position) need ``macs`` MACs each: the
    outputs packed in that order into tiles of rows x cols, each tile as long as its largest; with ``needed``, only
    those outputs are packed. Every mode packs the same way, so the modes differ only in the work they skip."""
    flat = macs.reshape(-1).to(torch.float64)
    if needed is not None:
        flat = flat[needed.reshape(-1)]
    tile = array.rows * array.cols
    padded = F.pad(flat, (0, (-flat.numel()) % tile))
    return float(padded.reshape(-1, tile).max(1).values.sum()) if padded.numel() else 0.0


def _per_channel_first(tensor: torch.Tensor) -> torch.Tensor:
    """(n, c, h, w) -> (c, n * h * w): output channels as the matrix's rows."""
    return tensor.transpose(0, 1).reshape(tensor.shape[1], -1)


def mac_maps(record: ConvRecord, image_zeros: bool = False) -> dict[str, dict[str, torch.Tensor]]:
    """Per pass, the MACs of every output: ``dense`` and ``input_sparse`` (nonzero operand pairs); the image-reading
    layer's input counts as dense unless ``image_zeros``."""
    if record.dy is None:
        raise ValueError(f"{record.name}: no output gradient was recorded (run a backward pass in the recorder)")
    x, dy = record.x.double(), record.dy.double()
    ones_w = torch.ones(record.weight_shape, dtype=torch.float64)
    dense_input = record.reads_images and not image_zeros
    nz_x, nz_dy = torch.ones_like(x) if dense_input else (x != 0).double(), (dy != 0).double()
    conv = dict(stride=record.stride, padding=record.padding)
    maps = {
        "forward": {"dense": F.conv2d(torch.ones_like(x), ones_w, **conv), "input_sparse": F.conv2d(nz_x, ones_w, **conv)},
        "weight_gradient": {"dense": conv2d_weight(torch.ones_like(x), ones_w.shape, torch.ones_like(dy), **conv),
                            "input_sparse": conv2d_weight(nz_x, ones_w.shape, nz_dy, **conv)},
    }
    if not record.reads_images:
        maps["data_gradient"] = {"dense": conv2d_input(x.shape, ones_w, torch.ones_like(dy), **conv),
                                 "input_sparse": conv2d_input(x.shape, ones_w, nz_dy, **conv)}
    return maps


def layer_cycles(record: ConvRecord, array: PEArray, image_zeros: bool = False,
                 maps: dict[str, dict[str, torch.Tensor]] | None = None) -> dict[tuple[str, str], float]:
    """Cycles of every (pass, mode) of one convolution; the image-reading layer has no data gradient, and its
    input counts as dense unless ``image_zeros``. ``maps``: the record's :func:`mac_maps`, where already counted
    (several arrays model the same step)."""
    cycles = {}
    for pass_, maps in (mac_maps(record, image_zeros) if maps is None else maps).items():
        weight_like = pass_ == "weight_gradient"
        shape = (lambda t: t.reshape(t.shape[0], -1)) if weight_like else _per_channel_first
        cycles[(pass_, "dense")] = tile_cycles(shape(maps["dense"]), array)
        cycles[(pass_, "input_sparse")] = tile_cycles(shape(maps["input_sparse"]), array)
        needed = _per_channel_first(record.needed) if pass_ == "data_gradient" else None
        cycles[(pass_, "input_output_sparse")] = tile_cycles(shape(maps["input_sparse"]), array, needed)
    return cycles


def macs(record: ConvRecord, image_zeros: bool = False,
         maps: dict[str, dict[str, torch.Tensor]] | None = None) -> dict[tuple[str, str], float]:
    """MACs of every (pass, mode): dense, nonzero pairs, and nonzero pairs of the needed outputs (the images dense
    unless ``image_zeros``; ``maps`` as in :func:`layer_cycles`)."""
    found = {}
    for pass_, maps in (mac_maps(record, image_zeros) if maps is None else maps).items():
        found[(pass_, "dense")] = float(maps["dense"].sum())
        found[(pass_, "input_sparse")] = float(maps["input_sparse"].sum())
        kept = maps["input_sparse"] * record.needed if pass_ == "data_gradient" else maps["input_sparse"]
        found[(pass_, "input_output_sparse")] = float(kept.sum())
    return found
