"""The experiments of the DDL-stall notebook (Sharma et al., arXiv 2208.14344): presets, the profiling campaign,
and one function per figure or table.

:func:`campaign` runs every profile the notebook needs, cached under ``data/cache/ddl_stalls``:

1. RUN0 of every model (each of ``processes`` workers alone): the compute time per iteration, from which each
   model's time dilation per GPU type follows (:func:`mlsysrepro.ddl.instances.dilation`);
2. RUN1 (and RUN2 / RUN3 for the image models on ``data_configurations``) of every model on every emulated
   configuration; RUN1 of ``sweep_models`` with 1 to ``max(workers_sweep)`` workers in one machine; RUN1 of the
   depth family on ``macro_configuration``. Each model's runs sit between two RUN0s in the same launch, and the
   block repeats ``repeats`` times; a run's time is the median of its iterations pooled over repeats (:func:`pooled`).

It returns one row per run. The figure functions below turn those rows into the paper's
quantities with :mod:`mlsysrepro.ddl.stalls`, :mod:`mlsysrepro.ddl.macro` and :mod:`mlsysrepro.ddl.recommend`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..core.cache import cached
from ..core.claims import (CONSISTENCY, Assumption, Claim, Measurement, Precondition, at_least, at_most, from_samples,
                           not_testable, within)
from ..core.progress import progress
from ..ddl import models
from ..ddl.emulation import EmulatedCluster
from ..ddl.instances import parse_configuration, dilation
from ..ddl.macro import fit_features
from ..ddl.profiler import RunResult, RunSpec, profile
from ..ddl.recommend import recommend
from ..ddl.stalls import data_stalls, interconnect_stall, network_stall

CONFIGURATIONS = ["p2.xlarge", "p2.8xlarge", "p2.16xlarge", "p3.2xlarge", "p3.8xlarge", "p3.16xlarge",
                  "2xp2.8xlarge", "2xp3.8xlarge"]
DEPTH_FAMILY = ["resnet10", "resnet12", "resnet16", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
                "nobn_resnet18", "nobn_resnet34", "nobn_resnet50", "nores_resnet18", "nores_resnet34",
                "nores_resnet50", "vgg11", "vgg13", "vgg16", "vgg19"]

PRESETS = {
    "smoke": dict(
        models=["resnet10", "lstm"], configurations=["p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "2xp3.8xlarge"],
        data_configurations=["p3.8xlarge"], network_pairs=[["2xp3.8xlarge", "p3.16xlarge"]],
        sweep_models=["resnet10"], workers_sweep=[1, 4], macro_models=["resnet10", "resnet18", "nobn_resnet18"],
        macro_configuration="2xp3.8xlarge", batch_size=8, macro_batch_size=8, width=4, iterations=2, warmup=1,
        repeats=1,
        bucket_cap_mb=0.1, gpu_efficiency=0.4, processes=2, loader_workers=0, stored_size=28, images=500,
        epoch_samples=60_000, epochs=20, budget_factors=[0.5, 1.0, 3.0],
    ),
    "default": dict(
        models=["resnet18", "resnet50", "vgg11", "lstm"], configurations=CONFIGURATIONS,
        data_configurations=["p2.8xlarge", "p3.2xlarge", "p3.16xlarge"],
        network_pairs=[["2xp3.8xlarge", "p3.16xlarge"], ["2xp2.8xlarge", "p2.16xlarge"]],
        sweep_models=["resnet18", "vgg11"], workers_sweep=[1, 2, 4, 8, 16], macro_models=DEPTH_FAMILY,
        macro_configuration="2xp3.8xlarge", batch_size=32, macro_batch_size=16, width=16, iterations=2, warmup=1,
        repeats=3,
        bucket_cap_mb=1.5, gpu_efficiency=0.4, processes=2, loader_workers=0, stored_size=56, images=10_000,
        epoch_samples=60_000, epochs=90, budget_factors=[0.8, 1.0, 1.5, 3.0, 10.0],
    ),
    "paper": dict(
        models=["resnet18", "resnet50", "vgg11", "lstm"], configurations=CONFIGURATIONS,
        data_configurations=CONFIGURATIONS,
        network_pairs=[["2xp3.8xlarge", "p3.16xlarge"], ["2xp2.8xlarge", "p2.16xlarge"]],
        sweep_models=["resnet18", "resnet50", "vgg11"], workers_sweep=[1, 2, 4, 8, 16], macro_models=DEPTH_FAMILY,
        macro_configuration="2xp3.8xlarge", batch_size=64, macro_batch_size=32, width=64, iterations=20, warmup=5,
        repeats=3,
        bucket_cap_mb=25.0, gpu_efficiency=0.4, processes=2, loader_workers=2, stored_size=112, images=10_000,
        epoch_samples=60_000, epochs=90, budget_factors=[0.8, 1.0, 1.5, 3.0, 10.0],
    ),
}

#: Each knob's inclusive bounds (None: unbounded), checked by ``resolve``.
RANGES = {
    "workers_sweep": (1, None), "batch_size": (1, None), "macro_batch_size": (1, None), "width": (1, None),
    "iterations": (1, None), "warmup": (0, None), "repeats": (1, None), "bucket_cap_mb": (0, None),
    "gpu_efficiency": (0.01, 1), "processes": (1, None), "loader_workers": (0, None), "stored_size": (1, None),
    "images": (1, None), "epoch_samples": (1, None), "epochs": (1, None), "budget_factors": (0, None),
}
EMULATED = ("our interconnect and network are emulated by a DDP hook that charges a fixed cost per bucket and per "
            "byte")
#: Our modelling choice C1 rests on: the emulated GPU computes at this share of its peak FLOP/s, which sets the
#: dilation of every link time (ddl.instances.dilation). Re-judged at half and twice it.
GPU_EFFICIENCY = Assumption("gpu_efficiency", 0.4, (0.2, 0.4, 0.8), unit="of peak FLOP/s",
                            source="ours (ddl.instances.dilation); halved and doubled")
#: Our modelling choice C2 also rests on: the network carries the all-reduce at this share of its line rate (the
#: net10 and net25 links of ddl.links charge the full 10 and 25 Gb/s). Re-judged at three quarters and half of it.
NETWORK_EFFICIENCY = Assumption("network_efficiency", 1.0, (0.5, 0.75, 1.0), unit="of the network's line rate",
                                source="ours (ddl.links, line rate); three quarters and half of it")
#: C2's band is 2.5x-7.5x around the paper's 5x. A slowdown divides two timings, each off by up to the noise floor
#: n, so 5x is measured within 5 (1 - n) / (1 + n) .. 5 (1 + n) / (1 - n); that stays inside the band while
#: (1 + n) / (1 - n) <= 7.5 / 5, i.e. n <= 0.2.
NOISE_RESOLVES_BAND = Precondition(
    "resolution", "the timing noise lets a slowdown of the paper's 5x be told apart from the band's edges "
    "(2.5x, 7.5x): the noise floor on each timing is at most (1.5 - 1) / (1.5 + 1) = 0.2", at_most(0.2))

CLAIMS = (
    Claim("C1", "The intra-machine interconnect can take most of an iteration for communication-heavy models",
          where="Abstract, Sec. 4 (interconnect stall)", paper_value=0.9,
          unit="largest interconnect share of the RUN1 iteration, (RUN1 - RUN0) / RUN1, the paper's 'up to'",
          rule=at_least(0.5), over="every model of `models` on every multi-GPU one-machine configuration",
          near=0.25, timing=True,
          assumptions=(GPU_EFFICIENCY,),
          threshold_why="the paper's 90 % is its 'up to'; \"most of an iteration\" is more than half of it",
          control="the least communication-heavy model of `models` (the smallest largest share), which must not "
                  "reach half", no_power_check="its negative control shows the emulation leaves room to fail"),
    Claim("C2", "Splitting the same workers over two machines slows training by up to 5x",
          where="Abstract, Sec. 4 (network stall)", paper_value=5.0,
          unit="largest slowdown over the models and pairs of `network_pairs`, two machines / one machine (RUN1)",
          rule=within(2.5, 7.5), over="the largest over every model and pair of `network_pairs` (the paper's 'up to'; "
          "within half of its 5x either way); each pair's own largest shown", near=0.25, up_to=True, timing=True,
          preconditions=(NOISE_RESOLVES_BAND,), assumptions=(GPU_EFFICIENCY, NETWORK_EFFICIENCY)),
    Claim("C3", "The most expensive instance is not always the best per epoch", where="Abstract, Sec. 5 (cost)",
          paper_value="not always the best", unit="share of models whose priciest configuration is not the "
          "cheapest per epoch", rule=at_least(1.0), over="every model of `models`",
          control="a price table that falls per GPU with the instance's size, on which the priciest can be cheapest",
          no_power_check="not measured here: the verdict is fixed by the price table (check K1)"),
    Claim("C4", "Communication stall tracks gradient-tensor count and bytes, not layer count",
          where="Sec. 6 (macroscopic model)", paper_value="tensors and bytes, not layers",
          unit="min(R² tensors, R² bytes) - R² layers", rule=at_least(0.0),
          over="the depth family of `macro_models`",
          control="the same fit on links that charge per layer, where layer count must win",
          no_power_check="not measured here: the links are emulated, so the fit recovers the emulator (check K2)"),
    Claim("K1", "The most expensive configuration is never the cheapest per epoch, by construction: the prices grow "
          "linearly with the GPUs, so it could be cheapest only if communication took negative time",
          where="this reproduction", paper_value=1.0, unit="share of models whose priciest configuration is not "
          "the cheapest per epoch", rule=at_least(1.0), over="every model of `models`", kind=CONSISTENCY, timing=True),
    Claim("K2", "The emulated communication stall follows the gradient bytes, by construction: " + EMULATED,
          where="this reproduction", paper_value=1.0, unit="R² of the stall against gradient bytes",
          rule=at_least(0.9), over="the depth family of `macro_models`", kind=CONSISTENCY, timing=True),
)

CHUNK = 64  # runs per launch: a progress step, and a bounded loss if one run fails
#: The knobs the profiling campaign reads; the figures' own knobs (network pairs, epochs, budgets) only read its rows.
CAMPAIGN_KNOBS = ("models", "configurations", "data_configurations", "sweep_models", "workers_sweep", "macro_models",
                  "macro_configuration", "batch_size", "macro_batch_size", "width", "iterations", "warmup", "repeats",
                  "bucket_cap_mb", "gpu_efficiency", "processes", "loader_workers", "stored_size", "images")


def _spec(settings, run: str, model: str, batch: int, cluster: EmulatedCluster, label: str) -> RunSpec:
    return RunSpec(run, model, batch, cluster, iterations=settings.iterations, warmup=settings.warmup, label=label,
                   width=settings.width, bucket_cap_mb=settings.bucket_cap_mb, loader_workers=settings.loader_workers)


def _rows(results, experiment: str, dilations: dict, repeats: int = 1) -> list[dict]:
    """One row per pooled result; ``repeat_seconds``: the median iteration of each of its ``repeats`` block
    repeats (its iterations split in run order; a RUN0's repeat is the two runs bracketing that repeat)."""
    rows = []
    for r in results:
        s, times = r.spec, r.times
        rows.append(dict(
            experiment=experiment, model=s.model_name, configuration=s.label, run=s.run,
            machines=s.cluster.machines, workers_per_machine=s.cluster.workers_per_machine,
            workers=s.cluster.workers if s.run != "RUN0" else 1, batch_size=s.batch_size,
            samples_per_iteration=s.samples_per_iteration,
            dilation=_dilation_of(s, dilations) if s.run != "RUN0" else 1.0,
            seconds=r.seconds_per_iteration, seconds_std=float(times["iteration"].std()),
            repeat_seconds=[float(np.median(chunk)) for chunk in np.array_split(times["iteration"], repeats)],
            **{f"{k}_seconds": float(np.median(v)) for k, v in times.items() if k != "iteration"},
            bucket_bytes=list(r.bucket_bytes), bucket_modelled=list(r.bucket_modelled),
            bucket_measured=list(r.bucket_measured)))
    return rows


def pooled(results: list[RunResult]) -> list[RunResult]:
    """One result per distinct spec, in first-seen order, its per-iteration times concatenated over repeats."""
    groups: dict[RunSpec, list[RunResult]] = {}
    for r in results:
        groups.setdefault(r.spec, []).append(r)
    return [RunResult(spec, {k: np.concatenate([r.times[k] for r in rs]) for k in rs[0].times},
                      rs[-1].bucket_bytes, rs[-1].bucket_modelled, rs[-1].bucket_measured,
                      float(sum(r.wall for r in rs)))
            for spec, rs in groups.items()]


def _dilation_of(spec: RunSpec, dilations: dict) -> float:
    label = spec.label
    if ":" in label:  # the workers sweep's "p2:8"
        gpu = "K80" if label.startswith("p2") else "V100"
    else:
        gpu = parse_configuration(label).spec.gpu
    return dilations[(spec.model_name, spec.batch_size, gpu)]


def _profile_blocks(settings, blocks: list[list[RunSpec]], desc: str) -> list[list]:
    """Profile ``blocks`` of runs, packing whole blocks into launches of at most :data:`CHUNK` runs, so that a
    block's RUN0 and the runs compared with it share a launch; returns the results block by block."""
    launches: list[list[list[RunSpec]]] = [[]]
    for block in blocks:
        if launches[-1] and sum(map(len, launches[-1])) + len(block) > CHUNK:
            launches.append([])
        launches[-1].append(block)
    out = []
    for launch in progress(launches, desc):
        results = iter(profile([spec for block in launch for spec in block], processes=settings.processes,
                               seed=settings.seed, stored_size=settings.stored_size, images=settings.images))
        out += [[next(results) for _ in block] for block in launch]
    return out


def _campaign(settings) -> dict:
    batch = {m: settings.batch_size for m in settings.models + settings.sweep_models}
    macro_batch = {m: settings.macro_batch_size for m in settings.macro_models}
    # 1. compute alone: RUN0 per (model, batch), for the dilations
    compute = sorted(set(batch.items()) | set(macro_batch.items()))
    alone = [replace(_spec(settings, "RUN0", m, b, EmulatedCluster(), "RUN0"),
                     iterations=settings.iterations * settings.repeats) for m, b in compute]
    first = [r for block in _profile_blocks(settings, [alone], "RUN0 (dilations)") for r in block]
    flops = {(m, b): models.training_flops(m, models.build(m, settings.width), b) for m, b in compute}
    dilations = {(m, b, gpu): dilation(r.seconds_per_iteration, flops[(m, b)], gpu, settings.gpu_efficiency)
                 for (m, b), r in zip(compute, first) for gpu in ("K80", "V100")}

    def spec(run, model, b, name, cluster=None):
        if cluster is None:
            config = parse_configuration(name)
            cluster = config.cluster(dilations[(model, b, config.spec.gpu)])
        return _spec(settings, run, model, b, cluster, name)

    # 2. per experiment and model, a block: its runs between two RUN0s (the baseline its stalls subtract), the
    #    whole block repeated; a run's iterations are pooled over its repeats, so the machine's drifting speed
    #    (easily 20 % from one run to the next on a shared VM) hits every run of a block alike
    def bracketed(m, b, runs):
        alone = spec("RUN0", m, b, "RUN0", EmulatedCluster())
        return [alone, *runs, alone] * settings.repeats

    blocks = []
    for m in settings.models:
        block = []
        for name in settings.configurations:
            runs = ["RUN1"]
            if not models.is_language_model(m) and name in settings.data_configurations:
                runs += ["RUN2", "RUN3"]
            block += [spec(r, m, batch[m], name) for r in runs]
        blocks.append(("breakdown", bracketed(m, batch[m], block)))
    for m in settings.sweep_models:
        block = []
        for family, intra in (("p2", "pcie3"), ("p3", "nvlink2")):
            gpu = "K80" if family == "p2" else "V100"
            for g in settings.workers_sweep:
                c = EmulatedCluster(1, g, intra if g > 1 else None, None, dilations[(m, batch[m], gpu)])
                block.append(spec("RUN1", m, batch[m], f"{family}:{g}", c))
        blocks.append(("workers", bracketed(m, batch[m], block)))
    for m in settings.macro_models:
        b = macro_batch[m]
        blocks.append(("macro", bracketed(m, b, [spec("RUN1", m, b, settings.macro_configuration)])))
    rows = _rows(first, "dilation", dilations)
    results = _profile_blocks(settings, [block for _, block in blocks], "RUN0-RUN3 (emulated clusters)")
    for (experiment, _), block in zip(blocks, results):
        rows += _rows(pooled(block), experiment, dilations, settings.repeats)
    return {"rows": rows, "flops": {f"{m}@{b}": f for (m, b), f in flops.items()}}


def campaign(settings) -> tuple[pd.DataFrame, dict]:
    """Every profile of the notebook (module docstring), cached by :data:`CAMPAIGN_KNOBS`: (one row per run, training
    FLOPs per model@batch).

    ``seconds`` is the measured (dilated) time per iteration; ``instance_seconds`` = ``seconds / dilation`` is what
    the emulated instance would take (RUN0 rows are this CPU's own compute, dilation 1).
    """
    out = cached("campaign", settings, lambda: _campaign(settings), knobs=CAMPAIGN_KNOBS)
    table = pd.DataFrame(out["rows"])
    table["instance_seconds"] = table["seconds"] / table["dilation"]
    return table, out["flops"]


def _compute_seconds(table: pd.DataFrame, experiment: str) -> dict:
    """RUN0 seconds per iteration per (model, batch) of one experiment (pooled from the RUN0s around its runs)."""
    rows = table[(table.experiment == experiment) & (table.run == "RUN0")]
    return {(r.model, r.batch_size): r.seconds for r in rows.itertuples()}


def breakdown(table: pd.DataFrame, network_pairs) -> pd.DataFrame:
    """Per model x configuration, median seconds per iteration of RUN0-RUN3 (measured, dilated) and the stalls.

    ``communication`` = RUN1 - RUN0 (share of RUN1). For a two-machine configuration it splits into ``network`` =
    RUN1(2 x N/2) - RUN1(1 x N) (the paired one-machine configuration) and ``interconnect`` = the rest.
    Beside the differences, what the instrumented loop saw directly: ``exposed_comm`` (RUN1's wait for
    communication after the last gradient), ``prep_waited`` (RUN3's wait for a batch) and ``fetch_waited``
    (RUN2's wait less RUN3's). With ``loader_workers = 0`` nothing overlaps loading, so the waits are the stalls.
    """
    compute = _compute_seconds(table, "breakdown")
    alone = table[(table.experiment == "breakdown") & (table.run == "RUN0")]
    compute_repeats = {(r.model, r.batch_size): r.repeat_seconds for r in alone.itertuples()}
    rows = table[(table.experiment == "breakdown") & (table.run != "RUN0")]
    out = []
    for (model, config), group in rows.groupby(["model", "configuration"], sort=False):
        t = {r.run: r.seconds for r in group.itertuples()}
        waited = {r.run: r.data_seconds for r in group.itertuples()}
        first = group.iloc[0]
        run0 = compute[(model, first.batch_size)]
        run1 = group[group.run == "RUN1"].iloc[0]
        row = dict(model=model, configuration=config, dilation=first.dilation, workers=first.workers, RUN0=run0,
                   RUN1=t["RUN1"], RUN2=t.get("RUN2", np.nan), RUN3=t.get("RUN3", np.nan),
                   RUN0_repeats=compute_repeats[(model, first.batch_size)], RUN1_repeats=run1.repeat_seconds,
                   exposed_comm=run1.comm_exposed_seconds)
        comm, comm_share = interconnect_stall(run0, t["RUN1"])
        row.update(communication=comm, communication_share=comm_share, interconnect_share=comm_share,
                   network_share=0.0)
        if "RUN2" in t:
            d = data_stalls(t["RUN1"], t["RUN2"], t["RUN3"])
            row.update(prep=d.prep, fetch=d.fetch, fetch_fork=d.fetch_fork, prep_share=d.prep_share,
                       fetch_share=d.fetch_share, prep_waited=waited["RUN3"],
                       fetch_waited=waited["RUN2"] - waited["RUN3"])
        out.append(row)
    frame = pd.DataFrame(out)
    for pair, single in network_pairs:
        for model in frame.model.unique():
            i = frame.index[(frame.model == model) & (frame.configuration == pair)]
            j = frame.index[(frame.model == model) & (frame.configuration == single)]
            if len(i) and len(j):
                # measured seconds: a pair and its one-machine configuration share the GPU type, so the dilation
                net, _, _ = network_stall(frame.loc[j[0], "RUN1"], frame.loc[i[0], "RUN1"])
                total = frame.loc[i[0], "RUN1"]
                frame.loc[i[0], "network_share"] = max(0.0, net / total)
                frame.loc[i[0], "interconnect_share"] = max(0.0, frame.loc[i[0], "communication_share"]
                                                            - frame.loc[i[0], "network_share"])
    return frame


def network_table(table: pd.DataFrame, network_pairs) -> pd.DataFrame:
    """Per model and pair: RUN1 seconds per iteration on 1 x N and 2 x N/2, the stall, its share, the slowdown,
    and ``compute``, the instance's compute alone (RUN0 divided by the pair's dilation), in instance seconds."""
    rows = table[(table.experiment == "breakdown") & (table.run == "RUN1")].set_index(["model", "configuration"])
    compute = _compute_seconds(table, "breakdown")
    out = []
    for pair, single in network_pairs:
        for model in rows.index.get_level_values(0).unique():
            if (model, pair) in rows.index and (model, single) in rows.index:
                one_row = rows.loc[(model, single)]
                one, two = one_row["instance_seconds"], rows.loc[(model, pair), "instance_seconds"]
                stall, stall_share, slowdown = network_stall(one, two)
                out.append(dict(model=model, pair=f"{pair} vs {single}", one_machine=one, two_machines=two,
                                stall=stall, share=stall_share, slowdown=slowdown,
                                compute=compute[(model, one_row["batch_size"])] / one_row["dilation"]))
    return pd.DataFrame(out)


def network_at(network: pd.DataFrame, efficiency_ratio: float = 1.0, network_efficiency: float = 1.0) -> pd.DataFrame:
    """A :func:`network_table` re-expressed for C2's assumptions, first order like :func:`share_at_efficiency`: a
    GPU ``efficiency_ratio`` times as efficient as the one emulated divides ``compute`` by it while the link
    seconds stay, and a network at ``network_efficiency`` of its line rate takes the stall (two machines less one)
    that many times longer: ``one' = c / r + (one - c)``, ``two' = one' + (two - one) / e``."""
    if efficiency_ratio <= 0 or not 0 < network_efficiency <= 1:
        raise ValueError(f"efficiency_ratio must be > 0 and network_efficiency in (0, 1], got {efficiency_ratio} "
                         f"and {network_efficiency}")
    one = network.compute / efficiency_ratio + (network.one_machine - network.compute)
    two = one + (network.two_machines - network.one_machine) / network_efficiency
    return network.assign(one_machine=one, two_machines=two, stall=two - one, share=(two - one) / one,
                          slowdown=two / one)


def workers_table(table: pd.DataFrame) -> pd.DataFrame:
    """Interconnect stall share against workers in one machine, per model and GPU family (PCIe K80, NVLink V100):
    the difference RUN1 - RUN0 (``share``) and the instrumented wait for communication (``exposed_share``)."""
    compute = _compute_seconds(table, "workers")
    rows = table[(table.experiment == "workers") & (table.run != "RUN0")]
    out = []
    for r in rows.itertuples():
        family, _, g = r.configuration.partition(":")
        stall, stall_share = interconnect_stall(compute[(r.model, r.batch_size)], r.seconds)
        out.append(dict(model=r.model, family={"p2": "p2 (K80, PCIe)", "p3": "p3 (V100, NVLink)"}[family],
                        workers=int(g), seconds=r.seconds, stall=stall, share=stall_share,
                        exposed_share=r.comm_exposed_seconds / r.seconds))
    return pd.DataFrame(out)


def epoch_table(table: pd.DataFrame, epoch_samples: int, spot: dict, on_demand: dict) -> pd.DataFrame:
    """Per model x configuration (RUN1, synthetic data): instance hours and $ per epoch, samples per second."""
    rows = table[(table.experiment == "breakdown") & (table.run == "RUN1")]
    out = []
    for r in rows.itertuples():
        iterations = epoch_samples / r.samples_per_iteration
        hours = iterations * r.instance_seconds / 3600
        spread = r.seconds_std / r.dilation
        out.append(dict(model=r.model, configuration=r.configuration, gpus=r.workers,
                        samples_per_second=r.samples_per_iteration / r.instance_seconds,
                        samples_per_second_std=r.samples_per_iteration * spread / r.instance_seconds ** 2,
                        hours_per_epoch=hours, cost_per_epoch=hours * on_demand[r.configuration],
                        spot_cost_per_epoch=hours * spot[r.configuration],
                        price_per_hour=on_demand[r.configuration]))
    return pd.DataFrame(out)


def expensive_not_cheapest(epochs: pd.DataFrame) -> pd.DataFrame:
    """Per model: the most expensive configuration ($/h), the cheapest and the fastest per epoch, and whether the
    most expensive one is cheapest *beyond the noise*: its cost per epoch plus 1.96 of its standard deviations
    (from the repeats' spread in throughput; cost is price / throughput) below every other configuration's cost
    minus 1.96 of theirs."""
    out = []
    for model, group in epochs.groupby("model", sort=False):
        priciest = group.price_per_hour.idxmax()
        spread = 1.96 * group.cost_per_epoch * group.samples_per_second_std / group.samples_per_second
        others = group.index != priciest
        out.append(dict(model=model, most_expensive=group.loc[priciest, "configuration"],
                        cheapest_per_epoch=group.loc[group.cost_per_epoch.idxmin(), "configuration"],
                        fastest_per_epoch=group.loc[group.hours_per_epoch.idxmin(), "configuration"],
                        cheapest_beyond_noise=bool(group.cost_per_epoch[priciest] + spread[priciest]
                                                   < (group.cost_per_epoch - spread)[others].min())))
    frame = pd.DataFrame(out)
    frame["most_expensive_is_cheapest"] = frame.most_expensive == frame.cheapest_per_epoch
    frame["most_expensive_is_fastest"] = frame.most_expensive == frame.fastest_per_epoch
    return frame


def macro_table(table: pd.DataFrame, width: int) -> pd.DataFrame:
    """Depth family: each model's layers, gradient tensors and bytes beside its communication stall (instance ms)."""
    compute = _compute_seconds(table, "macro")
    rows = table[(table.experiment == "macro") & (table.run != "RUN0")]
    out = []
    for r in rows.itertuples():
        feats = models.features(models.build(r.model, width))
        stall = (r.seconds - compute[(r.model, r.batch_size)]) / r.dilation
        out.append(dict(model=r.model, family=_family(r.model), **feats, stall_ms=1000 * stall,
                        buckets=len(r.bucket_bytes)))
    return pd.DataFrame(out)


def _family(model: str) -> str:
    return ("ResNet without BatchNorm" if model.startswith("nobn_") else "ResNet without shortcuts"
            if model.startswith("nores_") else "VGG" if model.startswith("vgg") else "ResNet")


def macro_fits(macro: pd.DataFrame):
    return fit_features(macro, "stall_ms")


def recommendations(epochs: pd.DataFrame, n_epochs: int, budget_factors, spot: bool = False) -> pd.DataFrame:
    """Per model and budget (a multiple of the fastest configuration's time for ``n_epochs``): the recommender's
    answer with on-demand (or spot) prices."""
    price = "spot_cost_per_epoch" if spot else "cost_per_epoch"
    out = []
    for model, group in epochs.groupby("model", sort=False):
        hours = dict(zip(group.configuration, group.hours_per_epoch))
        per_hour = {c: p / h for c, p, h in zip(group.configuration, group[price], group.hours_per_epoch)}
        fastest = min(hours.values()) * n_epochs
        for factor in budget_factors:
            rec = recommend(hours, per_hour, n_epochs, factor * fastest)
            out.append(dict(model=model, budget_factor=factor, budget_hours=factor * fastest,
                            choice=rec.choice or "none meets the budget", hours=rec.hours, cost=rec.cost,
                            fastest=rec.fastest, answer=str(rec)))
    return pd.DataFrame(out)


def hook_calibration(table: pd.DataFrame) -> pd.DataFrame:
    """Every logged bucket (last iteration of each DDP run): modelled link seconds against link start -> done."""
    rows = table[table.bucket_bytes.map(len) > 0]
    out = [dict(model=r.model, configuration=r.configuration, nbytes=b, modelled=m, measured=s)
           for r in rows.itertuples() for b, m, s in zip(r.bucket_bytes, r.bucket_modelled, r.bucket_measured)]
    return pd.DataFrame(out)


# ---- the claims' measurements -------------------------------------------------------------------------

def noise_floor(stalls: pd.DataFrame) -> float:
    """The median of ``|RUN1 / RUN0 - 1|`` on single-GPU instances, where RUN1 communicates nothing: how far two
    runs of the same work differ here, the uncertainty of every difference of runs."""
    single = stalls[stalls.workers == 1]
    return float((single.RUN1 / single.RUN0 - 1).abs().median())


def share_at_efficiency(share: pd.Series | float, ratio: float):
    """An interconnect share re-expressed for a GPU ``ratio`` times as efficient as the one emulated: its compute
    time divides by ``ratio`` while the stall's link seconds stay, ``ratio s / (ratio s + 1 - s)``. First order:
    it keeps the seconds DDP hid behind the backward pass, so it understates the share of a faster GPU (less to
    hide behind) and overstates that of a slower one."""
    return ratio * share / (ratio * share + 1 - share)


def interconnect_claim(stalls: pd.DataFrame, efficiency_ratio: float = 1.0) -> Measurement:
    """Claim C1: the largest interconnect share over models x multi-GPU one-machine configurations (a
    :func:`breakdown` frame). Its interval is the noise of the configuration it judges: the share measured in each
    block repeat (``RUN0_repeats``, ``RUN1_repeats``: repeat r's RUN1 against the RUN0s bracketing it), a 95 %
    Student-t half-width around the pooled share; with one repeat, plus or minus the :func:`noise_floor` of all
    single-GPU runs. ``efficiency_ratio`` re-expresses every share for a GPU that much more efficient
    (:func:`share_at_efficiency`, C1's assumption)."""
    stalls = stalls.assign(interconnect_share=share_at_efficiency(stalls.interconnect_share, efficiency_ratio))
    one_machine = stalls[~stalls.configuration.str.startswith("2x") & (stalls.workers > 1)]
    top = one_machine.loc[one_machine.interconnect_share.idxmax()]
    share = float(top.interconnect_share)
    repeats = 1 - np.asarray(top.RUN0_repeats) / np.asarray(top.RUN1_repeats)
    if len(repeats) > 1:
        spread = from_samples(share_at_efficiency(repeats, efficiency_ratio).tolist())
        half = (spread.interval[1] - spread.interval[0]) / 2
        noise = f"the 95 % t-interval of its {len(repeats)} repeats' shares ({spread.value:.1%} on average)"
    else:
        half = noise_floor(stalls)
        noise = f"+- the noise floor {half:.1%} (one repeat)"
    return Measurement(share, (share - half, share + half),
                       note=f"{top.model} on {top.configuration}; the instrumented exposed communication there is "
                            f"{top.exposed_comm / top.RUN1:.0%}; {int((one_machine.interconnect_share >= 0.5).sum())} "
                            f"of {len(one_machine)} pairs at 50 % or more; interval: {noise}")


def interconnect_control(stalls: pd.DataFrame, efficiency_ratio: float = 1.0) -> Measurement:
    """C1's negative control: :func:`interconnect_claim` on the least communication-heavy model of the frame alone
    (the one whose largest one-machine interconnect share is smallest), which must not reach half an iteration: if
    even it did, the emulation would make every model communication-bound and C1's rule could not fail."""
    one_machine = stalls[~stalls.configuration.str.startswith("2x") & (stalls.workers > 1)]
    least = one_machine.groupby("model").interconnect_share.max().idxmin()
    measured = interconnect_claim(stalls[stalls.model == least], efficiency_ratio)
    return replace(measured, note=f"least communication-heavy model: {least}; {measured.note}")


def network_claim(network: pd.DataFrame, noise: float = 0.0) -> Measurement:
    """Claim C2 ("up to 5x"): the largest two-machine slowdown over the models and instance pairs (a
    :func:`network_table`), with each pair's own largest beside it. Its interval is what a relative error of
    ``noise`` (the :func:`noise_floor`) on each of the two timings it divides allows: ``s (1 - n) / (1 + n)`` to
    ``s (1 + n) / (1 - n)``. The noise is also the claim's power check (:data:`NOISE_RESOLVES_BAND`): a noise of
    100 % or more bounds nothing, and the claim is not testable."""
    if network.empty:
        return not_testable("no pair of `network_pairs` was profiled")
    if noise < 0:
        raise ValueError(f"noise must be >= 0 (a relative error), got {noise}")
    if noise >= 1.0:
        return not_testable(f"the timing noise floor is {noise:.0%}: two timings that far apart bound no ratio of "
                            "them").given(resolution=noise)
    worst = network.loc[network.groupby("pair").slowdown.idxmax()]
    largest = float(worst.slowdown.max())
    return Measurement(largest, (largest * (1 - noise) / (1 + noise), largest * (1 + noise) / (1 - noise)),
                       per_setting=dict(zip(worst.pair, worst.slowdown)),
                       note="; ".join(f"{r.pair}: {r.model}" for r in worst.itertuples())
                            + f"; smallest slowdown {network.slowdown.min():.2f}x; interval: the noise floor "
                            f"{noise:.1%} on each timing").given(resolution=noise)


def priciest_not_cheapest(verdicts: pd.DataFrame) -> Measurement:
    """Check K1: the share of models whose most expensive configuration is not the cheapest per epoch (an
    :func:`expensive_not_cheapest` frame). Its interval runs to the share where it is not cheapest beyond the
    timing noise: a model whose priciest configuration wins only within the noise leaves the check undecided."""
    value = float((~verdicts.most_expensive_is_cheapest).mean())
    within = verdicts[verdicts.most_expensive_is_cheapest & ~verdicts.cheapest_beyond_noise]
    note = "cheapest per epoch: " + ", ".join(f"{r.model} {r.cheapest_per_epoch}" for r in verdicts.itertuples())
    if len(within):
        note += "; the most expensive wins only within the timing noise for " + ", ".join(within.model)
    return Measurement(value, (value, float((~verdicts.cheapest_beyond_noise).mean())), note=note)


def bytes_fit(fits: dict) -> Measurement:
    """Check K2: the R² of the communication stall against gradient bytes (:func:`macro_fits`)."""
    return Measurement(float(fits["gradient_bytes"].r2),
                       note=", ".join(f"R² {feature.replace('_', ' ')} {fit.r2:.2f}" for feature, fit in fits.items()))


def cost_claim_not_testable() -> Measurement:
    """Claim C3 cannot be tested here (see check K1)."""
    return not_testable("the emulated instances' prices grow linearly with their GPUs, so the most expensive one "
                        "could be cheapest per epoch only if communication took negative time: the verdict is fixed "
                        "by the price table (check K1), not measured")


def macro_claim_not_testable() -> Measurement:
    """Claim C4 cannot be tested here (see check K2)."""
    return not_testable(EMULATED + ", so the fit recovers the emulator's formula (check K2); testing the claim "
                        "needs real links, e.g. the netem validation of benchmarks/ddl_link_validation.py")
