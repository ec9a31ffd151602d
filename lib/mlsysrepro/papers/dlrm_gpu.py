"""The experiments of the DLRM-on-GPUs notebook (Jain et al., MICRO 2024): presets and one function per figure.

- :func:`trace_table` — the four reuse datasets (two real, two stand-ins) on one footing, with Zipf fits;
- :func:`cpu_stage` — the embedding stage measured on this CPU for every trace, with the CPU analogues of the
  paper's optimisations, and :func:`check_variants` (they pool the same sums);
- :func:`dlrm_split` — DLRM's forward time split into its embedding stage and the rest, per trace (CPU);
- :func:`sensitivity` — the slowdown from high reuse to random over batch, pooling and dim (CPU);
- :func:`l2_study` — the A100 L2 model's hit rates per trace against pinned rows;
- :func:`model_study` — the A100 latency / parallelism model: occupancy against registers, the fitted baseline,
  and the predicted gains of the register cap, register prefetching, L2 pinning and all three;
- :func:`gpu_benchmark` — the same stage on CUDA (torch's EmbeddingBag, our kernels under every optimisation,
  DLRM end to end, and :func:`triton_sweep`: the Triton kernel over num_warps and pipelining stages), run by ``benchmarks/gpu_check.sh``; :func:`gpu_measured` reads its committed numbers;
- :data:`CLAIMS`, declared before the run, and their measurements.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from ..core import gpu_results
from ..core.claims import (ANALOGUE, CONSISTENCY, Assumption, Claim, Measurement, above, across, across_seeds, at_most,
                           is_true, not_testable)
from ..core.timing import Timing, interleaved, ratios
from ..recsys import cuda_kernels, traces
from ..recsys.dlrm import DLRM
from ..recsys.gpu_model import A100_40GB, Kernel, batch_lines, fit_latency_scale, stage_seconds
from ..recsys.l2 import MAPPINGS, pins_that_fit, row_hits
from ..recsys.occupancy import occupancy
from ..recsys.stage import VARIANTS, make_weights, stage_calls, time_stage

#: The embedding-only slowdown from the high-reuse trace to the random one that the paper reports (abstract: up to
#: 3.2x); the GPU model's one free constant is fitted to it, and to nothing else.
PAPER_SLOWDOWN = 3.2
HOT_ROWS = 60_000

DEFAULT = dict(
    tables=4, rows=500_000, dim=128, pooling=150, batch=2048, batches=2, repeats=7,
    batch_grid=[512, 2048], pooling_grid=[40, 150], dim_grid=[32, 128],
    dense_features=256, bottom=[128, 128], top=[128, 64, 1],
    model_batch=2048, model_batches=2, pinned_rows=[0, 15_000, 30_000, 60_000, 90_000], distances=[0, 2, 4, 8],
    register_cap=42,
)

PRESETS = {
    "smoke": dict(DEFAULT, tables=1, rows=100_000, pooling=40, batch=256, batches=1, repeats=3, batch_grid=[256],
                  pooling_grid=[20, 40], dim_grid=[128], bottom=[64, 128], top=[64, 1], model_batch=256,
                  model_batches=1, pinned_rows=[0, 60_000]),
    "default": DEFAULT,
    "paper": dict(DEFAULT, tables=12, batches=12, repeats=12, batch_grid=[256, 512, 1024, 2048],
                  pooling_grid=[20, 40, 80, 150], dim_grid=[32, 64, 128], model_batches=12),
}

RANGES = {"tables": (1, None), "rows": (1, None), "dim": (1, None), "pooling": (1, None), "batch": (1, None),
          "batches": (1, None), "repeats": (1, None), "batch_grid": (1, None), "pooling_grid": (1, None),
          "dim_grid": (1, None), "dense_features": (1, None), "bottom": (1, None), "top": (1, None),
          "model_batch": (1, None), "model_batches": (1, None), "pinned_rows": (0, None), "distances": (0, 8),
          "register_cap": (1, 255)}

#: How the A100 maps addresses to L2 sets and partitions, which NVIDIA does not publish: the L2 model's map, and
#: the range the model's predictions are also given over (:mod:`mlsysrepro.recsys.l2`).
L2_MAPPING = Assumption(
    "l2_mapping", "modulo", MAPPINGS, unit="address-to-set map",
    source="modulo: the textbook map; hashed: upper address bits offset the set index, as GPUs' L2 slice hashes do "
           "(NVIDIA Ampere whitepaper: addresses are hashed over the L2 slices); hashed_half: hashed, with an SM's "
           "accesses filling only its near 20 MB partition (the whitepaper's two-partition L2)")

PAPER_SETTING = {"tables": 12, "rows": 500_000, "dim": 128, "pooling": 150, "batch": 2048, "batches": 12}

#: The negative control of every GPU timing claim: an A/A run, the baseline timed against itself, which must show no
#: speed-up (the timer's own spread); and why those claims have no power check here.
AA_CONTROL = "an A/A run: the baseline kernel timed against itself, which must not show a speed-up"
NO_GPU = ("not measured here: no GPU measurement is committed (benchmarks/gpu_check.sh); a run there times the A/A "
          "control beside the claim")

CLAIMS = (
    Claim("C1", "The embedding stage slows as access reuse falls: up to 3.2x from the high-reuse trace to random "
          "(measured here on a CPU)", where="Abstract; Sec. 3 characterisation", paper_value=PAPER_SLOWDOWN,
          unit="embedding seconds per batch, random / high reuse", rule=above(1.0),
          over="every (batch, pooling, dim) of the sensitivity sweep, each over timing rounds", min_share=2 / 3,
          near=0.3, up_to=True, timing=True,
          kind=ANALOGUE),
    Claim("C2", "The same slowdown on a GPU (torch's EmbeddingBag, measured on CUDA)",
          where="Abstract; Sec. 3 characterisation", paper_value=PAPER_SLOWDOWN,
          unit="embedding seconds per batch on a GPU, random / high reuse", rule=above(1.0),
          over="the artifact's configuration on the GPU of the collection's GPU check", near=0.3, up_to=True,
          timing=True, control="the high-reuse trace against itself (an A/A run): no slowdown",
          no_power_check=NO_GPU),
    Claim("C3", "The embedding stage dominates DLRM inference time (measured here on a CPU)",
          where="Sec. 1 and 3 (embedding share of inference)", paper_value="most of the time",
          unit="embedding share of DLRM forward time", rule=above(0.5), over="every trace", min_share=2 / 3,
          timing=True,
          kind=ANALOGUE),
    Claim("C9", "The standard embedding kernel runs at low occupancy, limited by its registers (OptMT's premise)",
          where="Sec. on OptMT (characterisation of PyTorch's kernel)", paper_value="register-limited",
          unit="the A100 occupancy calculator's binding limit and share, for ptxas' registers of the baseline kernel",
          rule=is_true(), over="the baseline kernel in PyTorch 2.1's layout, compiled here for sm_80",
          kind=ANALOGUE),
    Claim("C4", "Capping registers (OptMT, -maxrregcount 42) speeds the embedding stage up: up to +53 %",
          where="Abstract; OptMT", paper_value=1.53, unit="embedding speed-up on a GPU, capped / baseline",
          rule=above(1.0), over="every trace, on a GPU", min_share=2 / 3, near=0.3, up_to=True, timing=True,
          assumptions=(L2_MAPPING,), control=AA_CONTROL,
          no_power_check=NO_GPU),
    Claim("C5", "Register prefetching (RPF, distance 2) speeds the embedding stage up",
          where="Sec. on software prefetching", paper_value="a speed-up",
          unit="embedding speed-up on a GPU, prefetching / baseline", rule=above(1.0), over="every trace, on a GPU",
          min_share=2 / 3, timing=True, assumptions=(L2_MAPPING,), control=AA_CONTROL,
          no_power_check=NO_GPU),
    Claim("C6", "Pinning the 60K hot rows in L2 (L2P, evict-last) speeds the embedding stage up",
          where="Sec. on L2 pinning", paper_value="a speed-up", unit="embedding speed-up on a GPU, pinned / baseline",
          rule=above(1.0), over="every trace, on a GPU", min_share=2 / 3, timing=True, assumptions=(L2_MAPPING,),
          control=AA_CONTROL, no_power_check=NO_GPU),
    Claim("C7", "All three together speed the embedding stage up by up to +103 %", where="Abstract; combined design",
          paper_value=2.03, unit="embedding speed-up on a GPU, combined / baseline", rule=above(1.0),
          over="every trace, on a GPU", min_share=2 / 3, near=0.3, up_to=True, timing=True,
          assumptions=(L2_MAPPING,), control=AA_CONTROL,
          no_power_check=NO_GPU),
    Claim("C8", "End to end, DLRM inference speeds up by up to +77 %", where="Abstract; end-to-end evaluation",
          paper_value=1.77, unit="DLRM forward speed-up on a GPU, combined / baseline", rule=above(1.0),
          over="every trace, on a GPU", min_share=2 / 3, near=0.3, up_to=True, timing=True, control=AA_CONTROL,
          no_power_check=NO_GPU),
    Claim("K1", "The high-reuse stand-in has the reuse of Meta's highest-reuse table (within 0.01)",
          where="consistency (trace stand-in)", paper_value=0.0, unit="|reuse - target reuse|", rule=at_most(0.01),
          over="the high-reuse stand-in", kind=CONSISTENCY),
    Claim("K2", "The GPU model gives the baseline slowdown it was fitted to (within 1 %)",
          where="consistency (model fit)", paper_value=0.0, unit="|modelled / paper slowdown - 1|",
          rule=at_most(0.01), over="the fitted A100 model", kind=CONSISTENCY),
    Claim("K3", "In the L2 model, pinned rows that fit their sets hit on every access",
          where="consistency (L2 model)", paper_value="every access", unit="all pinned accesses hit", rule=is_true(),
          over="every trace's batches with its hot rows pinned", kind=CONSISTENCY),
    Claim("K4", "Every CPU variant pools the same sums as torch's EmbeddingBag (within 1e-3)",
          where="consistency (CPU variants)", paper_value="same sums", unit="all variants agree", rule=is_true(),
          over="every trace's first batch", kind=CONSISTENCY),
)

GPU_VARIANTS = ("torch", "baseline", "register_cap", "prefetch", "pinning", "combined")


def trace_ids(settings, name: str) -> np.ndarray:
    return traces.load_trace(name, settings.seed, settings.rows)


def hot_rows(settings, name: str, ids: np.ndarray, count: int = HOT_ROWS) -> np.ndarray:
    """The ``count`` rows L2 pinning pins: the trace's most accessed rows (the artifact's 60K lists of the real
    traces are exactly their top 60K), except for random, where the artifact pinned rows of its own list (arbitrary
    rows: a uniform trace has no hot rows), taken in the list's order."""
    rows = traces.load_hot_rows("random")[:count] if name == "random" else traces.top_rows(ids, count)
    return rows[rows < settings.rows]


