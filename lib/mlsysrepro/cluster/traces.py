"""Loaders that turn the real traces of the data registry into :class:`~.jobs.Trace` objects.

Each loader documents, in the trace's ``assumptions``, what the file does not say and had to be assumed:

- :func:`load_tiresias` — Tiresias' CSV schema (``60_job.csv``; Gavel's generated Philly traces use it too);
- :func:`load_yarn_durations` — Tiresias' ``yarn-gput*.csv``, which hold job durations only;
- :func:`load_gavel` — Gavel's Philly-derived ``msr`` traces, with Gavel's measured V100 throughputs, consolidated
  and unconsolidated: their ratio is a measured placement sensitivity and sets each job type's gradient volume;
- :func:`load_alibaba_openb` — the Alibaba ``openb`` pod list (Weng et al., ATC'23), pods that hold whole GPUs;
- :func:`load_job_table` — any one-row-per-job log a user brings (Helios' cluster log by default), for ``paper``
  scale.

:data:`TRACES` names every trace the notebook runs and :func:`load` opens one by name.
"""

from __future__ import annotations

import ast
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.data import fetch
from .jobs import Trace, from_columns
from .model_sizes import PARAMETERS
from .topology import Topology

TIRESIAS_DIR = "simulator"
#: Philly's distribution of GPUs per job, as Gavel's job generator draws it (``_generate_scale_factor``).
PHILLY_GPUS = (np.array([1, 2, 4, 8]), np.array([0.70, 0.10, 0.15, 0.05]))


def load_tiresias(path: Path, name: str | None = None, recount_iterations: bool = False) -> Trace:
    """A CSV with ``job_id,num_gpu,submit_time,iterations,model_name,duration``.

    Assumed: ``duration`` is the job's compute time alone (the trace has no placement), so one iteration computes
    for ``duration / iterations`` seconds and the all-reduce of ``model_name``'s gradient comes on top.
    ``recount_iterations`` serves Gavel's generated traces, whose ``iterations`` are steps of another model
    (Gavel's job family, a few ms each): there one iteration of ``model_name`` computes for the 60-job trace's
    median seconds per iteration of that model and the job runs ``duration`` / that many iterations."""
    table = pd.read_csv(path)
    missing = {"num_gpu", "submit_time", "iterations", "model_name", "duration"} - set(table.columns)
    if missing:
        raise ValueError(f"{path} is not a Tiresias job trace: columns {sorted(missing)} are missing")
    unknown = sorted(set(table.model_name) - set(PARAMETERS))
    if unknown:
        raise ValueError(f"{path}: models {unknown} have no parameter count; known: {sorted(PARAMETERS)}")
    if recount_iterations:
        seconds = table.model_name.map(_iteration_seconds_by_model())
        assumptions = ("duration taken as compute time; iterations recounted at the 60-job trace's seconds per "
                       "iteration of model_name; its gradient's all-reduce is added")
    else:
        seconds = table.duration / table.iterations
        assumptions = "duration taken as compute time; the all-reduce of model_name's gradient is added"
    return from_columns(name or Path(path).stem, table.submit_time, table.num_gpu, table.duration / seconds,
                        seconds, table.model_name, assumptions=assumptions)


@lru_cache(maxsize=1)
def _iteration_seconds_by_model() -> dict[str, float]:
    """Median seconds per iteration of each model in Tiresias' 60-job trace: the compute time given to jobs whose
    trace names no model or iteration count."""
    table = pd.read_csv(fetch("tiresias_sim_traces") / TIRESIAS_DIR / "60_job.csv")
    return (table.duration / table.iterations).groupby(table.model_name).median().to_dict()


