"""Stall-centric profiling of distributed training: serves "Analysis of Distributed Deep Learning in the Cloud"
(Sharma, Bhasi, Singh et al., arXiv 2208.14344; Stash), which extends DS-Analyzer (Mohan et al., VLDB 2021).

Public entry points:

- :func:`.profiler.profile` — RUN0-RUN3 of DS-Analyzer's differential method on real DDP processes (gloo on
  127.0.0.1, or NCCL), per-iteration data / forward / backward / step / communication times; ``python -m
  mlsysrepro.ddl.profiler`` under ``torchrun`` on real machines;
- :class:`.emulation.EmulatedCluster` and :func:`.emulation.emulated_allreduce_hook` — a DDP communication hook
  that adds an emulated instance's hierarchical all-reduce time (:mod:`.links`) per gradient bucket;
- :mod:`.stalls` — prep, fetch (both definitions), interconnect and network stalls from seconds per iteration;
- :mod:`.instances` — the AWS p2 / p3 catalogue, on-demand and spot prices, and the time dilation;
- :func:`.recommend.recommend` — the cheapest configuration that meets a time budget;
- :mod:`.macro` — communication stall against layers, gradient tensors and bytes (least-squares fits);
- :mod:`.models` and :mod:`.data` — the ResNet / VGG depth families (from :mod:`mlsysrepro.vision.cnn`) and an LSTM
  LM; MNIST as PNG files on disk with page-cache control.

The paper's presets, profiling campaign and figures are :mod:`mlsysrepro.papers.ddl_stalls`.
"""
