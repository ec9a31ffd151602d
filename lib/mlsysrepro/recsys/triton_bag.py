"""The embedding bag as a Triton kernel: one program per bag, a row of ``dim`` floats per step, the bag's rows
summed in registers. The row loop runs to the longest bag's length, shorter bags masked, so its bounds are
compile-time constants (the artifact's bags all have the same length). Two launch knobs are the ones Triton gives where CUDA C has flags:

- ``num_warps``: threads per program (Triton's block size), which with the kernel's registers sets how many
  programs an SM holds, the occupancy that the paper's register cap raises;
- ``num_stages``: how many iterations of the row loop Triton's software pipeliner keeps in flight
  (``tl.range(..., num_stages=...)``), loads issued ahead of their use as in the paper's register prefetching.

L2 pinning and the register cap stay in the CUDA C kernels (:mod:`mlsysrepro.recsys.cuda_kernels`): Triton has
no per-address evict-last prefetch and no register cap. The kernel runs on CUDA, and on a CPU under Triton's
interpreter (``TRITON_INTERPRET=1``), which is how the tests check it against torch's EmbeddingBag without a GPU.
Triton is not a dependency: it ships with CUDA builds of torch.
"""

from __future__ import annotations

from functools import cache

import torch


@cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def bag_sum(indices, offsets, weight, output, dim, LONGEST: tl.constexpr, BLOCK: tl.constexpr,
                STAGES: tl.constexpr):
        bag = tl.program_id(0)
        begin = tl.load(offsets + bag)
        end = tl.load(offsets + bag + 1)
        columns = tl.arange(0, BLOCK)
        inside = columns < dim
        total = tl.zeros([BLOCK], dtype=tl.float32)
        for step in tl.range(0, LONGEST, num_stages=STAGES):  # the longest bag's length; shorter bags masked
            entry = begin + step
            live = entry < end
            row = tl.load(indices + entry, mask=live, other=0)
            total += tl.load(weight + row * dim + columns, mask=inside & live, other=0.0)
        tl.store(output + bag * dim + columns, total, mask=inside)

    return bag_sum


def available() -> bool:
    """Whether Triton can be imported here."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def embedding_bag(weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, num_warps: int = 4,
                  num_stages: int = 1) -> torch.Tensor:
    """Sum-pooled bags, as ``F.embedding_bag(indices, weight, offsets, mode="sum")`` (``offsets`` without the
    trailing total, as torch takes them)."""
    if num_warps not in (1, 2, 4, 8, 16):
        raise ValueError(f"num_warps must be one of (1, 2, 4, 8, 16), got {num_warps}")
    if num_stages < 1:
        raise ValueError(f"num_stages must be >= 1, got {num_stages}")
    if weight.dim() != 2 or weight.dtype != torch.float32:
        raise ValueError("weight must be a 2-D float32 tensor")
    bounds = torch.cat([offsets, torch.tensor([indices.numel()], device=offsets.device)]).to(torch.int64)
    output = torch.empty(offsets.numel(), weight.shape[1], device=weight.device, dtype=weight.dtype)
    block = 1 << max(0, (weight.shape[1] - 1).bit_length())
    longest = max(1, int((bounds[1:] - bounds[:-1]).max()))
    _kernel()[(offsets.numel(),)](indices.to(torch.int64), bounds, weight.contiguous(), output, weight.shape[1],
                                  LONGEST=longest, BLOCK=block, STAGES=num_stages, num_warps=num_warps)
    return output
