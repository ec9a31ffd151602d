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


def test_page_cache_helpers_accept_the_files(folder):
    files = sorted(folder.glob("*.png"))[:8]
    data.drop_from_page_cache(files)
    data.warm_page_cache(files)
