"""Training with any sampler, evaluation, and the gradient-variance measurement of MVS-GNN's Fig. 2.

``train(...)`` runs Adam on sampled batches and logs, every ``log_every`` steps, the full-batch
training loss, validation and test scores, and the gradient variance

    Var = mean over draws of || g_batch - g_full ||^2                                  (Fig. 2)

where ``g_full`` is the exact gradient of the mean training loss at the current parameters and
``g_batch`` the gradient of the sampled loss at the same parameters (dropout off, history left
untouched), so the number measures the sampler and nothing else. The measuring batches come from a
generator of their own and a copy of the sampler (Cluster-GCN's epoch queue stays as it was), so a run
trains the same whether it measures or not. Step times are split into
sampling, training and refresh (MVS-GNN's checkpoint: the paper's "distribution" time, Table 4).

:func:`gradient_error` splits the same quantity at given parameters into bias and variance,

    E ||g_batch - g_full||^2 = ||E g_batch - g_full||^2 + E ||g_batch - E g_batch||^2,

which is how samplers are compared at shared parameters (one trajectory, every sampler's estimator).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch

from ..core import progress
from .batch import Batch
from .datasets import GraphData
from .losses import f1_micro, node_losses
from .models import GNN, History


def weighted_loss(logits: torch.Tensor, y: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``sum_i w_i loss_i``: with the sampler's weights, an estimate of the mean training loss."""
    return (node_losses(logits, y) * weight).sum()


def score(logits: torch.Tensor, y: torch.Tensor, metric: str) -> float:
    """F1-micro (accuracy for single-label classification) or ROC-AUC of class 1."""
    if metric == "f1_micro":
        return f1_micro(logits, y)
    if metric == "roc_auc":
        from sklearn.metrics import roc_auc_score  # here: sklearn takes two seconds to load in every worker process

        return float(roc_auc_score(y.numpy(), torch.softmax(logits, 1)[:, 1].numpy()))
    raise ValueError(f"metric must be 'f1_micro' or 'roc_auc', got {metric!r}")


def flat_grad(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def full_gradient(model: GNN, data: GraphData, adjacency: torch.Tensor) -> torch.Tensor:
    """Exact gradient of the mean training loss."""
    model.zero_grad()
    logits = model.forward_full(data.x, adjacency)
    loss = node_losses(logits[data.train_idx], data.y[data.train_idx]).mean()
    loss.backward()
    return flat_grad(model)


def batch_gradient(model: GNN, data: GraphData, batch: Batch, history: History | None) -> torch.Tensor:
    model.zero_grad()
    logits = model(data.x, batch, history, write_history=False)
    weighted_loss(logits, data.y[batch.output_ids], batch.loss_weight).backward()
    return flat_grad(model)


def gradient_variance(model, data, sampler, history, adjacency, generator, draws: int) -> float:
    """``mean ||g_batch - g_full||^2`` over ``draws`` batches, dropout off."""
    was_training = model.training
    model.eval()
    g_full = full_gradient(model, data, adjacency)
    var = sum(float(((batch_gradient(model, data, sampler.sample(generator), history) - g_full) ** 2).sum())
              for _ in range(draws)) / draws
    model.zero_grad()
    model.train(was_training)
    return var


def gradient_error(model, data, sampler, history, adjacency, generator, draws: int) -> dict[str, float]:
    """The mini-batch gradient as an estimator of the full gradient at the model's current parameters, over
    ``draws`` batches (dropout off): ``bias2`` = ||mean g_batch - g_full||^2, ``variance`` = mean ||g_batch -
    mean g_batch||^2, ``error`` = their sum = mean ||g_batch - g_full||^2, ``error_se`` its standard error over the
    draws, ``full`` = ||g_full||^2."""
    if draws < 2:
        raise ValueError(f"draws must be >= 2 to split bias from variance, got {draws}")
    was_training = model.training
    model.eval()
    g_full = full_gradient(model, data, adjacency)
    samples = torch.stack([batch_gradient(model, data, sampler.sample(generator), history) for _ in range(draws)])
    mean = samples.mean(0)
    bias2, variance = float(((mean - g_full) ** 2).sum()), float(((samples - mean) ** 2).sum(1).mean())
    model.zero_grad()
    model.train(was_training)
    per_draw = ((samples - g_full) ** 2).sum(1)
    return {"bias2": bias2, "variance": variance, "error": bias2 + variance,
            "error_se": float(per_draw.std() / draws**0.5), "full": float((g_full ** 2).sum())}


@torch.no_grad()
def evaluate(model: GNN, data: GraphData, adjacency: torch.Tensor) -> dict[str, float]:
    was_training = model.training
    model.eval()
    logits = model.forward_full(data.x, adjacency)
    model.train(was_training)
    y = data.y
    return {
        "train_loss": float(node_losses(logits[data.train_idx], y[data.train_idx]).mean()),
        "test_loss": float(node_losses(logits[data.test_idx], y[data.test_idx]).mean()),
        "val_score": score(logits[data.val_idx], y[data.val_idx], data.metric),
        "test_score": score(logits[data.test_idx], y[data.test_idx], data.metric),
    }


@dataclass
class TrainLog:
    rows: list[dict] = field(default_factory=list)  # one per logged step
    time_sample: float = 0.0
    time_train: float = 0.0
    time_refresh: float = 0.0

    def frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows)


def train(model: GNN, data: GraphData, sampler, steps: int, generator: torch.Generator, lr: float = 0.01,
          log_every: int = 10, variance_draws: int = 0, desc: str = "training",
          probe_generator: torch.Generator | None = None) -> TrainLog:
    """Adam on ``steps`` sampled batches; see the module docstring for what is logged. The gradient variance's
    ``variance_draws`` batches come from ``probe_generator`` (needed when ``variance_draws`` > 0)."""
    if variance_draws and probe_generator is None:
        raise ValueError("probe_generator is needed to measure the gradient variance (variance_draws > 0), so that "
                         "measuring leaves the training stream untouched")
    adjacency = data.graph.adjacency()
    history = None
    if sampler.uses_history:
        history = History(model.num_layers, data.num_nodes, model.hidden)
        history.fill(model.exact_pass(data.x, adjacency)[0])
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    log = TrainLog()
    for step in progress(range(steps + 1), desc):
        t0 = time.perf_counter()
        sampler.refresh(model, data, history, step)  # MVS-GNN's checkpoint every K steps; a no-op elsewhere
        log.time_refresh += time.perf_counter() - t0
        if step % log_every == 0 or step == steps:
            row = {"step": step, **evaluate(model, data, adjacency)}
            if variance_draws:
                row["grad_variance"] = gradient_variance(model, data, copy.copy(sampler), history, adjacency,
                                                         probe_generator, variance_draws)
            log.rows.append(row)
        if step == steps:
            break
        t1 = time.perf_counter()
        batch = sampler.sample(generator)
        t2 = time.perf_counter()
        optimizer.zero_grad()
        logits = model(data.x, batch, history)
        weighted_loss(logits, data.y[batch.output_ids], batch.loss_weight).backward()
        optimizer.step()
        log.time_sample += t2 - t1
        log.time_train += time.perf_counter() - t2
    return log
