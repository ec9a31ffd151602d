"""The sampler registry: every sampler by name, set up from one options object; new samplers plug in."""

import pytest
import torch

from mlsysrepro.gnn import registry
from mlsysrepro.gnn.mvs import MVSSampler
from mlsysrepro.gnn.samplers import NodeWise, OneHopHistory, UniformBatches
from mlsysrepro.gnn.subgraph import ClusterGCN

from .conftest import toy_data


def test_the_collection_registers_the_papers_samplers():
    assert set(registry.REGISTRY) == {"MVS-GNN", "MVS (all neighbours)", "UNS", "GraphSAGE", "VR-GCN", "LADIES",
                                      "FastGCN", "Cluster-GCN", "GraphSAINT"}


def test_factories_read_their_knobs_from_the_options():
    data, generator = toy_data(120, 400, seed=3), torch.Generator().manual_seed(0)
    options = registry.SamplerOptions(batch_size=16, num_layers=2, fanout=3, cluster_size=20, gamma=0.5,
                                      inner_steps=7)
    sage = registry.make_sampler("GraphSAGE", data, options, generator)
    assert isinstance(sage, UniformBatches) and isinstance(sage.builder, NodeWise) and sage.builder.fanout == 3
    mvs = registry.make_sampler("MVS-GNN", data, options, generator)
    assert isinstance(mvs, MVSSampler) and isinstance(mvs.builder, OneHopHistory) and mvs.inner_steps == 7
    cluster = registry.make_sampler("Cluster-GCN", data, options, generator)
    assert registry.nodes_per_batch(data, 16) == round(16 * 120 / data.train_idx.numel()) == 32
    assert isinstance(cluster, ClusterGCN) and cluster.num_clusters <= 120 // 20
    assert cluster.q == round(32 / 20)  # clusters per batch: about batch_size training nodes
    for name in registry.REGISTRY:
        assert isinstance(registry.make_sampler(name, data, options, generator), registry.Sampler)


def test_a_registered_sampler_is_made_by_name_and_names_are_unique():
    @registry.register("first-seeds-for-test")
    def first_seeds(data, options, generator):
        return UniformBatches(NodeWise(data.graph, options.num_layers, 1), data.train_idx[:4], options.batch_size)

    try:
        sampler = registry.make_sampler("first-seeds-for-test", toy_data(), registry.SamplerOptions(4, 2), None)
        assert set(sampler.sample(torch.Generator().manual_seed(0)).src_ids[-1][:4].tolist()) <= \
            set(toy_data().train_idx[:4].tolist())
        with pytest.raises(ValueError, match="already registered"):
            registry.register("first-seeds-for-test")(first_seeds)
    finally:
        registry.REGISTRY.pop("first-seeds-for-test")
    with pytest.raises(ValueError, match=r"unknown sampler 'SAGE'; registered: \['MVS-GNN'"):
        registry.make_sampler("SAGE", toy_data(), registry.SamplerOptions(4, 2), None)
