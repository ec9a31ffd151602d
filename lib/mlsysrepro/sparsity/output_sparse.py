"""A convolution's data gradient computed only where it is needed, on a CPU (gradient output sparsity).

The dense data gradient is ``conv2d_input(dY, W)`` at every input position; the ReLU below keeps only the
positions where the forward input was nonzero (``needed``). Two exact ways to skip the rest, each returning the
dense gradient times the mask:

- :func:`by_channels`: input channels that are zero for the whole batch (dead ReLUs) are dropped from the weight,
  and one smaller dense convolution computes the others;
- :func:`by_positions`: the (image, row, column) positions where some channel is needed are gathered as columns of
  the transposed convolution's im2col matrix, and one GEMM computes only those (stride 1).

:func:`dense_masked` is the reference. Whether either pays on a CPU is measured, never assumed
(``benchmarks/grad_sparsity.py`` and the notebook print the ratios).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.grad import conv2d_input


def dense_masked(dy: torch.Tensor, weight: torch.Tensor, needed: torch.Tensor, stride=1, padding=0) -> torch.Tensor:
    """The dense data gradient, times the mask of needed inputs."""
    return conv2d_input(needed.shape, weight, dy, stride=stride, padding=padding) * needed


def by_channels(dy: torch.Tensor, weight: torch.Tensor, needed: torch.Tensor, stride=1, padding=0) -> torch.Tensor:
    """Only the input channels needed somewhere in the batch, in one smaller convolution."""
    kept = needed.any(dim=(0, 2, 3)).nonzero().squeeze(1)
    grad = torch.zeros(needed.shape, dtype=dy.dtype)
    if kept.numel():
        shape = (needed.shape[0], kept.numel(), *needed.shape[2:])
        grad[:, kept] = conv2d_input(shape, weight[:, kept], dy, stride=stride, padding=padding)
    return grad * needed


def by_positions(dy: torch.Tensor, weight: torch.Tensor, needed: torch.Tensor, padding=0) -> torch.Tensor:
    """Only the positions where some channel is needed: the transposed convolution as im2col over ``dy`` (padded
    by kernel - 1 - padding, stride 1), its needed columns gathered into one GEMM with the flipped weight."""
    out_channels, in_channels, kh, kw = weight.shape
    n, _, h, w = needed.shape
    cols = F.unfold(dy, (kh, kw), padding=(kh - 1 - padding, kw - 1 - padding))  # n x (out * kh * kw) x (h * w)
    if cols.shape[2] != h * w:
        raise ValueError("by_positions handles stride-1 convolutions whose input and output sizes match the padding")
    flipped = weight.flip(2, 3).transpose(0, 1).reshape(in_channels, -1)  # in x (out * kh * kw)
    where = needed.any(dim=1).reshape(n, -1)  # n x (h * w)
    image, position = where.nonzero(as_tuple=True)
    values = flipped @ cols[image, :, position].T  # in x kept positions
    grad = torch.zeros(n, in_channels, h * w, dtype=dy.dtype)
    grad[image, :, position] = values.T
    return grad.reshape(n, in_channels, h, w) * needed