def trace_table(settings) -> pd.DataFrame:
    """Per trace: where it comes from, accesses, unique rows, reuse, the 60K hot rows' share of accesses, and the
    Zipf exponent whose expected reuse matches (with that Zipf's own top-60K share, a check of the family)."""
    rows = []
    for name in traces.TRACES:
        ids = trace_ids(settings, name)
        stats = traces.reuse_stats(ids, hot_rows(settings, name, ids), HOT_ROWS)
        exponent = traces.fit_zipf(settings.rows, ids.size, max(stats["reuse"], traces.expected_reuse(
            settings.rows, ids.size, 0.0)))
        fitted = traces.zipf_trace(settings.rows, ids.size, exponent, settings.seed)
        rows.append(dict(trace=name, source=traces.SOURCES[name], **stats, zipf_exponent=exponent,
                         zipf_top_share=traces.coverage(fitted, traces.top_rows(fitted, HOT_ROWS))))
    return pd.DataFrame(rows).set_index("trace")


def high_reuse_gap(settings) -> Measurement:
    """K1: how far the high-reuse stand-in's reuse is from its target's."""
    target = traces.high_reuse_target()
    reuse = traces.reuse_ratio(trace_ids(settings, "high"))
    return Measurement(abs(reuse - target.reuse), note=f"stand-in {reuse:.4f} against {target.name}'s "
                                                        f"{target.reuse:.4f}")


