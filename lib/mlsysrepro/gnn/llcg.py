"""LLCG, PSGD-PA and GGS: distributed GNN training by periodic model averaging (Ramezani et al., ICLR 2022).

P machines each hold one part of the graph (:mod:`.partition`). A round ``r`` (Algorithm 1-2 of
the paper):

1. every machine loads the server's model and takes ``K_r`` Adam steps on mini-batches of its
   own training nodes (:meth:`Machine.train_round`);
2. the server averages the P models, weighted by each machine's number of training nodes
   (:func:`weighted_average`);
3. LLCG only: the server takes ``S`` Adam steps on mini-batches sampled from the *full* graph,
   the Global Server Correction (:meth:`Server.correct`) that removes PSGD-PA's residual error
   (Theorem 2 vs Theorem 1).

The methods differ only in the graph a machine samples from and in step 3:

- ``psgd_pa``: the local graph (cut edges dropped); one model down and one up per machine per round;
- ``ggs``: global graph sampling, the full graph from local seeds; every remote node an input
  layer reaches is a feature fetch, counted in bytes every step (DistDGL-like);
- ``llcg``: ``psgd_pa`` plus the server correction;
- ``single``: the reference, one machine on the full graph with batch ``P * B`` (= fully
  synchronous data-parallel SGD), no communication.

``K_r``: the paper's Algorithm 2 grows the local epoch, ``K_r = ceil(K rho^r)``
(``schedule="paper"``); the authors' code shrinks it, ``ceil(K / rho^r)`` (``"authors"``).

For a GCN the first layer reads ``P X``, computed once per graph (the features are fixed), so a
batch samples only the layers above it (:class:`.samplers.ExactFirstLayer`; ``exact_first_layer``).

Randomness is drawn per (round, machine) from :func:`round_seed`, never from a shared stream,
so the serial engine here and the distributed one (:mod:`.llcg_dist`) compute the same models.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch

from ..core import progress
from .datasets import GraphData
from .models import build_model
from .partition import Partitioning
from .samplers import ExactFirstLayer, FullNeighborhood, NodeWise, UniformBatches, aggregate_features
from .training import evaluate, weighted_loss

METHODS = ("single", "psgd_pa", "ggs", "llcg")
SCHEDULES = ("paper", "authors")
FLOAT_BYTES = 4


@dataclass(frozen=True)
class LLCGConfig:
    """One run's knobs. ``fanout=None`` samples every neighbour; so does ``server_fanout=None``."""

    method: str = "llcg"
    rounds: int = 30
    local_steps: int = 8  # K
    rho: float = 1.0
    schedule: str = "paper"
    batch_size: int = 64  # local mini-batch (seed nodes)
    fanout: int | None = 10
    server_steps: int = 1  # S
    server_batch: int = 256
    server_fanout: int | None = 10
    lr: float = 0.01
    server_lr: float = 0.01
    model: str = "gcn"
    hidden: int = 64
    num_layers: int = 2
    dropout: float = 0.0
    exact_first_layer: bool = True  # GCN only: aggregate the fixed features once, sample the layers above

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        for name in ("rounds", "local_steps", "batch_size", "server_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.server_steps < 0 or self.rho < 1.0:
            raise ValueError(f"server_steps must be >= 0 and rho >= 1, got {self.server_steps}, {self.rho}")

    def steps_in_round(self, r: int) -> int:
        """``K_r``: ``ceil(K rho^r)`` (paper, Alg. 2) or ``ceil(K / rho^r)`` (the authors' code)."""
        factor = self.rho**r if self.schedule == "paper" else self.rho**-r
        return max(1, math.ceil(self.local_steps * factor - 1e-9))

    def to_dict(self) -> dict:
        return asdict(self)


def round_seed(seed: int, r: int, who: int) -> int:
    """The seed of machine ``who`` (-1: the server) in round ``r``."""
    return (seed * 1_000_003 + r * 10_007 + who + 2) % (2**62)


def weighted_average(states: list[dict[str, torch.Tensor]], weights) -> dict[str, torch.Tensor]:
    """``sum_p w_p theta_p / sum_p w_p`` for every entry of the state dicts (the server's step 2)."""
    w = torch.as_tensor(weights, dtype=torch.float64)
    if w.numel() != len(states) or bool((w < 0).any()) or float(w.sum()) <= 0:
        raise ValueError(f"need one non-negative weight per state with a positive sum, got {w.tolist()}")
    w = (w / w.sum()).tolist()
    return {k: sum(wp * s[k].double() for wp, s in zip(w, states)).to(states[0][k].dtype) for k in states[0]}


def flatten(state: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in state.values()])


