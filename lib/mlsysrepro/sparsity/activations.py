"""What ReLU makes sparse in a CNN's training step, recorded with hooks (Sarma et al., arXiv 2109.07710).

Forward, a ReLU's output ``A = ReLU(Z)`` is zero wherever its mask ``M = [Z > 0]`` is; backward, the gradient it
passes down is ``G_Z = G_A * M``, so it is zero there too (the forward mask tells the backward pass in advance).
A convolution whose input is a ReLU's output (directly or through max pooling) therefore need not compute its
data gradient where that input is zero: the ReLU below would zero it anyway. That is *gradient output sparsity*.

:class:`Recorder` hooks every ``nn.ReLU`` and ``nn.Conv2d`` of a model for one training step:

- per ReLU: the density of its output (the mask) and of the gradient it passes down (``G_Z``);
- per convolution: its input and the gradient at its output (the first ``sample`` images), its geometry, and
  whether its data gradient is needed at all (not for the layer that reads the images) and where it can be skipped
  (where the input, a ReLU's output, is zero).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class ConvRecord:
    """One convolution's step: input ``x`` and output gradient ``dy`` (sampled images), weight shape, stride,
    padding, and whether its input is the images (then no data gradient is computed)."""

    name: str
    x: torch.Tensor
    weight_shape: tuple[int, ...]
    stride: tuple[int, int]
    padding: tuple[int, int]
    reads_images: bool
    dy: torch.Tensor | None = None

    @property
    def needed(self) -> torch.Tensor:
        """Where the data gradient is needed: the input's nonzeros (a ReLU's zeros are masked below)."""
        return self.x != 0


@dataclass
class ReluRecord:
    name: str
    activation_density: float
    gradient_density: float = float("nan")


def density(tensor: torch.Tensor) -> float:
    """The share of nonzero entries."""
    if tensor.numel() == 0:
        raise ValueError("density of an empty tensor")
    return float((tensor != 0).float().mean())


@dataclass
class Recorder:
    """Hooks on ``model`` recording one forward and backward pass (use as a context manager around the step)."""

    model: nn.Module
    sample: int = 8
    convs: list[ConvRecord] = field(default_factory=list)
    relus: list[ReluRecord] = field(default_factory=list)

    def __enter__(self):
        self.handles = []
        names = {module: name for name, module in self.model.named_modules()}
        self.first = True
        for module in self.model.modules():
            if isinstance(module, nn.Conv2d):
                self.handles.append(module.register_forward_hook(self._conv_hook(names[module])))
            elif isinstance(module, nn.ReLU):
                self.handles.append(module.register_forward_hook(self._relu_hook(names[module])))
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()

    def _conv_hook(self, name):
        def hook(module, inputs, output):
            record = ConvRecord(name, inputs[0][: self.sample].detach().clone(), tuple(module.weight.shape),
                                module.stride, module.padding, reads_images=self.first)
            self.first = False
            self.convs.append(record)
            if output.requires_grad:
                output.register_hook(lambda grad: setattr(record, "dy", grad[: self.sample].detach().clone()))
        return hook

    def _relu_hook(self, name):
        def hook(module, inputs, output):
            mask = output.detach() > 0
            record = ReluRecord(name, float(mask.float().mean()))
            self.relus.append(record)
            if output.requires_grad:
                output.register_hook(lambda grad: setattr(record, "gradient_density", density(grad * mask)))
        return hook
