"""The embedding stage measured on this machine's CPU: torch's EmbeddingBag on a trace's batches, the CPU
analogues of the paper's GPU optimisations, and DLRM's time split between its embedding stage and the rest.

The paper's optimisations hide memory latency on a GPU. Their CPU counterparts, each computing the same pooled
sums (tested), are:

- ``sorted``: every bag's indices in ascending row order (done once, ahead of serving, as a preprocessing step
  can): neighbouring loads touch nearby rows, which the hardware prefetchers and the TLB reward;
- ``dedup``: each batch's unique rows gathered once into a compact block (``torch.unique``, timed), then pooled
  from it: every row is read from memory once per batch, the rest from cache;
- ``hot_first``: the table's rows permuted so that the hot rows (the artifact's pinned list) sit together at its
  start, ids remapped ahead of time: the hot set occupies the fewest pages and cache sets, the layout analogue of
  pinning them.

Software prefetch distance cannot be set from PyTorch on a CPU (Intel's IPEX exposes it, and is not installed
here), so it is measured only on a GPU. FBGEMM's table-batched embedding (``fbgemm-gpu-cpu``), the kernel
production DLRM uses, is the peer a user would pick; :func:`fbgemm_status` says whether it loads here.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..core.timing import Timing, interleaved

VARIANTS = ("baseline", "sorted", "dedup", "hot_first")


def make_weights(tables: int, rows: int, dim: int, seed: int) -> list[torch.Tensor]:
    """``tables`` float32 tables of ``rows`` x ``dim``, each N(0, 1) from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(rows, dim, generator=generator) for _ in range(tables)]


def sort_within_bags(indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Each bag's indices in ascending order (bags keep their places)."""
    bag = torch.bucketize(torch.arange(indices.numel()), offsets, right=True) - 1
    order = torch.argsort(bag * (int(indices.max()) + 1) + indices)
    return indices[order]


def hot_first_permutation(rows: int, hot: torch.Tensor) -> torch.Tensor:
    """``new_id[old_id]``: the hot rows first (in the list's order), then every other row in order."""
    hot = torch.unique(torch.as_tensor(hot, dtype=torch.int64), sorted=False)
    hot = hot[hot < rows]
    is_hot = torch.zeros(rows, dtype=torch.bool)
    is_hot[hot] = True
    order = torch.cat([hot, torch.nonzero(~is_hot).squeeze(1)])
    new_id = torch.empty(rows, dtype=torch.int64)
    new_id[order] = torch.arange(rows)
    return new_id


def dedup_bag(weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Sum-pooled bags from the batch's unique rows, each read from the table once."""
    unique, inverse = torch.unique(indices, return_inverse=True)
    return F.embedding_bag(inverse, weight[unique], offsets, mode="sum")


def stage_calls(weights: list[torch.Tensor], indices: torch.Tensor, offsets: torch.Tensor,
                hot: torch.Tensor) -> dict[str, Callable[[], list[torch.Tensor]]]:
    """One callable per variant of :data:`VARIANTS`, each pooling one batch through every table; the variants'
    preprocessing (sorting bags, permuting tables) is done here, once, outside what is timed."""
    sorted_indices = sort_within_bags(indices, offsets)
    new_id = hot_first_permutation(weights[0].shape[0], hot)
    permuted = []
    for weight in weights:
        table = torch.empty_like(weight)
        table[new_id] = weight
        permuted.append(table)
    remapped = new_id[indices]
    return {
        "baseline": lambda: [F.embedding_bag(indices, w, offsets, mode="sum") for w in weights],
        "sorted": lambda: [F.embedding_bag(sorted_indices, w, offsets, mode="sum") for w in weights],
        "dedup": lambda: [dedup_bag(w, indices, offsets) for w in weights],
        "hot_first": lambda: [F.embedding_bag(remapped, w, offsets, mode="sum") for w in permuted],
    }


def time_stage(weights: list[torch.Tensor], batches: list[tuple[torch.Tensor, torch.Tensor]], hot: torch.Tensor,
               repeats: int, variants: tuple[str, ...] = VARIANTS) -> dict[str, Timing]:
    """Seconds per batch of every variant, the batches' calls interleaved round by round (order alternating)."""
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise ValueError(f"variants must be among {VARIANTS}, got {sorted(unknown)}")
    calls = [stage_calls(weights, indices, offsets, hot) for indices, offsets in batches]

    def run(name: str) -> Callable[[], None]:
        return lambda: [c[name]() for c in calls]

    timings = interleaved({name: run(name) for name in variants}, repeats)
    return {name: Timing(tuple(s / len(batches) for s in t.samples)) for name, t in timings.items()}


def fbgemm_status() -> str:
    """"available" when FBGEMM's table-batched embedding loads beside this torch; otherwise why not."""
    try:
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (  # noqa: F401
            SplitTableBatchedEmbeddingBagsCodegen)
    except ImportError as error:
        return f"fbgemm_gpu is not installed ({error})"
    except OSError as error:
        return f"fbgemm_gpu is installed but its kernels do not load against torch {torch.__version__}: {error}"
    return "available"
