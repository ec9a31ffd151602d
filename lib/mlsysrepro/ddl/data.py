"""Real data stalls: images stored one file each on local disk, decoded and augmented on the CPU.

The data pipeline of an image-classification job, at MNIST size: every sample is a PNG file (as ImageNet's are
JPEG files), read (*fetch*), then decoded, randomly cropped, resized and normalised (*prep*). DS-Analyzer separates
the two by running with a cold page cache (fetch + prep) and a warm one (prep only):

- :func:`drop_from_page_cache` evicts files with ``posix_fadvise(POSIX_FADV_DONTNEED)``, which needs no root
  (the paper drops the whole cache as root);
- :func:`warm_page_cache` reads them once so that the run finds them in memory.

:func:`image_folder` writes the folder once (atomically, keyed by the stored image size); :class:`ImageFiles` is the
dataset a ``DataLoader`` reads.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from ..core import paths
from ..core.mnist import mnist_test10k

MEAN, STD = 0.1307, 0.3081  # MNIST's pixel statistics (torchvision's MNIST example)
OUTPUT_SIZE = 28


def image_folder(stored_size: int, count: int = 10_000) -> Path:
    """``data/cache/ddl_stalls/mnist_png<size>_<count>/``: the first ``count`` MNIST images as PNG files of
    ``stored_size`` pixels a side (upsampled, bilinear) and ``labels.npy``; written once."""
    root = paths.cache_dir() / "ddl_stalls" / f"mnist_png{stored_size}_{count}"
    if (root / "labels.npy").exists():
        return root
    images, labels = mnist_test10k()
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=root.name + "."))
    try:
        for i in range(count):
            image = Image.fromarray(images[i]).resize((stored_size, stored_size), Image.BILINEAR)
            image.save(tmp / f"{i:05d}.png")
        np.save(tmp / "labels.npy", labels[:count].astype(np.int64))
        os.replace(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root


class ImageFiles(torch.utils.data.Dataset):
    """Sample ``i`` = ``<root>/<i>.png`` read, decoded, cropped to a random square of ``crop`` to 100 % of its side
    (RandomResizedCrop with a fixed aspect), resized to 28 x 28 and normalised. ``augment=False`` skips the crop.

    The crop is drawn from a generator seeded by ``(seed, i)``, so a sample looks the same in every process.
    """

    def __init__(self, root: Path, seed: int = 0, crop: float = 0.8, augment: bool = True):
        self.root = Path(root)
        self.labels = torch.from_numpy(np.load(self.root / "labels.npy"))
        self.seed, self.crop, self.augment = seed, crop, augment

    def __len__(self) -> int:
        return len(self.labels)

    def path(self, i: int) -> Path:
        return self.root / f"{i:05d}.png"

    def __getitem__(self, i: int):
        data = self.path(i).read_bytes()  # fetch
        pixels = torch.from_numpy(np.asarray(Image.open(io.BytesIO(data)), dtype=np.uint8).copy())  # decode
        image = pixels.float().div_(255).unsqueeze(0).unsqueeze(0)
        if self.augment:
            side = image.shape[-1]
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
            size = int(side * (self.crop + (1 - self.crop) * torch.rand((), generator=g)))
            top, left = (torch.randint(0, side - size + 1, (2,), generator=g)).tolist()
            image = image[..., top:top + size, left:left + size]
        image = torch.nn.functional.interpolate(image, size=(OUTPUT_SIZE, OUTPUT_SIZE), mode="bilinear",
                                                align_corners=False, antialias=True)
        return image[0].sub_(MEAN).div_(STD), self.labels[i]


def drop_from_page_cache(files) -> None:
    """Ask the kernel to forget the cached pages of ``files`` (no root needed; clean pages only)."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)  # dirty pages cannot be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm_page_cache(files) -> None:
    """Read ``files`` once so that the next reads come from memory."""
    for path in files:
        Path(path).read_bytes()