def _drawn_models(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    per_model = _iteration_seconds_by_model()
    names = np.array(sorted(per_model))
    models = names[rng.integers(0, len(names), n)]
    return models, np.array([per_model[m] for m in models])


def load_yarn_durations(path: Path, seed: int, cluster_gpus: int, load: float, name: str | None = None) -> Trace:
    """Tiresias' ``yarn-gput*.csv``: one column of real job durations (seconds), nothing else.

    Assumed: GPUs per job drawn from Philly's distribution (:data:`PHILLY_GPUS`), a model drawn uniformly from the
    60-job trace's models with that trace's median seconds per iteration, and Poisson arrivals at the rate that
    brings ``load`` x ``cluster_gpus`` GPU-seconds of work per second."""
    durations = pd.read_csv(path)["duration"].to_numpy(dtype=float)
    rng = np.random.default_rng(seed)
    gpus = rng.choice(PHILLY_GPUS[0], size=len(durations), p=PHILLY_GPUS[1])
    models, seconds = _drawn_models(rng, len(durations))
    mean_gap = float(np.sum(gpus * durations)) / (cluster_gpus * load * len(durations))
    arrival = np.concatenate([[0.0], np.cumsum(rng.exponential(mean_gap, len(durations) - 1))]).round()
    return from_columns(name or Path(path).stem, arrival, gpus, durations / seconds, seconds, models,
                        assumptions=f"GPUs from Philly's mix, models drawn, Poisson arrivals at load {load:g} "
                                    f"on {cluster_gpus} GPUs (the file holds durations only)")


def _throughput_table(path: Path) -> dict[str, dict[tuple[str, int], float]]:
    raw = json.loads(Path(path).read_text())
    return {gpu: {ast.literal_eval(key): entry["null"] for key, entry in table.items()} for gpu, table in raw.items()}


def gavel_calibration(throughputs: dict, topology: Topology, gpu: str = "v100") -> dict[str, tuple[float, dict]]:
    """Per Gavel job type: the gradient bytes ``b`` and compute seconds per iteration (per scale) that make our
    cost model reproduce Gavel's measured step times.

    Measured: ``t_c = 1 / throughput`` with the job's GPUs in one server, ``t_u`` spread one GPU per server.
    Our model: ``t_c = c + A_c(b)``, ``t_u = c + A_u(b)`` with ``A`` the ring all-reduce, linear in ``b``; so
    ``b = (t_u - t_c - (A_u(0) - A_c(0))) / (A_u'(b) - A_c'(b))``, averaged over the scales 2, 4, 8 Gavel measured
    and clipped at 0 (some unconsolidated runs were measured faster), and ``c = t_c - A_c(b)``."""
    consolidated, spread = throughputs[gpu], throughputs[f"{gpu}_unconsolidated"]
    calibration = {}
    for job_type in sorted({key[0] for key in consolidated}):
        volumes = []
        for scale in (2, 4, 8):
            key = (job_type, scale)
            if key not in spread or scale > topology.gpus_per_machine:
                continue
            packed, apart = np.arange(scale), np.arange(scale) * topology.gpus_per_machine
            base = topology.allreduce_seconds(0.0, apart) - topology.allreduce_seconds(0.0, packed)
            gap_at_1gb = topology.allreduce_seconds(1e9, apart) - topology.allreduce_seconds(1e9, packed)
            slope = gap_at_1gb / 1e9 - base / 1e9
            volumes.append((1 / spread[key] - 1 / consolidated[key] - base) / slope)
        volume = max(float(np.mean(volumes)), 0.0) if volumes else 0.0
        compute = {}
        for (kind, scale), rate in consolidated.items():
            if kind == job_type:
                packed = np.arange(min(scale, topology.gpus_per_machine))
                compute[scale] = max(1 / rate - topology.allreduce_seconds(volume, packed), 0.05 / rate)
        calibration[job_type] = (volume, compute)
    return calibration


def _nearest_measured(per_scale: dict[int, float], scale: int) -> float:
    """The measured value at the largest measured scale not above ``scale`` (the smallest one if none is)."""
    below = [s for s in per_scale if s <= scale]
    return per_scale[max(below) if below else min(per_scale)]


def load_gavel(trace_path: Path, throughputs_path: Path, topology: Topology, name: str | None = None) -> Trace:
    """A Gavel ``.trace`` (tab-separated: job type, command, steps flag, data-dir flag, total steps, arrival
    seconds, scale factor) with Gavel's measured throughputs (:func:`gavel_calibration`).

    Assumed: every job runs on V100s; a scale factor Gavel did not measure for the job type (it measured at most
    1, 2, 4, 8) computes per iteration as at the largest measured scale below it (data-parallel: the per-GPU
    batch is fixed)."""
    table = pd.read_csv(trace_path, sep="\t", header=None,
                        names=["job_type", "command", "steps_flag", "data_flag", "steps", "arrival", "gpus"])
    calibration = gavel_calibration(_throughput_table(throughputs_path), topology)
    unknown = sorted(set(table.job_type) - set(calibration))
    if unknown:
        raise ValueError(f"{trace_path}: job types {unknown} have no measured throughput")
    volume = table.job_type.map(lambda kind: calibration[kind][0])
    compute = [_nearest_measured(calibration[kind][1], scale) for kind, scale in zip(table.job_type, table.gpus)]
    return from_columns(name or Path(trace_path).stem, table.arrival, table.gpus, table.steps, compute,
                        table.job_type, volume=volume,
                        assumptions="V100 throughputs; gradient volume calibrated from measured consolidated vs "
                                    "unconsolidated step times; unmeasured scales compute as the nearest "
                                    "measured one below")


def load_alibaba_openb(path: Path, seed: int, name: str = "alibaba_openb") -> Trace:
    """Alibaba's ``openb_pod_list_default.csv``: pods with their GPUs, creation, scheduling and deletion times.

    Kept: pods holding at least one GPU that ended inside the trace (phase Succeeded or Failed); pods still
    Running at the trace's end are censored and dropped. Assumed: a pod sharing a GPU (``gpu_milli`` < 1000)
    holds a whole one; its run time is deletion minus scheduling; the model is drawn as for
    :func:`load_yarn_durations` (the trace names none)."""
    table = pd.read_csv(path)
    ended = table[(table.num_gpu >= 1) & table.pod_phase.isin(["Succeeded", "Failed"])]
    durations = (ended.deletion_time - ended.scheduled_time).clip(lower=1.0).to_numpy(dtype=float)
    models, seconds = _drawn_models(np.random.default_rng(seed), len(ended))
    return from_columns(name, ended.creation_time, ended.num_gpu, durations / seconds, seconds, models,
                        assumptions="ended GPU pods only; shared GPUs count whole; models drawn")


def load_job_table(path: Path, seed: int = 0, name: str | None = None, *, arrival: str = "submit_time",
                   gpus: str = "gpu_num", duration: str = "duration", state: str | None = "state",
                   keep_states: tuple[str, ...] = ("COMPLETED",)) -> Trace:
    """Any job log with one row per job; the arguments name its columns. The defaults read a cluster log laid out
    as Helios' ``cluster_log.csv`` (Hu et al., SC'21: ``submit_time``, ``gpu_num``, ``duration`` in seconds,
    ``state``); check them against your copy. For the full Philly trace, first flatten ``cluster_job_log`` (JSON)
    to such a table.

    Kept: rows with at least one GPU, a positive duration and (when ``state`` is given) a state in ``keep_states``.
    Timestamps that are not numbers are parsed as dates, in seconds from the first. Assumed, as for
    :func:`load_yarn_durations`: the model is drawn (the log names none)."""
    table = pd.read_csv(path)
    missing = sorted({arrival, gpus, duration, *([state] if state else [])} - set(table.columns))
    if missing:
        raise ValueError(f"{path}: columns {missing} are missing; name the columns with arrival=, gpus=, "
                         f"duration=, state=")
    keep = (table[gpus] >= 1) & (table[duration] > 0)
    if state:
        keep &= table[state].isin(keep_states)
    table = table[keep]
    submitted = table[arrival]
    if not pd.api.types.is_numeric_dtype(submitted):
        submitted = pd.to_datetime(submitted)
        submitted = (submitted - submitted.min()).dt.total_seconds()
    models, seconds = _drawn_models(np.random.default_rng(seed), len(table))
    return from_columns(name or Path(path).stem, submitted, table[gpus], table[duration] / seconds, seconds, models,
                        assumptions=f"rows with state in {list(keep_states)}" if state else "every row with GPUs")


#: The traces of the notebook: loader and arguments (paths relative to the dataset folder).
TRACES = {
    "tiresias_60": ("tiresias_sim_traces", f"{TIRESIAS_DIR}/60_job.csv"),
    "yarn_1000": ("tiresias_sim_traces", f"{TIRESIAS_DIR}/yarn-gput1000.csv"),
    "yarn_5000": ("tiresias_sim_traces", f"{TIRESIAS_DIR}/yarn-gput5000.csv"),
    "yarn_10000": ("tiresias_sim_traces", f"{TIRESIAS_DIR}/yarn-gput10000.csv"),
    "philly_gavelgen_5000": ("gavel_generated_traces", "philly_gavelgen_seed0_lam110_n5000.csv"),
    "philly_gavelgen_10000": ("gavel_generated_traces", "philly_gavelgen_seed0_lam140_n10000.csv"),
    "alibaba_openb": ("alibaba_gpu_traces_small", "cluster-trace-gpu-v2023/csv/openb_pod_list_default.csv"),
}
GAVEL_THROUGHPUTS = "scheduler/simulation_throughputs.json"
GAVEL_TRACES = "scheduler/traces/msr/seed=0"


def gavel_trace_names() -> list[str]:
    """The Gavel msr traces present, as ``gavel_<id>``."""
    folder = fetch("gavel_throughputs_traces") / GAVEL_TRACES
    return [f"gavel_{path.stem}" for path in sorted(folder.glob("*.trace"))]


def load(name: str, topology: Topology, seed: int = 0, load: float = 0.8) -> Trace:
    """The trace ``name`` (a key of :data:`TRACES` or ``gavel_<id>``); ``seed`` and ``load`` serve the loaders
    that must draw what their file lacks."""
    if name.startswith("gavel_"):
        root = fetch("gavel_throughputs_traces")
        path = root / GAVEL_TRACES / f"{name.removeprefix('gavel_')}.trace"
        if not path.exists():
            raise ValueError(f"trace must be one of {sorted(TRACES) + gavel_trace_names()}, got {name!r}")
        return load_gavel(path, root / GAVEL_THROUGHPUTS, topology, name=name)
    if name not in TRACES:
        raise ValueError(f"trace must be one of {sorted(TRACES) + gavel_trace_names()}, got {name!r}")
    dataset, relative = TRACES[name]
    path = fetch(dataset) / relative
    if name.startswith("yarn_"):
        return load_yarn_durations(path, seed, topology.gpus, load, name=name)
    if name == "alibaba_openb":
        return load_alibaba_openb(path, seed, name=name)
    return load_tiresias(path, name=name, recount_iterations=name.startswith("philly_gavelgen"))
