"""Sparsity that training can exploit: dropout masks and the GEMMs they shrink. Serves structured dropout for RNNs
(Sarma et al., NeurIPS 2021) and, next, gradient-output sparsity in CNN backpropagation.

Public entry points:

- :func:`.masks.dropout_mask` — the structured-dropout paper's four mask cases (Fig. 1) plus no dropout, and
  :func:`.masks.kept_indices` for the batch-shared cases;
- :mod:`.compaction` — :func:`.compaction.masked_projection`: ``(x * mask) W^T`` computed at the kept width when
  the mask is batch-shared (:class:`.compaction.CompactProjection`, forward and both backward GEMMs);
- :mod:`.gemm_timing` — forward, backward-data and backward-weight GEMMs timed, dense-masked against compacted.
"""