def unflatten(vector: torch.Tensor, like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out, start = {}, 0
    for k, t in like.items():
        out[k] = vector[start:start + t.numel()].view_as(t).clone()
        start += t.numel()
    return out


def state_bytes(state: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in state.values())


def make_model(cfg: LLCGConfig, data: GraphData, seed: int) -> torch.nn.Module:
    """The model every replica starts from: initialised from ``seed`` alone."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build_model(cfg.model, data.x.shape[1], cfg.hidden, data.num_classes, cfg.num_layers, cfg.dropout)


def uses_exact_first_layer(cfg: LLCGConfig) -> bool:
    return cfg.exact_first_layer and cfg.model == "gcn"


def make_sampler(data: GraphData, cfg: LLCGConfig, fanout: int | None, batch_size: int, train_idx=None):
    """Uniform seeds from ``train_idx`` with ``fanout`` neighbours per layer (``None``: all of them);
    for a GCN with ``exact_first_layer``, the first layer is exact (:class:`.samplers.ExactFirstLayer`)."""
    exact = uses_exact_first_layer(cfg)
    layers = cfg.num_layers - 1 if exact else cfg.num_layers
    builder = FullNeighborhood(data.graph, layers) if fanout is None else NodeWise(data.graph, layers, fanout)
    builder = ExactFirstLayer(builder) if exact else builder
    return UniformBatches(builder, data.train_idx if train_idx is None else train_idx, batch_size)


def model_inputs(data: GraphData, cfg: LLCGConfig) -> torch.Tensor:
    """What a batch's first layer reads: ``P X`` under :func:`uses_exact_first_layer`, else ``X``."""
    return aggregate_features(data.graph, data.x) if uses_exact_first_layer(cfg) else data.x


def adam_steps(model, optimizer, sampler, x, y, steps: int, seed: int, on_batch=None) -> None:
    """``steps`` Adam steps on ``sampler``'s mini-batches, every random draw (batches, dropout) from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout
        for _ in range(steps):
            batch = sampler.sample(generator)
            if on_batch is not None:
                on_batch(batch)
            optimizer.zero_grad()
            weighted_loss(model(x, batch), y[batch.output_ids], batch.loss_weight).backward()
            optimizer.step()


def detached_state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class Machine:
    """One worker: its graph, a model replica and an Adam state that persists across rounds (as in
    the authors' code). ``remote`` marks the nodes of ``data`` it does not own (GGS's fetches)."""

    def __init__(self, data: GraphData, train_idx: torch.Tensor, cfg: LLCGConfig, batch_size: int,
                 remote: torch.Tensor | None, seed: int):
        self.data, self.cfg, self.remote = data, cfg, remote
        self.model = make_model(cfg, data, seed)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, foreach=True)
        self.sampler = make_sampler(data, cfg, cfg.fanout, batch_size, train_idx) if train_idx.numel() else None
        self.x = model_inputs(data, cfg)
        self.feature_bytes = data.x.shape[1] * FLOAT_BYTES
        self.exact_first_layer = uses_exact_first_layer(cfg)

    def remote_inputs(self, batch) -> int:
        """Remote nodes whose features the batch's first layer reads (GGS): with an exact first
        layer, every full-graph neighbour of its dst nodes."""
        nodes = batch.src_ids[0]
        if self.exact_first_layer:
            seen = torch.zeros(self.data.num_nodes, dtype=torch.bool)
            seen[self.data.graph.row_slice(nodes)[1]] = True
            return int((seen & self.remote).sum())
        return int(self.remote[nodes].sum())

    def train_round(self, state: dict, steps: int, seed: int) -> tuple[dict, int]:
        """Load ``state``, take ``steps`` local steps; returns the new state and the bytes of remote features read."""
        self.model.load_state_dict(state)
        if self.sampler is None:  # a machine without training nodes sends the model back unchanged
            return detached_state(self.model), 0
        fetched = []
        count = None if self.remote is None else (lambda batch: fetched.append(self.remote_inputs(batch)))
        adam_steps(self.model, self.optimizer, self.sampler, self.x, self.data.y, steps, seed, count)
        return detached_state(self.model), sum(fetched) * self.feature_bytes


class Server:
    """Averages the machines' models, corrects on the full graph (LLCG) and evaluates."""

    def __init__(self, data: GraphData, cfg: LLCGConfig, seed: int):
        self.data, self.cfg = data, cfg
        self.model = make_model(cfg, data, seed)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.server_lr, foreach=True)
        self.sampler = make_sampler(data, cfg, cfg.server_fanout, cfg.server_batch)
        self.x = model_inputs(data, cfg)
        self.adjacency = data.graph.adjacency()

    def initial_state(self) -> dict:
        return detached_state(self.model)

    def correct(self, state: dict, steps: int, seed: int) -> dict:
        """Global Server Correction: ``steps`` Adam steps on full-graph mini-batches (Alg. 1, lines 10-13)."""
        self.model.load_state_dict(state)
        adam_steps(self.model, self.optimizer, self.sampler, self.x, self.data.y, steps, seed)
        return detached_state(self.model)

    def evaluate(self, state: dict) -> dict[str, float]:
        """Full-graph training loss and validation/test scores of the global model."""
        self.model.load_state_dict(state)
        return evaluate(self.model, self.data, self.adjacency)


