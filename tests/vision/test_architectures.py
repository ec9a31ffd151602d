"""One description of each CNN: the torch models for small images and the ImageNet parameter counts read the same
stage tables, so they agree wherever their layouts agree."""

import pytest
from torch import nn

from mlsysrepro.vision import architectures
from mlsysrepro.vision.architectures import conv, linear
from mlsysrepro.vision.cnn import VGG, ResNet, build_cnn


def parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("depth", sorted(architectures.RESNET_STAGES))
def test_the_small_image_resnet_is_torchvisions_but_for_its_stem_and_head(depth):
    """At width 64 on 3 channels our ResNet differs from torchvision's only by a 3x3 stem (not 7x7) and a 10-way
    head: every block, shortcut and BatchNorm comes from the same stage table."""
    ours = parameters(ResNet(depth, width=64, in_channels=3))
    assert ours == architectures.resnet(depth, classes=10) - conv(3, 64, 7) + conv(3, 64, 3)


@pytest.mark.parametrize("depth", sorted(architectures.VGG_STAGES))
def test_the_small_image_vgg_has_torchvisions_convolutions(depth):
    model = VGG(depth, width=64, in_channels=3)
    convolutions = sum(parameters(m) for m in model.modules() if isinstance(m, nn.Conv2d))
    classifier = linear(512 * 7 * 7, 4096) + linear(4096, 4096) + linear(4096, 1000)
    assert convolutions == architectures.vgg(depth) - classifier


def test_published_counts_and_bad_depths():
    assert architectures.resnet(50) == 25_557_032 and architectures.vgg(16) == 138_357_544  # torchvision's
    with pytest.raises(ValueError, match=r"depth must be one of \[10, 12, 16, 18, 34, 50, 101, 152\], got 20"):
        architectures.resnet(20)
    with pytest.raises(ValueError, match=r"depth must be one of \[11, 13, 16, 19\], got 12"):
        build_cnn("vgg12")
    assert build_cnn("lstm") is None


@pytest.mark.parametrize("depth, blocks", [(8, 1), (20, 3), (32, 5)])
def test_the_cifar_resnets_have_6n_plus_2_weighted_layers(depth, blocks):
    """He et al.'s CIFAR family: a stem, three stages of n basic blocks (two convolutions each) and the head; the
    two projection shortcuts where the width doubles are not counted in the depth."""
    model = build_cnn(f"cifar_resnet{depth}", width=16)
    convolutions = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convolutions) - 2 + 1 == depth  # + the linear head, - the two projections
    assert architectures.cifar_resnet_stages(depth) == ("basic", (blocks,) * 3)
    assert max(m.out_channels for m in convolutions) == 64
    with pytest.raises(ValueError, match="6n \\+ 2"):
        architectures.cifar_resnet_stages(10)
