"""The three GEMMs of a projection that reads a dropped hidden state, timed one by one in every form
(Sarma et al., Sec. 3).

For a sequence ``X`` (T steps, batch B, width H) feeding a weight ``W`` (N x H, stored as ``W^T``, H x N, as
:mod:`mlsysrepro.recurrent.lstm` stores it) through a batch-shared mask re-drawn every ``s`` steps (k kept
neurons), each stage (forward, backward-data, backward-weight) has three exact forms in :mod:`.compaction`:
``dense`` (the masked full-width GEMM over all T B rows, what cases I and II need), ``per-draw`` (T/s GEMMs of the
kept width, one per draw) and ``batched`` (the same GEMMs in one ``torch.bmm`` over a gathered (T/s, k, N) weight).

:func:`time_stages` times the three forms of each stage on the same data, in this process, in interleaved rounds,
and gives each compacted form's speed-up over the dense one beside the ideal ``H / k = 1 / (1 - p)``, gathers and
scatters included (the ideal ignores them). With ``s = 1`` (the paper's case III) a compacted GEMM has B rows where
the dense one has T B: each re-reads its gathered weight and, on a 2-core CPU, runs at a fraction of the large
GEMM's rate, which is where the measured speed-up falls short of the ideal.
"""

from __future__ import annotations

import torch

from ..core.timing import interleaved
from .compaction import BACKWARD_DATA, BACKWARD_WEIGHT, FORWARD, STAGE_FORMS, STAGES
from .masks import kept_indices


def stage_calls(x, indices, w_t, dy, scale: float, period: int = 1) -> dict[str, dict[str, callable]]:
    """``{stage: {form: callable}}``: every form of the three GEMMs of one compacted projection."""
    hidden = x.shape[2]
    return {
        "forward": {form: (lambda f=f: f(x, w_t, indices, scale, period)) for form, f in FORWARD.items()},
        "backward-data": {form: (lambda f=f: f(dy, w_t, indices, scale, period, hidden))
                          for form, f in BACKWARD_DATA.items()},
        "backward-weight": {form: (lambda f=f: f(x, dy, indices, scale, period))
                            for form, f in BACKWARD_WEIGHT.items()},
    }


def time_stages(steps: int, batch: int, hidden: int, out_dim: int, p: float, period: int = 1, repeats: int = 10,
                seed: int = 0, forms: tuple[str, ...] = STAGE_FORMS) -> list[dict]:
    """Median seconds per stage and form, with each form's speed-up over ``dense`` and the ideal speed-up.

    One row per (stage, form): ``seconds``, ``speedup`` (dense seconds / this form's) and ``ideal_speedup``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, batch, hidden, generator=g)
    w_t = torch.randn(hidden, out_dim, generator=g)
    dy = torch.randn(steps, batch, out_dim, generator=g)
    indices = kept_indices(steps, hidden, p, g, period)
    scale = hidden / indices.shape[1]
    calls = stage_calls(x, indices, w_t, dy, scale, period)
    rows = []
    for stage in STAGES:
        timed = interleaved({form: calls[stage][form] for form in dict.fromkeys(("dense", *forms))}, repeats)
        dense = timed["dense"].median
        rows += [{"stage": stage, "form": form, "p": p, "period": period, "batch": batch, "seconds": timing.median,
                  "speedup": dense / timing.median, "ideal_speedup": scale} for form, timing in timed.items()]
    return rows
