"""CNNs for small images (28x28 MNIST digits), built from the stage tables of :mod:`.architectures`.

- :class:`ResNet` — the ResNet depth family (10, 12, 16, 18, 34 with basic blocks; 50, 101, 152 with bottlenecks)
  at a reduced ``width`` (64 is torchvision's), with two ablations: ``batchnorm=False`` (no BatchNorm: fewer
  gradient tensors, the same layers) and ``residual=False`` (no shortcut connections: no projection convolutions,
  so fewer layers *and* tensors); ``cifar=True`` builds He et al.'s CIFAR family instead (depth 6n + 2, three
  stages: ResNet-8, ResNet-20, ...);
- :class:`VGG` — VGG 11/13/16/19 with three pooling stages for 28x28 inputs and a narrow classifier;
- :class:`LeNet` — LeCun et al.'s LeNet-5 (two 5x5 convolutions with max pooling, three linear layers), with ReLU;
- :func:`build_cnn` — a model by name: ``resnet<depth>``, ``nobn_resnet<depth>``, ``nores_resnet<depth>``, the
  same prefixes on ``cifar_resnet<depth>``, ``vgg<depth>``, ``lenet``.

Every ReLU is an ``nn.ReLU`` module, so forward hooks see each activation (what a sparsity study records).
"""

from __future__ import annotations

import re

import torch
from torch import nn

from .architectures import cifar_resnet_stages, resnet_stages, vgg_stages

NUM_CLASSES = 10


def _norm(channels: int, batchnorm: bool) -> nn.Module:
    return nn.BatchNorm2d(channels) if batchnorm else nn.Identity()


class Block(nn.Module):
    """A basic (two 3x3 convolutions) or bottleneck (1x1, 3x3, 1x1 with 4x expansion) residual block."""

    def __init__(self, c_in: int, c_mid: int, stride: int, bottleneck: bool, batchnorm: bool, residual: bool):
        super().__init__()
        c_out = c_mid * 4 if bottleneck else c_mid
        shapes = ([(c_in, c_mid, 1, 1), (c_mid, c_mid, 3, stride), (c_mid, c_out, 1, 1)] if bottleneck
                  else [(c_in, c_mid, 3, stride), (c_mid, c_out, 3, 1)])
        layers: list[nn.Module] = []
        for i, (a, b, k, s) in enumerate(shapes):
            layers += [nn.Conv2d(a, b, k, s, k // 2, bias=not batchnorm), _norm(b, batchnorm)]
            if i < len(shapes) - 1:
                layers.append(nn.ReLU(inplace=True))
        self.body = nn.Sequential(*layers)
        self.residual = residual
        self.shortcut = nn.Identity()
        if residual and (stride != 1 or c_in != c_out):
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=not batchnorm),
                                          _norm(c_out, batchnorm))
        self.out_channels = c_out

    def forward(self, x):
        y = self.body(x)
        return torch.relu(y + self.shortcut(x) if self.residual else y)


class ResNet(nn.Module):
    """He et al.'s ResNet with a 3x3 stride-1 stem for 28x28 inputs: stages at 28, 14, 7 and 4 pixels (the CIFAR
    family, ``cifar=True``: three stages, at 28, 14 and 7)."""

    def __init__(self, depth: int, width: int = 16, batchnorm: bool = True, residual: bool = True,
                 in_channels: int = 1, cifar: bool = False):
        super().__init__()
        kind, counts = cifar_resnet_stages(depth) if cifar else resnet_stages(depth)
        bottleneck = kind == "bottleneck"
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 1, 1, bias=not batchnorm),
                                  _norm(width, batchnorm), nn.ReLU(inplace=True))
        blocks, c = [], width
        for stage, count in enumerate(counts):
            for i in range(count):
                block = Block(c, width * 2 ** stage, 2 if (i == 0 and stage > 0) else 1, bottleneck, batchnorm,
                              residual)
                blocks.append(block)
                c = block.out_channels
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(c, NUM_CLASSES)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class VGG(nn.Module):
    """VGG's stacks of 3x3 convolutions; pooling after the first three of five stages keeps 28 -> 3 pixels."""

    def __init__(self, depth: int, width: int = 16, in_channels: int = 1):
        super().__init__()
        layers: list[nn.Module] = []
        c = in_channels
        for stage, count in enumerate(vgg_stages(depth)):
            out = width * 2 ** min(stage, 3)
            for _ in range(count):
                layers += [nn.Conv2d(c, out, 3, 1, 1), nn.ReLU(inplace=True)]
                c = out
            if stage < 3:
                layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        hidden = width * 16
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(c * 9, hidden), nn.ReLU(inplace=True),
                                        nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
                                        nn.Linear(hidden, NUM_CLASSES))

    def forward(self, x):
        return self.classifier(self.features(x))


class LeNet(nn.Module):
    """LeNet-5 for 28x28 inputs (the first convolution padded to keep 28 pixels), ReLU instead of tanh; ``width``
    scales its 6 and 16 channels (6: LeCun's)."""

    def __init__(self, width: int = 6, in_channels: int = 1):
        super().__init__()
        wide = width * 16 // 6
        self.features = nn.Sequential(nn.Conv2d(in_channels, width, 5, padding=2), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(2), nn.Conv2d(width, wide, 5), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(wide * 25, 120), nn.ReLU(inplace=True),
                                        nn.Linear(120, 84), nn.ReLU(inplace=True), nn.Linear(84, NUM_CLASSES))

    def forward(self, x):
        return self.classifier(self.features(x))


def build_cnn(name: str, width: int = 16) -> nn.Module:
    """A CNN by name (see the module docstring); None when ``name`` names no CNN."""
    match = re.fullmatch(r"(nobn_|nores_)?(cifar_)?resnet(\d+)", name)
    if match:
        variant, cifar, depth = match.group(1), match.group(2), int(match.group(3))
        return ResNet(depth, width, batchnorm=variant != "nobn_", residual=variant != "nores_", cifar=bool(cifar))
    match = re.fullmatch(r"vgg(\d+)", name)
    if match:
        return VGG(int(match.group(1)), width)
    if name == "lenet":
        return LeNet(width)
    return None
