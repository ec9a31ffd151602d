"""Sparsity that training can exploit: dropout masks and the GEMMs they shrink, and the zeros ReLU leaves in a CNN's
training step. Serves structured dropout for RNNs (Sarma et al., NeurIPS 2021) and gradient output sparsity in CNN
backpropagation (Sarma et al., arXiv 2021).

Public entry points:

- :func:`.masks.dropout_mask` — the structured-dropout paper's four mask cases (Fig. 1) plus no dropout, and
  :func:`.masks.kept_indices` for the batch-shared cases;
- :mod:`.forms` — the forward, backward-data and backward-weight GEMMs of a projection that reads a batch-shared
  dropped input, each in three exact forms (per-draw, batched, dense);
- :mod:`.gemm_timing` — those forms timed, dense-masked against compacted (:func:`.gemm_timing.time_stages`), and
  the fastest form of each GEMM for a shape (:func:`.gemm_timing.fastest_forms`);
- :mod:`.compaction` — :func:`.compaction.masked_projection`: ``(x * mask) W^T`` computed at the kept width when
  the mask is batch-shared, through a kernel that picks a form per GEMM (:data:`.compaction.KERNELS`, ``auto``
  among them);
- :class:`.activations.Recorder` — one training step's ReLU masks, gradients and convolution operands, by hooks;
- :mod:`.pe_array` — MACs per output of every convolution pass and a PE array's cycles, dense, input-sparse and
  input + output sparse;
- :mod:`.output_sparse` — a convolution's data gradient computed only where the forward mask needs it.
"""