def build_machines(data: GraphData, partitioning: Partitioning, cfg: LLCGConfig, seed: int) -> list[Machine]:
    """The P workers of ``cfg.method``: local graphs (PSGD-PA, LLCG) or the full graph from local seeds (GGS)."""
    if cfg.method == "single":
        return [Machine(data, data.train_idx, cfg, cfg.batch_size * partitioning.num_parts, None, seed)]
    if cfg.method == "ggs":
        in_part = [torch.isin(data.train_idx, n) for n in partitioning.nodes]
        return [Machine(data, data.train_idx[mask], cfg, cfg.batch_size, partitioning.parts != p, seed)
                for p, mask in enumerate(in_part)]
    return [Machine(local, local.train_idx, cfg, cfg.batch_size, None, seed) for local in partitioning.local]


def bytes_per_round(data: GraphData, partitioning: Partitioning, cfg: LLCGConfig, seed: int = 0) -> dict[str, int]:
    """What one round of ``cfg.method`` sends, counted without training: the model down to and up from every
    machine, and for GGS the remote features its first round's mini-batches read on every machine (drawn from
    the same seeds as :func:`run_serial`'s round 1). Bytes depend on the samplers and the model's size only,
    so a paper-sized configuration is counted in seconds."""
    machines = build_machines(data, partitioning, cfg, seed)
    model = 0 if cfg.method == "single" else 2 * len(machines) * state_bytes(machines[0].model.state_dict())
    features = 0
    for p, machine in enumerate(machines):
        if machine.remote is None or machine.sampler is None:
            continue
        generator = torch.Generator().manual_seed(round_seed(seed, 1, p))
        batches = (machine.sampler.sample(generator) for _ in range(cfg.steps_in_round(0)))
        features += sum(machine.remote_inputs(batch) for batch in batches) * machine.feature_bytes
    return {"model_bytes": model, "feature_bytes": features}


def average_weights(partitioning: Partitioning, cfg: LLCGConfig) -> torch.Tensor:
    """Each machine's training-set size (the single machine: 1)."""
    return torch.ones(1) if cfg.method == "single" else partitioning.train_sizes()


def log_row(r: int, metrics: dict, model_bytes: int, feature_bytes: int, seconds: float) -> dict:
    return {"round": r, **metrics, "model_bytes": model_bytes, "feature_bytes": feature_bytes,
            "bytes": model_bytes + feature_bytes, "seconds": seconds}


def run_serial(data: GraphData, partitioning: Partitioning, cfg: LLCGConfig, seed: int = 0,
               desc: str | None = None):
    """All P machines in this process, one after the other. Returns the per-round log (a DataFrame:
    round 0 is the initial model) and the final global state."""
    import pandas as pd

    server = Server(data, cfg, seed)
    machines = build_machines(data, partitioning, cfg, seed)
    weights = average_weights(partitioning, cfg)
    state = server.initial_state()
    per_model = state_bytes(state)
    rows = [log_row(0, server.evaluate(state), 0, 0, 0.0)]
    for r in progress(range(1, cfg.rounds + 1), desc or cfg.method):
        t0 = time.perf_counter()
        steps = cfg.steps_in_round(r - 1)
        results = [m.train_round(state, steps, round_seed(seed, r, p)) for p, m in enumerate(machines)]
        state = weighted_average([s for s, _ in results], weights)
        if cfg.method == "llcg":
            state = server.correct(state, cfg.server_steps, round_seed(seed, r, -1))
        # one model down to and one up from every machine; nothing moves for the single machine
        model_bytes = 0 if cfg.method == "single" else 2 * len(machines) * per_model
        seconds = time.perf_counter() - t0
        rows.append(log_row(r, server.evaluate(state), model_bytes, sum(b for _, b in results), seconds))
    return pd.DataFrame(rows), state
