"""A model zoo for ensemble serving: classifiers of different cost and accuracy, trained here on real digits.

Cocktail (Gunasekaran et al., NSDI'22) serves a pool of twelve ImageNet models whose latency and accuracy span a
wide range (MobileNet at 41 ms / 68 % up to NASNetLarge at 315 ms / 74.6 %). This module builds the same kind of
pool at a size two CPU cores can train: the zoo's models run from a logistic regression to a ResNet-18, each
trained on one split of real digits, and each

- evaluated once on a **validation** split (what model selection and the voting weights read) and once on a
  held-out **test** split (what the serving simulator replays: every served request is one test image, and its
  ensemble's answer is the weighted vote of the members' real predictions on that image);
- timed on this machine, one thread, at several batch sizes (:func:`measure_latency`, through
  :func:`mlsysrepro.core.timing.interleaved`): the capacity a serving VM gets for the model.

:func:`build_zoo` returns a :class:`Zoo`: plain arrays, so a paper module can cache it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..core.progress import progress
from ..core.tasks import one_thread
from ..core.timing import interleaved
from ..vision.cnn import build_cnn
from ..vision.digits import Split

class SmallCNN(nn.Module):
    """Two 3x3 convolutions of ``width`` and ``2 * width`` channels with max pooling, then a linear classifier on
    the globally pooled features: the zoo's cheap CNNs, one per width."""

    def __init__(self, width: int, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.head = nn.Linear(32 * width, classes)

    def forward(self, x):
        return self.head(self.features(x))


class MLP(nn.Module):
    """A multilayer perceptron on the flattened image."""

    def __init__(self, inputs: int, hidden: tuple[int, ...], classes: int = 10):
        super().__init__()
        layers, width = [nn.Flatten()], inputs
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        self.net = nn.Sequential(*layers, nn.Linear(width, classes))

    def forward(self, x):
        return self.net(x)


def _sklearn(name: str, seed: int):
    from sklearn.ensemble import ExtraTreesClassifier, HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import LinearSVC

    return {
        "naive_bayes": lambda: GaussianNB(var_smoothing=0.05),
        "logistic_regression": lambda: LogisticRegression(C=0.1, max_iter=300),
        "linear_svm": lambda: LinearSVC(C=0.05, max_iter=3000, random_state=seed),
        "knn": lambda: KNeighborsClassifier(n_neighbors=3),
        "random_forest": lambda: RandomForestClassifier(n_estimators=60, random_state=seed, n_jobs=1),
        "extra_trees": lambda: ExtraTreesClassifier(n_estimators=60, random_state=seed, n_jobs=1),
        "gradient_boosting": lambda: HistGradientBoostingClassifier(max_iter=25, random_state=seed),
    }[name]()


def _torch(name: str, side: int) -> nn.Module:
    if name.startswith("cnn_"):
        return SmallCNN(int(name.removeprefix("cnn_")))
    if name == "mlp_small":
        return MLP(side * side, (64,))
    if name == "mlp_large":
        return MLP(side * side, (256, 256))
    return build_cnn(name, width=16)


#: The zoo, roughly from cheapest to costliest: scikit-learn models on the flattened pixels, then torch models.
MODELS = ("naive_bayes", "logistic_regression", "linear_svm", "knn", "random_forest", "extra_trees",
          "gradient_boosting", "mlp_small", "mlp_large", "cnn_4", "cnn_16", "resnet18")
SKLEARN = {"naive_bayes", "logistic_regression", "linear_svm", "knn", "random_forest", "extra_trees",
           "gradient_boosting"}


class Classifier:
    """One trained model behind one call, ``predict(images) -> labels`` (int64 numpy)."""

    def __init__(self, name: str, model):
        self.name, self.model = name, model

    def predict(self, images: np.ndarray) -> np.ndarray:
        if self.name in SKLEARN:
            return self.model.predict(images.reshape(len(images), -1)).astype(np.int64)
        with torch.inference_mode():
            return self.model(torch.from_numpy(images)).argmax(1).numpy()


def train_classifier(name: str, split: Split, seed: int, epochs: int) -> Classifier:
    """Train the zoo model ``name`` on ``split``'s training images (torch models: Adam, ``epochs`` epochs of
    mini-batches of 64, the rate falling linearly to zero over the last epoch so that training settles rather
    than stopping wherever a full-rate step left it, seeded with ``seed``)."""
    if name not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {name!r}")
    if name in SKLEARN:
        model = _sklearn(name, seed)
        model.fit(split.x_train.reshape(len(split.x_train), -1), split.y_train)
        return Classifier(name, model)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = _torch(name, split.x_train.shape[-1])
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3 if name.startswith("resnet") else 5e-3)
    x, y = torch.from_numpy(split.x_train), torch.from_numpy(split.y_train)
    per_epoch = math.ceil(len(y) / 64)
    steps = epochs * per_epoch
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: min(1.0, (steps - step) / per_epoch))
    model.train()
    for _ in range(epochs):
        for batch in torch.randperm(len(y), generator=generator).split(64):
            optimiser.zero_grad()
            nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
            optimiser.step()
            schedule.step()
    return Classifier(name, model.eval())