def _batches(settings, name, batch=None, pooling=None, count=None):
    ids = trace_ids(settings, name)
    return ids, traces.batches(ids, batch or settings.batch, pooling or settings.pooling, count or settings.batches)


def cpu_stage(settings) -> pd.DataFrame:
    """Seconds per batch of every CPU variant on every trace (``tables`` tables), one row per timing round."""
    weights = make_weights(settings.tables, settings.rows, settings.dim, settings.seed)
    frames = []
    for name in traces.TRACES:
        ids, batches = _batches(settings, name)
        timings = time_stage(weights, batches, torch.as_tensor(hot_rows(settings, name, ids)), settings.repeats)
        for variant, timing in timings.items():
            frames.append(pd.DataFrame({"trace": name, "variant": variant, "round": range(len(timing.samples)),
                                        "seconds": timing.samples}))
    return pd.concat(frames, ignore_index=True)


def check_variants(settings) -> Measurement:
    """K4: the largest difference between any CPU variant's pooled sums and the baseline's, per trace."""
    weights = make_weights(1, settings.rows, settings.dim, settings.seed)
    worst = 0.0
    for name in traces.TRACES:
        ids, batches = _batches(settings, name, count=1)
        calls = stage_calls(weights, *batches[0], torch.as_tensor(hot_rows(settings, name, ids)))
        reference = calls["baseline"]()[0]
        worst = max(worst, *(float((calls[v]()[0] - reference).abs().max()) for v in VARIANTS))
    return Measurement(worst <= 1e-3, note=f"largest difference {worst:.2e}")


