"""The models the DDL-stall notebook profiles, sized for 28x28 MNIST images on a CPU worker.

- :func:`resnet` — the ResNet depth family of the paper's macroscopic-feature study (10, 12, 16, 18, 34 with
  basic blocks; 50, 101, 152 with bottlenecks) at a reduced width, with the authors' two ablations:
  ``batchnorm=False`` (no BatchNorm: fewer gradient tensors, the same layers) and ``residual=False`` (no shortcut
  connections: no projection convolutions, so fewer layers *and* tensors).
- :func:`vgg` — VGG 11/13/16/19 (configurations A, B, D, E of Simonyan & Zisserman) with three pooling stages for
  28x28 inputs and a narrow classifier.
- :class:`LSTMLM` — a two-layer LSTM language model (one large embedding and decoder, few tensors).
- :func:`features` — what the communication-stall model regresses on: layers with weights, gradient tensors,
  gradient bytes.

Names understood by :func:`build`: ``resnet<depth>``, ``nobn_resnet<depth>``, ``nores_resnet<depth>``,
``vgg<depth>``, ``lstm``; ``width`` scales every channel count (64 is torchvision's).
"""

from __future__ import annotations

import re

import torch
from torch import nn

BASIC_BLOCKS = {10: [1, 1, 1, 1], 12: [2, 1, 1, 1], 16: [2, 2, 2, 1], 18: [2, 2, 2, 2], 34: [3, 4, 6, 3]}
BOTTLENECKS = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3], 152: [3, 8, 36, 3]}
VGG_CONFIGS = {11: [1, 1, 2, 2, 2], 13: [2, 2, 2, 2, 2], 16: [2, 2, 3, 3, 3], 19: [2, 2, 4, 4, 4]}
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
    """He et al.'s ResNet with a 3x3 stride-1 stem for 28x28 inputs: stages at 28, 14, 7 and 4 pixels."""

    def __init__(self, depth: int, width: int = 16, batchnorm: bool = True, residual: bool = True,
                 in_channels: int = 1):
        super().__init__()
        if depth not in BASIC_BLOCKS and depth not in BOTTLENECKS:
            raise ValueError(f"depth must be one of {sorted(BASIC_BLOCKS | BOTTLENECKS)}, got {depth}")
        bottleneck = depth in BOTTLENECKS
        counts = BOTTLENECKS[depth] if bottleneck else BASIC_BLOCKS[depth]
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
        if depth not in VGG_CONFIGS:
            raise ValueError(f"depth must be one of {sorted(VGG_CONFIGS)}, got {depth}")
        layers: list[nn.Module] = []
        c = in_channels
        for stage, count in enumerate(VGG_CONFIGS[depth]):
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


class LSTMLM(nn.Module):
    """Embedding -> two-layer LSTM -> decoder over a ``vocab``-word vocabulary; the loss is next-token prediction."""

    def __init__(self, vocab: int = 10_000, hidden: int = 128, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        return self.decoder(self.lstm(self.embed(tokens))[0])


def build(name: str, width: int = 16) -> nn.Module:
    """A model by name (see the module docstring)."""
    match = re.fullmatch(r"(nobn_|nores_)?resnet(\d+)", name)
    if match:
        variant, depth = match.group(1), int(match.group(2))
        return ResNet(depth, width, batchnorm=variant != "nobn_", residual=variant != "nores_")
    match = re.fullmatch(r"vgg(\d+)", name)
    if match:
        return VGG(int(match.group(1)), width)
    if name == "lstm":
        return LSTMLM(hidden=8 * width)
    raise ValueError(f"model must be resnet<depth>, nobn_resnet<depth>, nores_resnet<depth>, vgg<depth> or lstm; "
                     f"got {name!r}")


def is_language_model(name: str) -> bool:
    return name == "lstm"


def synthetic_batch(name: str, batch_size: int, generator: torch.Generator, seq_len: int = 35):
    """Inputs and targets of one batch, made in memory (RUN0 / RUN1's synthetic data)."""
    if is_language_model(name):
        tokens = torch.randint(0, 10_000, (batch_size, seq_len + 1), generator=generator)
        return tokens[:, :-1], tokens[:, 1:]
    return (torch.randn(batch_size, 1, 28, 28, generator=generator),
            torch.randint(0, NUM_CLASSES, (batch_size,), generator=generator))


def loss_fn(name: str, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


def features(model: nn.Module) -> dict[str, int]:
    """Layers with weights (convolutions, linear, LSTM layers, embeddings; not norms), gradient tensors and bytes."""
    weighted = (nn.Conv2d, nn.Linear, nn.Embedding)
    layers = sum(isinstance(m, weighted) for m in model.modules())
    layers += sum(m.num_layers for m in model.modules() if isinstance(m, nn.LSTM))
    params = [p for p in model.parameters() if p.requires_grad]
    return {"layers": layers, "gradient_tensors": len(params),
            "gradient_bytes": sum(p.numel() * p.element_size() for p in params)}


def training_flops(name: str, model: nn.Module, batch_size: int) -> float:
    """Floating-point operations of one forward + backward pass, counted by ``torch.utils.flop_counter``."""
    from torch.utils.flop_counter import FlopCounterMode

    x, y = synthetic_batch(name, batch_size, torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        loss_fn(name, model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())
