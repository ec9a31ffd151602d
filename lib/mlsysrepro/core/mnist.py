"""MNIST from the registry's ``mnist_test10k`` (the 10,000 test images in their original IDX files)."""

from __future__ import annotations

import gzip

import numpy as np

from .data import fetch


def read_idx(path, offset: int) -> np.ndarray:
    """The payload of a gzipped IDX file after its ``offset``-byte header, as uint8."""
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset).copy()


def mnist_test10k() -> tuple[np.ndarray, np.ndarray]:
    """Images (10000, 28, 28) and labels (10000,), both uint8."""
    root = fetch("mnist_test10k")
    images = read_idx(root / "t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    labels = read_idx(root / "t10k-labels-idx1-ubyte.gz", 8)
    return images, labels
