"""The models the DDL-stall notebook profiles, sized for 28x28 MNIST images on a CPU worker.

- the ResNet depth family and VGG 11-19 of the paper's macroscopic-feature study, from the shared vision models
  (:mod:`mlsysrepro.vision.cnn`);
- :class:`LSTMLM` — a two-layer LSTM language model (one large embedding and decoder, few tensors);
- :func:`features` — what the communication-stall model regresses on: layers with weights, gradient tensors,
  gradient bytes.

Names understood by :func:`build`: those of :func:`mlsysrepro.vision.cnn.build_cnn` (``resnet<depth>``,
``nobn_resnet<depth>``, ``nores_resnet<depth>``, ``vgg<depth>``) and ``lstm``; ``width`` scales every channel
count (64 is torchvision's).
"""

from __future__ import annotations

import torch
from torch import nn

from ..vision.cnn import NUM_CLASSES, build_cnn


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
    cnn = build_cnn(name, width)
    if cnn is not None:
        return cnn
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
