"""Executes the notebooks through papermill: what ``./run_all.sh`` calls.

``python -m mlsysrepro.runner [--scale smoke|default] [--only a,b] [--jobs N] [--list]`` runs every
``notebooks/*.ipynb`` (the template first) with ``-p scale <scale>`` and kernel ``python3``,
writes executed copies to ``build/executed/<scale>/``, keeps going past a failing notebook,
prints a summary (notebook, status, wall time, paper claims' verdicts, and the verdicts that changed against the
results the run replaced) and exits 1 if any failed. Ctrl-C stops the running kernels at once (they run in sessions
of their own, out of the terminal's reach) and prints the summary of what finished, exiting 130. A notebook's figures and results.json reach its folder only
when it succeeds (:meth:`mlsysrepro.core.claims.Report.save`); a failed notebook gets a marker beside the folder
(:func:`mlsysrepro.core.paths.failure_marker`) and shows no claims, here and in REPRODUCTION.md, until it succeeds
again. After a ``default`` run the runner regenerates REPRODUCTION.md and the README's paper table, and every
successful ``default`` notebook's wall time is recorded, cold or warm cache, in ``figures/runtimes.json``
(:mod:`mlsysrepro.core.runtimes`), from which the README's runtime table is generated.

``--jobs N`` runs N notebooks at once and splits the machine's cores between them: each kernel gets
``cores // N`` torch threads (``OMP_NUM_THREADS``) and as many task workers (``MLSYSREPRO_CORES``, read by
:func:`mlsysrepro.core.tasks.default_workers`). The default, 1, runs them one after another with every core:
on 2 cores two notebooks only fight over the threads, and timings taken side by side are slower. A notebook that
caches what it timed (the DDL profiles) keeps those slower timings for later runs: the runner says so, and they are
redone by deleting the notebook's folder under ``data/cache/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import reproduction
from .core import orphans, paths, runtimes

NOTEBOOKS = paths.REPO_ROOT / "notebooks"
RUNNABLE_SCALES = ("smoke", "default")  # `paper` is documented, not run here


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))  # "_template" sorts before every paper


def last_results(name: str, scale: str) -> dict | None:
    """The results.json of the notebook's last successful run at ``scale``, None if there is none."""
    path = paths.output_dir(name, scale) / "results.json"
    return json.loads(path.read_text()) if path.exists() else None


def verdict_changes(before: dict | None, after: dict | None) -> list[str]:
    """``C3: fails -> inconclusive`` for every claim whose verdict differs between two results.json."""
    old = {c["id"]: c["verdict"] for c in (before or {}).get("claims", [])}
    new = {c["id"]: c["verdict"] for c in (after or {}).get("claims", [])}
    return [f"{claim}: {old.get(claim, 'new')} -> {new.get(claim, 'gone')}"
            for claim in sorted(set(old) | set(new)) if old.get(claim) != new.get(claim)]


#: The kernel managers of the notebooks running now: Ctrl-C must reach their kernels, which run in sessions of
#: their own (jupyter_client starts them so) and never see the terminal's SIGINT.
RUNNING_KERNELS: weakref.WeakSet = weakref.WeakSet()


