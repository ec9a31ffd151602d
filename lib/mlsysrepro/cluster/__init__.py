"""GPU-cluster scheduling: serves Dally, "GPU Cluster Scheduling for Network-Sensitive Deep Learning" (Sharma,
Bhasi et al., arXiv 2401.16492).

Public entry points so far:

- :class:`.topology.Topology`: racks -> machines -> GPUs, a link per level, the placement level of a set of
  GPUs and the hierarchical ring all-reduce time over them;
- :func:`.model_sizes.gradient_bytes`: a model's all-reduce volume, from parameter counts computed layer by layer.

Not built yet (issue 6 is open): the event-driven simulator, the jobs and trace loaders, the policies
(admission, ordering, placement), the metrics, the notebook and its figures.
"""