def measure_latency(classifiers: list[Classifier], images: np.ndarray, batches: tuple[int, ...],
                    repeats: int) -> pd.DataFrame:
    """Each classifier's latency (ms) per batch size on one thread: the median of ``repeats`` interleaved rounds
    (:func:`mlsysrepro.core.timing.interleaved`) with its 95 % interval, and the throughput one thread serves
    at that batch (requests per second)."""
    rows = []
    with one_thread():
        for batch in batches:
            inputs = images[:batch]
            timings = interleaved({c.name: (lambda c=c: c.predict(inputs)) for c in classifiers}, repeats)
            for name, timing in timings.items():
                low, high = timing.interval
                rows.append(dict(model=name, batch=batch, ms=1e3 * timing.median, ms_low=1e3 * low,
                                 ms_high=1e3 * high, per_second=batch / timing.median))
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Zoo:
    """The trained zoo as plain arrays: model ``names``; ``val_predictions`` and ``test_predictions`` (models x
    images, int64) with their labels; ``latency_ms`` (models x ``batches``, the medians of
    :func:`measure_latency`) with its interval ends ``latency_low_ms`` / ``latency_high_ms``."""

    names: tuple[str, ...]
    val_predictions: np.ndarray
    val_labels: np.ndarray
    test_predictions: np.ndarray
    test_labels: np.ndarray
    batches: tuple[int, ...]
    latency_ms: np.ndarray
    latency_low_ms: np.ndarray
    latency_high_ms: np.ndarray

    @property
    def val_accuracy(self) -> np.ndarray:
        return (self.val_predictions == self.val_labels).mean(1)

    @property
    def test_accuracy(self) -> np.ndarray:
        return (self.test_predictions == self.test_labels).mean(1)

    def latency(self, batch: int) -> np.ndarray:
        """Each model's median latency (ms) at ``batch`` (one of :attr:`batches`)."""
        if batch not in self.batches:
            raise ValueError(f"batch must be one of the measured batch sizes {self.batches}, got {batch}")
        return self.latency_ms[:, self.batches.index(batch)]

    def table(self) -> pd.DataFrame:
        """One row per model: validation and test accuracy, latency at every measured batch."""
        table = pd.DataFrame({"val_accuracy": self.val_accuracy, "test_accuracy": self.test_accuracy},
                             index=pd.Index(self.names, name="model"))
        for column, batch in enumerate(self.batches):
            table[f"ms_at_{batch}"] = self.latency_ms[:, column]
        return table

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict) -> "Zoo":
        data = dict(data)
        data["names"], data["batches"] = tuple(data["names"]), tuple(int(b) for b in data["batches"])
        for key in ("val_predictions", "val_labels", "test_predictions", "test_labels"):
            data[key] = np.asarray(data[key], dtype=np.int64)
        for key in ("latency_ms", "latency_low_ms", "latency_high_ms"):
            data[key] = np.asarray(data[key], dtype=np.float64)
        return cls(**data)


def build_zoo(split: Split, models: tuple[str, ...] = MODELS, seed: int = 0, epochs: int = 3,
              batches: tuple[int, ...] = (1, 8, 32), repeats: int = 15) -> Zoo:
    """Train every model of ``models`` on ``split`` (one thread each), predict its validation and test images, and
    measure every model's latency at ``batches`` on test images."""
    unknown = sorted(set(models) - set(MODELS))
    if unknown or not models:
        raise ValueError(f"models must be a non-empty subset of {MODELS}, got unknown {unknown}")
    if max(batches) > len(split.x_test):
        raise ValueError(f"batches must be at most the {len(split.x_test)} test images, got {batches}")
    classifiers = []
    with one_thread():
        for name in progress(models, desc="training the zoo"):
            classifiers.append(train_classifier(name, split, seed, epochs))
    latency = measure_latency(classifiers, split.x_test, tuple(batches), repeats)
    grid = {column: latency.pivot(index="model", columns="batch", values=column).loc[list(models), list(batches)]
            for column in ("ms", "ms_low", "ms_high")}
    return Zoo(names=tuple(models),
               val_predictions=np.stack([c.predict(split.x_val) for c in classifiers]), val_labels=split.y_val,
               test_predictions=np.stack([c.predict(split.x_test) for c in classifiers]), test_labels=split.y_test,
               batches=tuple(batches), latency_ms=grid["ms"].to_numpy(), latency_low_ms=grid["ms_low"].to_numpy(),
               latency_high_ms=grid["ms_high"].to_numpy())