def stage_ratios(frame: pd.DataFrame, baseline: str = "baseline") -> pd.DataFrame:
    """Per trace and variant: the median speed-up over ``baseline`` from the same rounds, with its 95 % interval."""
    rows = []
    for name, group in frame.groupby("trace", sort=False):
        timings = {v: Timing(tuple(g.sort_values("round").seconds)) for v, g in group.groupby("variant", sort=False)}
        for variant, timing in ratios(timings, baseline).items():
            low, high = timing.interval
            rows.append(dict(trace=name, variant=variant, speedup=timing.median, low=low, high=high))
    return pd.DataFrame(rows)


def dlrm_model(settings) -> DLRM:
    torch.manual_seed(settings.seed)
    return DLRM(settings.dense_features, settings.bottom, settings.tables, settings.rows, settings.dim,
                settings.top).eval()


def dlrm_split(settings) -> pd.DataFrame:
    """Per trace and timing round: DLRM's forward seconds per batch, its embedding stage's, and their share."""
    model = dlrm_model(settings)
    dense = torch.randn(settings.batch, settings.dense_features, generator=torch.Generator().manual_seed(0))
    frames = []
    with torch.inference_mode():
        for name in traces.TRACES:
            _, batches = _batches(settings, name, count=1)
            indices, offsets = batches[0]
            timing = interleaved({"forward": lambda: model(dense, indices, offsets),
                                  "embedding": lambda: model.embed(indices, offsets)}, settings.repeats)
            frames.append(pd.DataFrame({"trace": name, "round": range(settings.repeats),
                                        "forward": timing["forward"].samples,
                                        "embedding": timing["embedding"].samples}))
    frame = pd.concat(frames, ignore_index=True)
    frame["share"] = (frame.embedding / frame.forward).clip(upper=1.0)
    return frame


