"""Real handwritten digits for the collection's CNNs: MNIST (the registry's 10,000 test images, 28x28) or
scikit-learn's bundled 1,797 8x8 digits, shuffled with a seed and cut into train / validation / test splits. Shared by
the serving zoo (Cocktail) and the gradient-sparsity study."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.mnist import mnist_test10k

DATASETS = ("mnist", "digits")


@dataclass(frozen=True)
class Split:
    """Images (n, 1, side, side) as float32 in [0, 1] and int64 labels, split three ways."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_split(dataset: str, seed: int, train: int, validation: int, test: int) -> Split:
    """``dataset`` (``mnist``: the registry's 10,000 MNIST test images, 28x28; ``digits``: scikit-learn's bundled
    1,797 8x8 digits) shuffled with ``seed`` and cut into train / validation / test splits of the given sizes."""
    if dataset == "mnist":
        images, labels = mnist_test10k()
        images = images.astype(np.float32) / 255.0
    elif dataset == "digits":
        from sklearn.datasets import load_digits

        bunch = load_digits()
        images, labels = bunch.images.astype(np.float32) / 16.0, bunch.target
    else:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    if min(train, validation, test) < 1 or train + validation + test > len(labels):
        raise ValueError(f"train + validation + test must be positive and at most {len(labels)} images of "
                         f"{dataset}, got {train} + {validation} + {test}")
    order = np.random.default_rng(seed).permutation(len(labels))
    images, labels = images[order][:, None], labels[order].astype(np.int64)
    cuts = np.cumsum([train, validation, test])
    parts = np.split(np.arange(cuts[-1]), cuts[:-1])
    return Split(*(array[part] for part in parts for array in (images, labels)))
