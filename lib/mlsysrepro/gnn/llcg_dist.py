"""LLCG and PSGD-PA on real processes: ``torch.distributed`` (gloo), one process per machine plus the server.

Rank 0 is the server, rank ``p + 1`` machine ``p``; each machine keeps only its part of the graph.
A round is two collectives (:func:`worker`):

1. ``broadcast`` of the global parameters from the server to every machine (the model down);
2. ``gather`` of every machine's parameters at the server (the model up), which averages them
   and, for LLCG, corrects on the full graph (:class:`.llcg.Server`).

Every rank counts the bytes of the tensors it sends (a broadcast to P machines counts P copies),
so the byte log is measured, not computed from the config. Machines and server draw their
randomness from :func:`.llcg.round_seed` exactly as the serial engine does, so both engines end
with the same model (up to float round-off: different thread counts sum in different orders).

:func:`run_distributed` starts the processes on this host (:func:`mlsysrepro.core.dist.launch`).
On several hosts, start the same worker with ``torchrun`` on each of them, e.g. two hosts with
the server and 4 machines on the first and 4 machines on the second::

    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 5 --master-addr HOST0 --master-port 29500 \\
        -m mlsysrepro.gnn.llcg_dist --graph tolokers --parts 8 --method llcg --out llcg.json
    torchrun --nnodes 2 --node-rank 1 --nproc-per-node 4 --master-addr HOST0 --master-port 29500 \\
        -m mlsysrepro.gnn.llcg_dist --graph tolokers --parts 8 --method llcg

(the world size, summed over hosts, must be ``parts + 1``; rank 0 writes the log).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist

from ..core.dist import init_from_env, launch, leave
from .datasets import GraphData, load_graph
from .llcg import LLCGConfig, Machine, Server, flatten, log_row, round_seed, unflatten, weighted_average
from .partition import Partitioning, partition_graph

ENGINE_METHODS = ("psgd_pa", "llcg")


def worker(rank: int, world_size: int, data: GraphData, partitioning: Partitioning, cfg: LLCGConfig,
           seed: int) -> dict:
    """One rank's whole run; the server returns the per-round log and the final state, a machine nothing."""
    num_machines = world_size - 1
    if num_machines != partitioning.num_parts:
        raise ValueError(f"world_size must be parts + 1 = {partitioning.num_parts + 1}, got {world_size}")
    if rank == 0:
        server = Server(data, cfg, seed)
        state = server.initial_state()
        weights = partitioning.train_sizes()
    else:
        local = partitioning.local[rank - 1]  # a machine keeps its own part only
        del data, partitioning
        machine = Machine(local, local.train_idx, cfg, cfg.batch_size, None, seed)
        state = machine.model.state_dict()
    like = {k: v.detach().clone() for k, v in state.items()}
    vector = flatten(like)
    sent, rows = [], []
    if rank == 0:
        rows.append(log_row(0, server.evaluate(state), 0, 0, 0.0))
    for r in range(1, cfg.rounds + 1):
        t0 = time.perf_counter()
        if rank == 0:
            vector = flatten(state)
        dist.broadcast(vector, src=0)
        sent_now = vector.numel() * vector.element_size() * num_machines if rank == 0 else 0
        if rank == 0:
            gathered = [torch.empty_like(vector) for _ in range(world_size)]
            dist.gather(vector, gathered, dst=0)
            state = weighted_average([unflatten(v, like) for v in gathered[1:]], weights)
            if cfg.method == "llcg":
                state = server.correct(state, cfg.server_steps, round_seed(seed, r, -1))
            seconds = time.perf_counter() - t0
            rows.append(log_row(r, server.evaluate(state), 0, 0, seconds))
        else:
            new_state, _ = machine.train_round(unflatten(vector, like), cfg.steps_in_round(r - 1),
                                               round_seed(seed, r, rank - 1))
            upload = flatten(new_state)
            dist.gather(upload, dst=0)
            sent_now += upload.numel() * upload.element_size()
        sent.append(sent_now)
    # bookkeeping after the run: the server learns what every rank sent in each round
    totals = torch.tensor(sent, dtype=torch.float64)
    dist.reduce(totals, dst=0)
    if rank == 0:
        for row, total in zip(rows[1:], totals.tolist()):
            row["model_bytes"] = row["bytes"] = int(total)
        return {"rows": rows, "state": state}
    return {}


def run_distributed(data: GraphData, partitioning: Partitioning, cfg: LLCGConfig, seed: int = 0,
                    timeout: float = 600.0):
    """Run ``cfg`` on ``parts + 1`` local processes; returns the same (log, final state) as :func:`.llcg.run_serial`,
    with ``model_bytes`` summed from what the ranks sent and ``seconds`` the server's wall time per round."""
    import pandas as pd

    if cfg.method not in ENGINE_METHODS:
        raise ValueError(f"engine='distributed' runs method in {ENGINE_METHODS}, got {cfg.method!r} "
                         "(GGS and the single machine run on the serial engine)")
    results = launch(worker, partitioning.num_parts + 1, (data, partitioning, cfg, seed), timeout=timeout)
    return pd.DataFrame(results[0]["rows"]), results[0]["state"]


def run(data: GraphData, partitioning: Partitioning, cfg: LLCGConfig, seed: int = 0, engine: str = "serial"):
    """The one entry point of both engines: ``engine`` is ``"serial"`` or ``"distributed"``."""
    from .llcg import run_serial

    if engine == "serial":
        return run_serial(data, partitioning, cfg, seed)
    if engine == "distributed":
        return run_distributed(data, partitioning, cfg, seed)
    raise ValueError(f"engine must be 'serial' or 'distributed', got {engine!r}")


def main(argv: list[str] | None = None) -> None:
    """Entry point under ``torchrun``: every rank loads and partitions the graph the same way."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graph", default="cora")
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--partition", default="metis", choices=("metis", "random"))
    parser.add_argument("--method", default="llcg", choices=ENGINE_METHODS)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--local-steps", type=int, default=8)
    parser.add_argument("--model", default="gcn")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="rank 0 writes the per-round log here (JSON)")
    args = parser.parse_args(argv)
    rank, world_size = init_from_env()
    # rank 0 fetches (and PyG processes) the dataset first; ranks sharing a filesystem then read it
    if rank == 0:
        data = load_graph(args.graph)
    dist.barrier()
    if rank != 0:
        data = load_graph(args.graph)
    partitioning = partition_graph(data, args.parts, args.partition, args.seed)
    cfg = LLCGConfig(method=args.method, rounds=args.rounds, local_steps=args.local_steps, model=args.model)
    result = worker(rank, world_size, data, partitioning, cfg, args.seed)
    if rank == 0:
        text = json.dumps(result["rows"], indent=1)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
        else:
            print(text)
    leave()


if __name__ == "__main__":
    main()