def embedding_share(split: pd.DataFrame) -> Measurement:
    """C3: the embedding stage's share of the forward time, per trace over rounds."""
    return across_seeds({name: g.share.tolist() for name, g in split.groupby("trace", sort=False)},
                        note="share = embedding stage / whole forward, timed in alternating rounds")


def sensitivity(settings) -> pd.DataFrame:
    """Per (batch, pooling, dim) around the main setting: seconds per batch on the high-reuse and random traces
    (one table), per round, and the per-round slowdown."""
    points = {(b, settings.pooling, settings.dim) for b in settings.batch_grid}
    points |= {(settings.batch, p, settings.dim) for p in settings.pooling_grid}
    points |= {(settings.batch, settings.pooling, d) for d in settings.dim_grid}
    rows = []
    for batch, pooling, dim in sorted(points):
        weight = make_weights(1, settings.rows, dim, settings.seed)
        calls = {}
        for name in ("high", "random"):
            batches = _batches(settings, name, batch, pooling)[1]
            calls[name] = [stage_calls(weight, i, o, torch.empty(0, dtype=torch.int64))["baseline"]
                           for i, o in batches]
        timing = interleaved({name: (lambda c=c: [f() for f in c]) for name, c in calls.items()}, settings.repeats)
        for round_, (high, rand) in enumerate(zip(timing["high"].samples, timing["random"].samples)):
            rows.append(dict(batch=batch, pooling=pooling, dim=dim, round=round_, high=high / settings.batches,
                             random=rand / settings.batches, slowdown=rand / high))
    return pd.DataFrame(rows)


def slowdown_over_settings(frame: pd.DataFrame) -> Measurement:
    """C1: random / high per (batch, pooling, dim) setting, each over its timing rounds."""
    samples = {f"batch {b}, pooling {p}, dim {d}": g.slowdown.tolist()
               for (b, p, d), g in frame.groupby(["batch", "pooling", "dim"])}
    return across_seeds(samples, note="per-round ratios of interleaved rounds on one CPU thread")


def l2_study(settings, mapping: str = L2_MAPPING.central) -> pd.DataFrame:
    """Per trace, batch and pinned-row count: the A100 L2 model's hit rate of the embedding gather (one table's
    kernel; the other tables' kernels in between leave it cold), and the pinned rows' own hit rate, with addresses
    mapped to sets by ``mapping`` (:data:`L2_MAPPING`)."""
    rows = []
    for name in traces.TRACES:
        ids = trace_ids(settings, name)
        for k, (indices, _) in enumerate(traces.batches(ids, settings.model_batch, settings.pooling,
                                                        settings.model_batches)):
            accesses = indices.numpy()
            for pinned in settings.pinned_rows:
                pins = hot_rows(settings, name, ids, pinned)
                hits = row_hits(accesses, settings.dim, A100_40GB.l2, pins if pinned else None, mapping=mapping)
                fits = (pins_that_fit(pins, settings.dim, A100_40GB.l2, mapping) if pinned
                        else np.empty(0, dtype=np.int64))
                on_pins = np.isin(accesses, fits)
                rows.append(dict(trace=name, batch=k, pinned=pinned, hit_rate=float(hits.mean()),
                                 pinned_share=float(on_pins.mean()),
                                 pinned_hit_rate=float(hits[on_pins].mean()) if on_pins.any() else np.nan))
    return pd.DataFrame(rows)


def pinned_rows_hit(study: pd.DataFrame) -> Measurement:
    """K3: every access to a pinned row that fits hits, in every pinned run."""
    pinned = study[study.pinned > 0].dropna(subset=["pinned_hit_rate"])
    return Measurement(bool((pinned.pinned_hit_rate == 1.0).all()) and len(pinned) > 0,
                       note=f"lowest pinned-row hit rate {pinned.pinned_hit_rate.min():.4f} over {len(pinned)} runs")


