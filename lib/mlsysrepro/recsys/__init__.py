"""Recommendation inference: DLRM, its embedding tables, embedding-access traces and the memory models that time
them (the GPU embedding-stage paper, and PIFS-Rec's CXL host-switch-devices model)."""
