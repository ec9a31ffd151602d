"""GPU-cluster scheduling: serves Dally, "GPU Cluster Scheduling for Network-Sensitive Deep Learning" (Sharma,
Bhasi et al., arXiv 2401.16492).

Public entry points:

- :func:`.simulator.simulate` — the discrete-event simulator: a trace on a topology under a policy ->
  :class:`.simulator.Run`;
- :func:`.policies.make_policy` — FIFO, SRSF, Tiresias (2D-LAS), Gandiva-like, Themis-like, Dally (auto-tuned and
  fixed timers), each an admission + ordering + placement;
- :func:`.traces.load` — the real traces of the data registry as :class:`.jobs.Trace` objects;
- :class:`.topology.Topology` — racks -> machines -> GPUs, placement levels, hierarchical ring all-reduce time;
- :func:`.model_sizes.gradient_bytes` — a model's all-reduce volume, from parameter counts computed layer by layer
  (the CNNs' in :mod:`mlsysrepro.vision.architectures`);
- :func:`.metrics.summary` and :func:`.metrics.check_invariants` — what a run measured, and what it must satisfy;
- :class:`.placement.Placement` — the contract of a placement policy (consolidating, delay scheduling);
- :func:`.examples.delay_example` — delay scheduling's worked example, checkable by hand.

Dally's presets and experiments are :mod:`mlsysrepro.papers.dally`.
"""