def occupancy_curve(register_range=range(16, 129), threads: int = 256) -> pd.DataFrame:
    """Resident warps and occupancy of a 256-thread-block kernel on the A100, per registers per thread."""
    rows = [dict(registers=r, warps=o.warps, occupancy=o.share, limit=o.limit)
            for r in register_range for o in [occupancy(r, threads, A100_40GB.sm)]]
    return pd.DataFrame(rows)


def register_limited(registers: dict, threads: int = 256) -> Measurement:
    """C9: whether the baseline kernel's registers (ptxas, uncapped, no prefetching) are what limits its occupancy on
    the A100, below the SM's 64 warps, with the numbers in the note."""
    count = registers["none"]["0"]
    found = occupancy(count, threads, A100_40GB.sm)
    return Measurement(found.limit == "registers" and found.share < 1,
                       note=f"{count} registers per thread: {found.warps} of {A100_40GB.sm.max_warps} warps "
                            f"({found.share:.1%}), the {found.limit} limit binds")


def model_study(settings, study: pd.DataFrame) -> dict:
    """The A100 model: registers of our kernel's variants (ptxas, sm_80), the fitted DRAM latency, and per trace the
    modelled seconds of the baseline and every optimisation, with their predicted speed-ups."""
    registers = cuda_kernels.registers("sm_80")
    cap = str(settings.register_cap)
    if cap not in registers:
        raise ValueError(f"register_cap must be one of {[c for c in registers if c != 'none']} (the caps the "
                         f"kernel is compiled under, mlsysrepro.recsys.cuda_kernels.CAPS), got {settings.register_cap}")
    lines = batch_lines(settings.model_batch * settings.pooling, settings.dim, A100_40GB)
    hits = study.groupby(["trace", "pinned"]).hit_rate.mean()
    unpinned, pinned = 0, max(p for p in settings.pinned_rows if p <= HOT_ROWS)
    kernels = {"baseline": Kernel(registers["none"]["0"]),
               "register_cap": Kernel(registers[cap]["0"]),
               "prefetch": Kernel(registers["none"]["2"], distance=2),
               "pinning": Kernel(registers["none"]["0"]),
               "combined": Kernel(registers[cap]["2"], distance=2)}
    scale = fit_latency_scale(hits[("high", unpinned)], hits[("random", unpinned)], lines, kernels["baseline"],
                              A100_40GB, PAPER_SLOWDOWN)
    gpu = replace(A100_40GB, latency_scale=scale)
    rows = []
    for name in traces.TRACES:
        for variant, kernel in kernels.items():
            rate = hits[(name, pinned if variant in ("pinning", "combined") else unpinned)]
            rows.append(dict(trace=name, variant=variant, registers=kernel.registers, warps=kernel.warps(gpu),
                             hit_rate=rate, **stage_seconds(lines, rate, kernel, gpu)))
        for distance in settings.distances:
            kernel = Kernel(registers["none"][str(distance)], distance=distance)
            rows.append(dict(trace=name, variant=f"distance {distance}", registers=kernel.registers,
                             warps=kernel.warps(gpu), hit_rate=hits[(name, unpinned)],
                             **stage_seconds(lines, hits[(name, unpinned)], kernel, gpu)))
        for pins in settings.pinned_rows:
            rows.append(dict(trace=name, variant=f"pinned {pins}", registers=kernels["baseline"].registers,
                             warps=kernels["baseline"].warps(gpu), hit_rate=hits[(name, pins)],
                             **stage_seconds(lines, hits[(name, pins)], kernels["baseline"], gpu)))
    frame = pd.DataFrame(rows)
    base = frame[frame.variant == "baseline"].set_index("trace").seconds
    frame["speedup"] = frame.trace.map(base) / frame.seconds
    modelled = base["random"] / base["high"]
    return {"registers": registers, "latency_scale": scale, "frame": frame, "slowdown": modelled,
            "gpu": gpu.name}


def model_fit_gap(model: dict) -> Measurement:
    """K2: how far the fitted model's baseline slowdown is from the paper's."""
    return Measurement(abs(model["slowdown"] / PAPER_SLOWDOWN - 1),
                       note=f"modelled {model['slowdown']:.3f}x with the idle latencies stretched "
                            f"{model['latency_scale']:.2f}x under load")


