"""The samplers by name: one registry that experiments, benchmarks and a user's own sampler share.

A sampler is anything with the two calls of :class:`Sampler`; a *factory* builds one for a graph from
:class:`SamplerOptions` and a generator. :func:`register` adds a factory under a name, :func:`make_sampler` builds
one by name (a ValueError lists the registered names). The collection registers, set up as in MVS-GNN's Sec. 5
(every sampler gets about ``batch_size`` training nodes per step: the node-wise samplers take ``batch_size``
seeds, Cluster-GCN and GraphSAINT sample ``batch_size * N / |train|`` nodes, MVS-GNN's Bernoulli batches have
expected size ``batch_size``):

=======================  ==============================================================================
``MVS-GNN``              minimal-variance node selection, one-hop batch graph with history (:mod:`.mvs`)
``MVS (all neighbours)`` minimal-variance node selection, exact L-hop neighbourhoods
``UNS``                  uniform node selection, exact L-hop neighbourhoods
``GraphSAGE``            uniform seeds, ``fanout`` neighbours per node
``VR-GCN``               uniform seeds, ``vrgcn_fanout`` neighbours and VR-GCN's control variate
``LADIES``, ``FastGCN``  uniform seeds, ``batch_size`` layer-wise draws per layer
``Cluster-GCN``          METIS clusters of ``cluster_size`` nodes (:mod:`.subgraph`)
``GraphSAINT``           GraphSAINT's node sampler with its normalisations (:mod:`.subgraph`)
=======================  ==============================================================================

A new sampler is a factory away::

    @register("my-sampler")
    def my_sampler(data, options, generator):
        return UniformBatches(MyBuilder(data.graph, options.num_layers), data.train_idx, options.batch_size)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

import torch

from .batch import Batch
from .datasets import GraphData
from .mvs import MVSSampler
from .samplers import VRGCN, FullNeighborhood, LayerWise, NodeWise, OneHopHistory, UniformBatches
from .subgraph import ClusterGCN, SaintNode


@runtime_checkable
class Sampler(Protocol):
    """What training calls: a mini-batch, and a hook after each step (MVS-GNN's checkpoint; a no-op elsewhere)."""

    def sample(self, generator: torch.Generator) -> Batch: ...

    def refresh(self, model, data: GraphData, history, step: int) -> None: ...


@dataclass(frozen=True)
class SamplerOptions:
    """Every knob a registered sampler reads; each factory takes the ones it needs."""

    batch_size: int
    num_layers: int
    fanout: int = 5  # GraphSAGE neighbours per node
    vrgcn_fanout: int = 2  # VR-GCN neighbours per node
    cluster_size: int = 128  # Cluster-GCN nodes per METIS cluster
    gamma: float = 1.0  # MVS-GNN: share of training nodes in each checkpoint
    inner_steps: int = 20  # MVS-GNN: K, iterations between checkpoints


Factory = Callable[[GraphData, SamplerOptions, torch.Generator], Sampler]
REGISTRY: dict[str, Factory] = {}


def register(name: str) -> Callable[[Factory], Factory]:
    """Decorator: add ``factory`` to the registry under ``name`` (a name is registered once)."""

    def add(factory: Factory) -> Factory:
        if name in REGISTRY:
            raise ValueError(f"a sampler named {name!r} is already registered")
        REGISTRY[name] = factory
        return factory

    return add


def make_sampler(name: str, data: GraphData, options: SamplerOptions, generator: torch.Generator) -> Sampler:
    """The sampler registered as ``name`` for ``data``."""
    if name not in REGISTRY:
        raise ValueError(f"unknown sampler {name!r}; registered: {list(REGISTRY)}")
    return REGISTRY[name](data, options, generator)


def nodes_per_batch(data: GraphData, batch_size: int) -> int:
    """Nodes a subgraph sampler draws so that about ``batch_size`` of them are training nodes."""
    return min(data.num_nodes, max(1, round(batch_size * data.num_nodes / data.train_idx.numel())))


@register("MVS-GNN")
def _mvs_gnn(data, options, generator):
    return MVSSampler(OneHopHistory(data.graph, options.num_layers), data.train_idx, options.batch_size,
                      options.gamma, options.inner_steps, generator)


@register("MVS (all neighbours)")
def _mvs_all_neighbours(data, options, generator):
    return MVSSampler(FullNeighborhood(data.graph, options.num_layers), data.train_idx, options.batch_size,
                      options.gamma, options.inner_steps, generator)


@register("UNS")
def _uniform(data, options, generator):
    return UniformBatches(FullNeighborhood(data.graph, options.num_layers), data.train_idx, options.batch_size)


@register("GraphSAGE")
def _graphsage(data, options, generator):
    return UniformBatches(NodeWise(data.graph, options.num_layers, options.fanout), data.train_idx,
                          options.batch_size)


@register("VR-GCN")
def _vrgcn(data, options, generator):
    return UniformBatches(VRGCN(data.graph, options.num_layers, options.vrgcn_fanout), data.train_idx,
                          options.batch_size)


@register("LADIES")
def _ladies(data, options, generator):
    builder = LayerWise(data.graph, options.num_layers, options.batch_size, "ladies", renormalise=True)
    return UniformBatches(builder, data.train_idx, options.batch_size)


@register("FastGCN")
def _fastgcn(data, options, generator):
    return UniformBatches(LayerWise(data.graph, options.num_layers, options.batch_size, "fastgcn"), data.train_idx,
                          options.batch_size)


@register("Cluster-GCN")
def _cluster_gcn(data, options, generator):
    clusters = max(2, data.num_nodes // options.cluster_size)
    per_batch = min(clusters, max(1, round(nodes_per_batch(data, options.batch_size) / options.cluster_size)))
    return ClusterGCN(data.graph, data.train_idx, options.num_layers, clusters, per_batch)


@register("GraphSAINT")
def _graphsaint(data, options, generator):
    return SaintNode(data.graph, data.train_idx, options.num_layers, nodes_per_batch(data, options.batch_size),
                     generator)
