"""Gradient bytes of the models in the cluster traces, from their layer shapes (no weights are built).

A data-parallel job all-reduces one fp32 gradient per parameter each iteration, so its communication
volume is ``4 * parameters`` bytes. The counts follow the published architectures (torchvision's
layouts for ResNet and VGG, ImageNet heads; Zaremba et al.'s LSTM language model; the Transformer
"base" of Vaswani et al.) and are computed layer by layer: the CNNs in :mod:`mlsysrepro.vision.architectures`,
the language models here.
"""

from __future__ import annotations

from ..vision.architectures import PUBLISHED_PARAMETERS, alexnet, googlenet, linear, resnet, vgg


def lstm_lm(vocab: int = 10_000, hidden: int = 650, layers: int = 2) -> int:
    """Zaremba et al.'s word LM: embedding, ``layers`` LSTMs (two bias vectors each, as cuDNN keeps), decoder."""
    return vocab * hidden + layers * (4 * hidden * 2 * hidden + 2 * 4 * hidden) + linear(hidden, vocab)


def transformer(vocab: int = 37_000, d: int = 512, ff: int = 2048, layers: int = 6) -> int:
    """The Transformer "base" (Vaswani et al., 2017) with one embedding shared by source, target and output."""
    attention = 4 * linear(d, d)
    feed_forward = linear(d, ff) + linear(ff, d)
    norm = 2 * d
    encoder = layers * (attention + feed_forward + 2 * norm)
    decoder = layers * (2 * attention + feed_forward + 3 * norm)
    return vocab * d + encoder + decoder


#: Parameters of the models the traces name (Tiresias, Gavel), computed above.
PARAMETERS = {
    "resnet18": resnet(18), "resnet50": resnet(50), "resnet101": resnet(101), "resnet152": resnet(152),
    "vgg11": vgg(11), "vgg16": vgg(16), "vgg19": vgg(19), "lstm_lm": lstm_lm(), "transformer": transformer(),
    "alexnet": alexnet(), "googlenet": googlenet(), **PUBLISHED_PARAMETERS,
}


def gradient_bytes(model: str) -> int:
    """fp32 gradient bytes one data-parallel iteration all-reduces for ``model`` (a key of :data:`PARAMETERS`)."""
    if model not in PARAMETERS:
        raise ValueError(f"model must be one of {sorted(PARAMETERS)}, got {model!r}")
    return 4 * PARAMETERS[model]
