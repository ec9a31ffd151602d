"""Graph learning: serves MVS-GNN (Cong et al., KDD 2020) and LLCG (Ramezani et al., ICLR 2022).

Public entry points:

- :func:`.datasets.load_graph` (Cora, CiteSeer, Tolokers, Minesweeper) and :func:`.datasets.contextual_sbm`;
- :class:`.graph.CSRGraph`: the graph with its row- or symmetric-normalised propagation matrix;
- :class:`.batch.Batch`: the one type every sampler returns and every model consumes;
- :class:`.models.GNN` (GCN or GraphSAGE, 1-8 layers, full graph or batch) and :class:`.models.History`;
  :func:`.models.build_model` adds GAT (:mod:`.gat`) and APPNP (:mod:`.appnp`);
- samplers: :mod:`.samplers` (UNS, GraphSAGE, FastGCN, LADIES, VR-GCN, MVS-GNN's one-hop-with-history),
  :mod:`.subgraph` (Cluster-GCN, GraphSAINT), :mod:`.mvs` (MVS-GNN's minimal-variance node sampling), each
  registered by name in :mod:`.registry` (:func:`.registry.make_sampler`, :func:`.registry.register`);
- :func:`.training.train` and :func:`.training.gradient_variance`;
- LLCG: :func:`.partition.partition_graph` (METIS or random machines), :func:`.llcg.run_serial` (single machine,
  PSGD-PA, GGS, LLCG in one process), :func:`.llcg_dist.run_distributed` (the same on ``torch.distributed``).

The two papers' presets and experiments are :mod:`mlsysrepro.papers.mvs_gnn` and :mod:`mlsysrepro.papers.llcg`.
"""

import warnings

# Sparse CSR products are what every layer runs; torch warns once per process that the CSR API is in beta.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