def stop_kernels() -> None:
    """SIGKILL the process group of every running kernel: the kernel and what it started (task workers and ranks die
    with it anyway, :mod:`mlsysrepro.core.orphans`)."""
    for manager in list(RUNNING_KERNELS):
        process = getattr(getattr(manager, "provisioner", None), "process", None)
        if process is None or process.poll() is not None:
            continue
        try:
            os.killpg(os.getpgid(process.pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            process.kill()


def _ipc_kernel_manager():
    """A kernel manager whose kernel talks to papermill over Unix sockets (IPC), not TCP: nothing listens on a
    network port, and the kernel does not warn about unencrypted TCP once per notebook. Each kernel's sockets live
    in a folder of their own: two notebooks run side by side (``--jobs 2``) would otherwise pick the same socket
    names in one folder, and each kernel would reject the other's signed messages."""
    import tempfile

    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            RUNNING_KERNELS.add(self)

        @default("transport")
        def _default_transport(self):
            return "ipc"

        @default("ip")
        def _default_ip(self):
            return str(Path(tempfile.mkdtemp(prefix="mlsysrepro-kernel-")) / "kernel")

        def format_kernel_cmd(self, extra_arguments=None):
            """The kernel's command, started through :mod:`mlsysrepro.core.orphans` so that it dies with this
            process however this process dies (SIGKILL included, and under a child subreaper)."""
            command = super().format_kernel_cmd(extra_arguments)
            return [sys.executable, orphans.__file__, str(os.getpid()), *command]

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart=restart)
            if not restart:
                shutil.rmtree(Path(self.ip).parent, ignore_errors=True)

        cleanup_resources = _async_cleanup_resources

    return IPCKernelManager


#: Papermill's per-cell limit, there to stop a hung kernel. A notebook's heaviest cell trains all of its models
#: (structured_dropout's accuracy cell: 35 min cold at ``default`` on one 2-core machine, over 60 min on a slower
#: one), so one hour killed that cell on the slower machine and every run it had finished was lost.
CELL_TIMEOUT_S = 3 * 3600


def run_one(notebook: Path, scale: str, timeout: int, parameters: dict | None = None) -> str | None:
    """Execute one notebook at ``scale`` (with further papermill ``parameters``, e.g. ``{"device": "cuda"}``);
    returns None on success, else the error's first line."""
    import papermill

    out = paths.build_dir() / "executed" / scale / notebook.name
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(
            str(notebook),
            str(out),
            parameters={"scale": scale, **(parameters or {})},
            kernel_name="python3",
            cwd=str(NOTEBOOKS),
            progress_bar=sys.stdout.isatty(),
            execution_timeout=timeout,
            kernel_manager_class=_ipc_kernel_manager(),
        )
    except Exception as error:  # papermill raises PapermillExecutionError, timeouts, kernel deaths
        return (str(error).strip().splitlines() or [type(error).__name__])[-1][:200]
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the notebooks through papermill.")
    parser.add_argument("--scale", default=paths.COMMITTED_SCALE, choices=RUNNABLE_SCALES)
    parser.add_argument("--only", default="", help="comma-separated notebook names, e.g. _template,mvs_gnn")
    parser.add_argument("--list", action="store_true", help="list the notebooks and exit")
    parser.add_argument("--timeout", type=int, default=CELL_TIMEOUT_S, help="per-cell execution timeout in seconds")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks run at once (the cores are split between them)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")

    found = notebooks()
    if args.list:
        print("\n".join(nb.stem for nb in found))
        return 0
    if args.only:
        wanted = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = sorted(set(wanted) - {nb.stem for nb in found})
        if unknown:
            parser.error(f"--only: unknown notebook(s) {unknown}; available: {[nb.stem for nb in found]}")
        found = [nb for nb in found if nb.stem in wanted]

    if args.jobs > 1:
        print(f"note: with --jobs {args.jobs} every timing is taken beside another notebook; a notebook that caches "
              "its timed profiles keeps them (delete its data/cache/<paper> folder and run it alone to redo them)",
              flush=True)
        share = str(max(1, (os.cpu_count() or 1) // args.jobs))
        os.environ.update(OMP_NUM_THREADS=share, MKL_NUM_THREADS=share, MLSYSREPRO_CORES=share)  # the kernels inherit
    start, lock = time.monotonic(), threading.Lock()

    def run(i: int, nb: Path) -> tuple:
        entries = runtimes.cache_entries(nb.stem)
        with lock:
            print(f"[{i}/{len(found)}] {nb.stem} (scale={args.scale}, {len(entries)} cache entries) ...", flush=True)
        t0 = time.monotonic()
        before = last_results(nb.stem, args.scale)
        error = run_one(nb, args.scale, args.timeout)
        wall = time.monotonic() - t0
        kinds: tuple[str, ...] = ()
        if error is None and args.scale == paths.COMMITTED_SCALE:
            with lock:
                kinds = runtimes.record_run(nb.stem, wall, entries, args.jobs)
        status = "ok" if error is None else "FAILED"
        with lock:
            timed = (" (recorded as " + " and ".join(kinds) + ")" if kinds else
                     " (not recorded: a partly cached run is neither cold nor warm)"
                     if error is None and args.scale == paths.COMMITTED_SCALE else "")
            print(f"[{i}/{len(found)}] {nb.stem}: {status} in {wall:.0f} s{timed}"
                  f" (total {time.monotonic() - start:.0f} s){'' if error is None else ': ' + error}", flush=True)
        if error is not None:  # the folder keeps the last successful run's files; the marker says they are stale
            marker = paths.failure_marker(nb.stem, args.scale)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(error + "\n")
            return nb.stem, status, wall, "-", []
        after = last_results(nb.stem, args.scale)
        return nb.stem, status, wall, reproduction.verdict_summary(after), verdict_changes(before, after)

    pool = ThreadPoolExecutor(args.jobs)
    futures = [pool.submit(run, i, nb) for i, nb in enumerate(found, 1)]
    try:
        rows = [future.result() for future in futures]
    except KeyboardInterrupt:  # Ctrl-C: stop the kernels now, then say what finished
        print("\ninterrupted: stopping the running notebooks", flush=True)
        stop_kernels()
        pool.shutdown(wait=True, cancel_futures=True)
        rows = [f.result() for f in futures if f.done() and not f.cancelled() and f.exception() is None]
        interrupted = True
    else:
        pool.shutdown()
        interrupted = False

    if args.scale == paths.COMMITTED_SCALE and not interrupted:
        reproduction.main([])
    width = max([len(r[0]) for r in rows] + [8])
    print(f"\n{'notebook':<{width}}  status  wall (s)  paper claims")
    for name, status, wall, claims, _ in rows:
        print(f"{name:<{width}}  {status:<6}  {wall:8.0f}  {claims}")
    changed = [(name, changes) for name, _, _, _, changes in rows if changes]
    if changed:
        print("\nverdicts changed against the results this run replaced:")
        for name, changes in changed:
            print(f"  {name}: " + "; ".join(changes))
    failed = [r[0] for r in rows if r[1] != "ok"]
    print(f"\n{len(rows) - len(failed)} passed, {len(failed)} failed" + (f": {', '.join(failed)}" if failed else "")
          + (f"; interrupted: {len(found) - len(rows)} not run" if interrupted else ""))
    return 130 if interrupted else 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
