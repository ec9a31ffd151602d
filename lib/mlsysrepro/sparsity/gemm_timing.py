"""The three GEMMs of a projection that reads a dropped hidden state, timed one by one in every form, and the
fastest form of each picked for a shape (Sarma et al., Sec. 3).

For a sequence ``X`` (T steps, batch B, width H) feeding a weight ``W`` (N x H, stored as ``W^T``, H x N, as
:mod:`mlsysrepro.recurrent.lstm` stores it) through a batch-shared mask re-drawn every ``s`` steps (k kept
neurons), each stage (forward, backward-data, backward-weight) has three exact forms in :mod:`.forms`:
``dense`` (the masked full-width GEMM over all T B rows, what cases I and II need), ``per-draw`` (T/s GEMMs of the
kept width, one per draw) and ``batched`` (the same GEMMs in one ``torch.bmm`` over a gathered (T/s, k, N) weight).

:func:`time_stages` times the three forms of each stage on the same data, in this process, in interleaved rounds,
and gives each compacted form's speed-up over the dense one beside the ideal ``H / k = 1 / (1 - p)``, gathers and
scatters included (the ideal ignores them). With ``s = 1`` (the paper's case III) a compacted GEMM has B rows where
the dense one has T B: each re-reads its gathered weight and, on a 2-core CPU, runs at a fraction of the large
GEMM's rate, which is where the measured speed-up falls short of the ideal.

Which form wins depends on the machine and the shape, so :func:`fastest_forms` measures them: the first time a
shape is asked for, it times every form of every stage on random data of that shape and keeps the fastest form of
each, for the rest of the process (what ``torch.backends.cudnn.benchmark`` does for cuDNN's convolution algorithms).
The ``auto`` kernel of :mod:`.compaction` runs on it.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..core.timing import interleaved
from .forms import STAGE_FORMS, STAGES, stage_calls
from .masks import kept_indices


def time_stages(steps: int, batch: int, hidden: int, out_dim: int, p: float, period: int = 1, repeats: int = 10,
                seed: int = 0, forms: tuple[str, ...] = STAGE_FORMS, dtype: torch.dtype = torch.float32,
                device: torch.device | str = "cpu") -> list[dict]:
    """Median seconds per stage and form, with each form's speed-up over ``dense`` and the ideal speed-up.

    One row per (stage, form): ``seconds``, ``speedup`` (dense seconds / this form's) and ``ideal_speedup``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, batch, hidden, generator=g, dtype=dtype).to(device)
    w_t = torch.randn(hidden, out_dim, generator=g, dtype=dtype).to(device)
    dy = torch.randn(steps, batch, out_dim, generator=g, dtype=dtype).to(device)
    indices = kept_indices(steps, hidden, p, g, period).to(device)
    scale = hidden / indices.shape[1]
    calls = stage_calls(x, indices, w_t, dy, scale, period)
    rows = []
    for stage in STAGES:
        timed = interleaved({form: calls[stage][form] for form in dict.fromkeys(("dense", *forms))}, repeats,
                            device=device)
        dense = timed["dense"].median
        rows += [{"stage": stage, "form": form, "p": p, "period": period, "batch": batch, "seconds": timing.median,
                  "speedup": dense / timing.median, "ideal_speedup": scale} for form, timing in timed.items()]
    return rows


#: The fastest form of each stage per shape measured in this process (:func:`fastest_forms`), by shape.
_FASTEST: dict[tuple, tuple[str, str, str]] = {}
#: Rounds each form is timed in when a shape is first met (after one untimed warm-up; the median decides).
TUNING_REPEATS = 5


def fastest_forms(steps: int, batch: int, width: int, out_dim: int, kept: int, period: int,
                  dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                  timer: Callable[..., list[dict]] = time_stages) -> tuple[str, str, str]:
    """The fastest (forward, backward-data, backward-weight) forms of :data:`.forms.STAGE_FORMS` for a projection of
    this shape (``kept`` of ``width`` input neurons kept per draw of ``period`` steps), on this machine.

    Measured with ``timer`` (:func:`time_stages`, :data:`TUNING_REPEATS` rounds) the first time the shape is met
    and remembered for the rest of the process; a tie goes to the form listed first in :data:`.forms.STAGE_FORMS`.
    """
    key = (steps, batch, width, out_dim, kept, period, dtype, str(torch.device(device)))
    if key not in _FASTEST:
        rows = timer(steps, batch, width, out_dim, 1 - kept / width, period, repeats=TUNING_REPEATS, dtype=dtype,
                     device=device)
        seconds = {(r["stage"], r["form"]): r["seconds"] for r in rows}
        _FASTEST[key] = tuple(min(STAGE_FORMS, key=lambda form: (seconds[stage, form], STAGE_FORMS.index(form)))
                              for stage in STAGES)
    return _FASTEST[key]


def tuned_shapes() -> list[dict]:
    """Every shape :func:`fastest_forms` has measured in this process, with the form it picked for each stage."""
    names = ("steps", "batch", "width", "out_dim", "kept", "period")
    return [{**dict(zip(names, key[:6])), "dtype": str(key[6]).removeprefix("torch."), "device": key[7],
             **dict(zip(STAGES, forms))} for key, forms in _FASTEST.items()]
