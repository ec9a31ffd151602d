import ctypes
import mmap
import os

import numpy as np
import pytest
import torch

from mlsysrepro.core.mnist import mnist_test10k
from mlsysrepro.ddl import data


@pytest.fixture(scope="module")
def folder():
    return data.image_folder(28, count=64)


def test_the_folder_holds_one_png_per_image_and_the_labels(folder):
    images, labels = mnist_test10k()
    assert images.shape == (10_000, 28, 28) and labels.shape == (10_000,) and set(labels) == set(range(10))
    assert len(list(folder.glob("*.png"))) == 64
    np.testing.assert_array_equal(np.load(folder / "labels.npy"), labels[:64])


def test_without_augmentation_a_sample_is_the_normalised_image(folder):
    images, labels = mnist_test10k()
    x, y = data.ImageFiles(folder, augment=False)[7]
    expected = (torch.from_numpy(images[7]).float() / 255 - data.MEAN) / data.STD
    torch.testing.assert_close(x[0], expected, atol=1e-5, rtol=0)
    assert y == labels[7]


def test_augmentation_crops_the_same_way_for_a_seed_and_differently_across_seeds(folder):
    a, b, c = data.ImageFiles(folder, seed=1), data.ImageFiles(folder, seed=1), data.ImageFiles(folder, seed=2)
    assert a[3][0].shape == (1, 28, 28)
    torch.testing.assert_close(a[3][0], b[3][0])
    assert not torch.equal(a[3][0], c[3][0])


def resident_pages(path) -> int:
    """Pages of ``path`` in the page cache, by mincore(2) on a mapping of the file."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(path)
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        vector = ctypes.create_string_buffer(pages)
        assert libc.mincore(address, size, vector) == 0, os.strerror(ctypes.get_errno())
        libc.munmap(address, size)
    finally:
        os.close(fd)
    return sum(byte & 1 for byte in vector.raw)


def test_dropping_and_warming_the_page_cache(folder, tmp_path):
    control = tmp_path / "control.bin"
    control.write_bytes(os.urandom(1 << 16))
    fd = os.open(control, os.O_RDONLY)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    if resident_pages(control) > 0:
        pytest.skip("this filesystem keeps pages that posix_fadvise(DONTNEED) asks it to drop (tmpfs, overlay)")
    files = sorted(folder.glob("*.png"))[:8]
    data.warm_page_cache(files)
    assert all(resident_pages(f) > 0 for f in files)
    data.drop_from_page_cache(files)
    assert all(resident_pages(f) == 0 for f in files)