def predicted(models: dict[str, dict], variant: str) -> str:
    """The model's predicted speed-ups of ``variant`` per trace, under every L2 map of ``models`` (``{mapping:
    model_study(...)}``, the central one first), as text for a claim's reason."""
    texts = []
    for mapping, model in models.items():
        frame = model["frame"]
        rows = frame[frame.variant == variant].set_index("trace").speedup
        texts.append(", ".join(f"{name} {value:.2f}x" for name, value in rows.items()) + f" ({mapping} L2 map)")
    return "; ".join(texts)


GPU_CLAIM_VARIANT = {"C4": "register_cap", "C5": "prefetch", "C6": "pinning", "C7": "combined"}


def gpu_claim(claim_id: str, models: dict[str, dict]) -> Measurement:
    """C2, C4-C8 from the GPU check's committed numbers; without them not testable, with the model's predictions
    under each L2 map of ``models`` (``{mapping: model_study(...)}``)."""
    measured = gpu_results.section("dlrm_gpu")
    variant = GPU_CLAIM_VARIANT.get(claim_id)
    if measured is None:
        if claim_id == "C2":
            reason = "no GPU measurement is committed (the A100 model is fitted to this very slowdown, so it cannot test it)"
        elif claim_id == "C8":
            reason = ("no GPU measurement is committed; the model times the embedding stage only (end to end needs the "
                      "MLPs' time on the GPU)")
        else:
            reason = f"no GPU measurement is committed; the A100 model predicts {predicted(models, variant)}"
        return not_testable(reason + f" ({gpu_results.provenance('dlrm_gpu')})")
    where = gpu_results.provenance("dlrm_gpu")
    if claim_id == "C2":
        seconds = measured["stage"]["torch"]
        return from_rounds(np.array(seconds["random"]) / np.array(seconds["high"]), where)
    if claim_id == "C8":
        return across({t: v for t, v in measured["end_to_end_speedup"].items()}, note=where)
    stage = measured["stage"]
    return across({t: float(np.median(np.array(stage["baseline"][t]) / np.array(stage[variant][t])))
                   for t in stage["baseline"]}, note=where)


def from_rounds(values: np.ndarray, note: str) -> Measurement:
    timing = Timing(tuple(float(v) for v in values))
    return Measurement(timing.median, timing.interval, note=note)


