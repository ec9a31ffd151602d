"""The CNN architectures the collection uses, described once: stage tables and parameter counts.

- :data:`RESNET_STAGES`: ResNet-``depth`` as a block kind and the blocks per stage (He et al., 2016: basic blocks
  for 18 and 34, bottlenecks for 50, 101, 152), plus the shallow basic-block depths 10, 12 and 16 the DDL-stall
  paper's depth study adds;
- :func:`cifar_resnet_stages`: He et al.'s CIFAR-10 ResNets (Sec. 4.2): depth ``6n + 2``, three stages of ``n``
  basic blocks at 16, 32 and 64 channels (ResNet-8: n = 1, ResNet-20: n = 3);
- :data:`VGG_STAGES`: VGG-``depth`` as 3x3 convolutions per stage (Simonyan & Zisserman, 2015, configurations A,
  B, D, E);
- :func:`resnet`, :func:`vgg`, :func:`alexnet`, :func:`googlenet`: parameters of the published ImageNet models,
  counted layer by layer from those tables (torchvision's layouts), without building a weight.

The torch modules built from the same tables, sized for small images, are in :mod:`.cnn`.
"""

from __future__ import annotations

RESNET_STAGES = {10: ("basic", (1, 1, 1, 1)), 12: ("basic", (2, 1, 1, 1)), 16: ("basic", (2, 2, 2, 1)),
                 18: ("basic", (2, 2, 2, 2)), 34: ("basic", (3, 4, 6, 3)), 50: ("bottleneck", (3, 4, 6, 3)),
                 101: ("bottleneck", (3, 4, 23, 3)), 152: ("bottleneck", (3, 8, 36, 3))}
VGG_STAGES = {11: (1, 1, 2, 2, 2), 13: (2, 2, 2, 2, 2), 16: (2, 2, 3, 3, 3), 19: (2, 2, 4, 4, 4)}


def resnet_stages(depth: int) -> tuple[str, tuple[int, ...]]:
    """``("basic" | "bottleneck", blocks per stage)`` of ResNet-``depth``, or a ValueError naming the depths."""
    if depth not in RESNET_STAGES:
        raise ValueError(f"depth must be one of {sorted(RESNET_STAGES)}, got {depth}")
    return RESNET_STAGES[depth]


def cifar_resnet_stages(depth: int) -> tuple[str, tuple[int, ...]]:
    """``("basic", (n, n, n))`` of He et al.'s CIFAR ResNet-``depth``, depth = 6n + 2 (Sec. 4.2), or a ValueError."""
    if depth < 8 or (depth - 2) % 6:
        raise ValueError(f"a CIFAR ResNet's depth must be 6n + 2 with n >= 1 (8, 14, 20, 32, ...), got {depth}")
    blocks = (depth - 2) // 6
    return "basic", (blocks, blocks, blocks)


def vgg_stages(depth: int) -> tuple[int, ...]:
    """3x3 convolutions per stage of VGG-``depth``, or a ValueError naming the depths."""
    if depth not in VGG_STAGES:
        raise ValueError(f"depth must be one of {sorted(VGG_STAGES)}, got {depth}")
    return VGG_STAGES[depth]


def conv(cin: int, cout: int, k: int, bias: bool = False) -> int:
    return cin * cout * k * k + (cout if bias else 0)


def batch_norm(c: int) -> int:
    return 2 * c  # scale and shift


def linear(cin: int, cout: int) -> int:
    return cin * cout + cout


def resnet(depth: int, classes: int = 1000) -> int:
    """Parameters of ResNet-``depth`` (He et al., 2016; torchvision's layout: 7x7 stem, projection shortcuts)."""
    block, counts = resnet_stages(depth)
    total, cin = conv(3, 64, 7) + batch_norm(64), 64
    for stage, (blocks, width) in enumerate(zip(counts, (64, 128, 256, 512))):
        for b in range(blocks):
            if block == "basic":
                out = width
                total += conv(cin, width, 3) + batch_norm(width) + conv(width, width, 3) + batch_norm(width)
            else:
                out = 4 * width
                total += (conv(cin, width, 1) + batch_norm(width) + conv(width, width, 3) + batch_norm(width)
                          + conv(width, out, 1) + batch_norm(out))
            if (b == 0 and stage > 0) or cin != out:  # projection shortcut
                total += conv(cin, out, 1) + batch_norm(out)
            cin = out
    return total + linear(cin, classes)


def vgg(depth: int, classes: int = 1000) -> int:
    """Parameters of VGG-``depth`` (Simonyan & Zisserman, 2015): 3x3 convolutions with biases, three dense layers."""
    total, cin = 0, 3
    for convs, width in zip(vgg_stages(depth), (64, 128, 256, 512, 512)):
        for _ in range(convs):
            total, cin = total + conv(cin, width, 3, bias=True), width
    return total + linear(512 * 7 * 7, 4096) + linear(4096, 4096) + linear(4096, classes)


def alexnet(classes: int = 1000) -> int:
    """AlexNet (Krizhevsky et al., 2012) in torchvision's one-tower layout: five convolutions, three dense layers."""
    convs = conv(3, 64, 11, True) + conv(64, 192, 5, True) + conv(192, 384, 3, True) + conv(384, 256, 3, True)
    return convs + conv(256, 256, 3, True) + linear(256 * 6 * 6, 4096) + linear(4096, 4096) + linear(4096, classes)


#: GoogLeNet's inception modules (Szegedy et al., 2015, Table 1): 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj.
GOOGLENET_MODULES = ((64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64), (192, 96, 208, 16, 48, 64),
                     (160, 112, 224, 24, 64, 64), (128, 128, 256, 24, 64, 64), (112, 144, 288, 32, 64, 64),
                     (256, 160, 320, 32, 128, 128), (256, 160, 320, 32, 128, 128), (384, 192, 384, 48, 128, 128))


def googlenet(classes: int = 1000) -> int:
    """GoogLeNet (Szegedy et al., 2015, Table 1) without its auxiliary heads; convolutions carry biases."""
    total, cin = conv(3, 64, 7, True) + conv(64, 64, 1, True) + conv(64, 192, 3, True), 192
    for one, r3, c3, r5, c5, pool in GOOGLENET_MODULES:
        total += (conv(cin, one, 1, True) + conv(cin, r3, 1, True) + conv(r3, c3, 3, True) + conv(cin, r5, 1, True)
                  + conv(r5, c5, 5, True) + conv(cin, pool, 1, True))
        cin = one + c3 + c5 + pool
    return total + linear(cin, classes)


#: Inception v3 and v4 are not recomputed layer by layer: their published parameter counts (Szegedy et al.,
#: CVPR 2016, torchvision's ``inception_v3`` without the auxiliary head; Szegedy et al., AAAI 2017) stand in.
PUBLISHED_PARAMETERS = {"inception3": 23_834_568, "inception4": 42_679_816}