def gpu_benchmark(settings, device: str = "cuda") -> dict:
    """The embedding stage on CUDA for every trace (``tables`` tables of the main setting): seconds per batch of
    torch's EmbeddingBag and of our kernels as baseline, under the register cap, with prefetching at distance 2,
    with the hot rows pinned in L2 (the pinning kernel runs before each table's kernel, untimed, as in the
    artifact), and all three; every kernel checked against torch first. Then DLRM's forward with torch's stage
    against the combined one. Per-round seconds, so ratios keep their rounds."""
    if not torch.cuda.is_available():
        raise RuntimeError("gpu_benchmark needs CUDA: run it through benchmarks/gpu_check.sh on a GPU machine")
    plain, capped = cuda_kernels.Kernels(), cuda_kernels.Kernels(settings.register_cap)
    weights = [w.to(device) for w in make_weights(settings.tables, settings.rows, settings.dim, settings.seed)]
    model = dlrm_model(settings).to(device)
    dense = torch.randn(settings.batch, settings.dense_features, device=device)
    stage: dict[str, dict[str, list[float]]] = {v: {} for v in GPU_VARIANTS}
    end_to_end = {}
    for name in traces.TRACES:
        ids, batches = _batches(settings, name)
        batches = [(i.to(device), o.to(device)) for i, o in batches]
        hot = torch.as_tensor(hot_rows(settings, name, ids), device=device)

        def run(kernels, distance, pin):
            def call():
                for indices, offsets in batches:
                    for weight in weights:
                        if pin:
                            kernels.pin(weight, hot)
                        kernels.bag(weight, indices, offsets, distance)
            return call

        calls = {"torch": lambda: [torch.nn.functional.embedding_bag(i, w, o, mode="sum")
                                   for i, o in batches for w in weights],
                 "baseline": run(plain, 0, False), "register_cap": run(capped, 0, False),
                 "prefetch": run(plain, 2, False), "pinning": run(plain, 0, True), "combined": run(capped, 2, True)}
        reference = torch.nn.functional.embedding_bag(batches[0][0], weights[0], batches[0][1], mode="sum")
        for kernels, distance in ((plain, 0), (capped, 0), (plain, 2), (capped, 2)):
            got = kernels.bag(weights[0], batches[0][0], batches[0][1], distance)
            if not torch.allclose(got, reference, atol=1e-3, rtol=1e-4):
                raise AssertionError(f"our kernel (distance {distance}) disagrees with torch's EmbeddingBag on {name}")
        timing = interleaved(calls, settings.repeats, device=device)
        for variant, t in timing.items():
            stage[variant][name] = [s / len(batches) for s in t.samples]
        indices, offsets = batches[0]

        def combined_forward():
            pooled = []
            for weight in weights:
                capped.pin(weight, hot)
                pooled.append(capped.bag(weight, indices, offsets, 2))
            return model.top(model.interact(model.bottom(dense), pooled))

        with torch.inference_mode():
            forward = interleaved({"torch": lambda: model(dense, indices, offsets), "combined": combined_forward},
                                  settings.repeats, device=device)
        end_to_end[name] = float(np.median(np.array(forward["torch"].samples) / np.array(forward["combined"].samples)))
    return {"stage": stage, "end_to_end_speedup": end_to_end, "triton": triton_sweep(settings, weights[0]),
            "tables": settings.tables, "batch": settings.batch, "pooling": settings.pooling, "dim": settings.dim}


TRITON_LAUNCHES = ((1, 1), (2, 1), (4, 1), (8, 1), (4, 2), (4, 3))


def triton_sweep(settings, weight: torch.Tensor) -> dict[str, dict[str, list[float]]]:
    """Seconds per batch of the Triton kernel (:mod:`mlsysrepro.recsys.triton_bag`) on one table, per
    (num_warps, num_stages) of :data:`TRITON_LAUNCHES` and trace (high and random), torch's EmbeddingBag beside;
    each launch checked against torch first. Empty where Triton is not installed."""
    from ..recsys import triton_bag

    if not triton_bag.available():
        return {}
    found: dict[str, dict[str, list[float]]] = {}
    for name in ("high", "random"):
        indices, offsets = [t.to(weight.device) for t in _batches(settings, name, count=1)[1][0]]
        reference = torch.nn.functional.embedding_bag(indices, weight, offsets, mode="sum")
        calls = {"torch": lambda: torch.nn.functional.embedding_bag(indices, weight, offsets, mode="sum")}
        for warps, stages in TRITON_LAUNCHES:
            got = triton_bag.embedding_bag(weight, indices, offsets, warps, stages)
            if not torch.allclose(got, reference, atol=1e-3, rtol=1e-4):
                raise AssertionError(f"the Triton kernel ({warps} warps, {stages} stages) disagrees with torch")
            calls[f"warps {warps}, stages {stages}"] = (
                lambda w=warps, s=stages: triton_bag.embedding_bag(weight, indices, offsets, w, s))
        for launch, timing in interleaved(calls, settings.repeats, device=weight.device).items():
            found.setdefault(launch, {})[name] = list(timing.samples)
    return found


def gpu_measured() -> pd.DataFrame | None:
    """The committed GPU numbers as a frame (trace, variant, median seconds per batch), or None."""
    measured = gpu_results.section("dlrm_gpu")
    if measured is None:
        return None
    return pd.DataFrame([dict(trace=t, variant=v, seconds=float(np.median(s)))
                         for v, per_trace in measured["stage"].items() for t, s in per_trace.items()])
