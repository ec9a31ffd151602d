"""The runner's summary is honest: a failed notebook shows no claims and keeps its last good results whole."""

import json
import shutil

import nbformat
import pytest

from mlsysrepro import catalog, reproduction, runner
from mlsysrepro.core import paths


def test_verdict_changes_name_each_claim_that_moved():
    before = {"claims": [{"id": "C1", "verdict": "holds"}, {"id": "C2", "verdict": "fails"}]}
    after = {"claims": [{"id": "C1", "verdict": "holds"}, {"id": "C2", "verdict": "inconclusive"},
                        {"id": "C3", "verdict": "holds"}]}
    assert runner.verdict_changes(before, after) == ["C2: fails -> inconclusive", "C3: new -> holds"]
    assert runner.verdict_changes(None, None) == []


@pytest.mark.slow
def test_a_failing_notebook_shows_no_claims_and_leaves_the_last_good_results(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLSYSREPRO_BUILD_DIR", str(tmp_path / "build"))  # the kernels inherit it
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    shutil.copy(catalog.TEMPLATE.notebook, notebooks / "_template.ipynb")
    monkeypatch.setattr(runner, "NOTEBOOKS", notebooks)
    assert runner.main(["--scale", "smoke"]) == 0
    out = paths.output_dir("_template", "smoke")
    good = {p.name: p.read_bytes() for p in out.iterdir()}
    summary = capsys.readouterr().out
    assert "_template  ok" in summary and "1 of 1 hold" in summary

    broken = nbformat.read(notebooks / "_template.ipynb", as_version=4)
    broken.cells.insert(len(broken.cells) // 2, nbformat.v4.new_code_cell('raise RuntimeError("broken on purpose")'))
    nbformat.write(broken, notebooks / "_template.ipynb")
    assert runner.main(["--scale", "smoke"]) == 1
    summary = capsys.readouterr().out
    row = next(line for line in summary.splitlines() if line.startswith("_template  FAILED"))
    assert row.split()[-1] == "-"  # no claims: not the last good run's, not a half-written one
    assert {p.name: p.read_bytes() for p in out.iterdir()} == good
    marker = paths.failure_marker("_template", "smoke")
    assert "broken on purpose" in marker.read_text()

    shutil.copy(catalog.TEMPLATE.notebook, notebooks / "_template.ipynb")
    assert runner.main(["--scale", "smoke"]) == 0
    assert not marker.exists()


def test_reproduction_shows_no_claims_for_a_paper_whose_last_run_failed(monkeypatch, tmp_path):
    paper = catalog.by_name("mvs_gnn")
    marker = tmp_path / ".mvs_gnn.failed"
    monkeypatch.setattr(paths, "failure_marker", lambda name, scale: marker if name == "mvs_gnn" else tmp_path / "x")
    assert reproduction._results(paper) is not None
    marker.write_text("boom\n")
    assert reproduction._results(paper) is None
    assert reproduction.status(paper, None) == "failed in its last run"
    assert "| failed in its last run | - |" in reproduction.paper_table()
    assert json.loads(paper.results_path().read_text())["paper"] == "mvs_gnn"  # the committed file is untouched


def test_the_runner_talks_to_its_kernels_over_unix_sockets():
    assert runner._ipc_kernel_manager()().transport == "ipc"


@pytest.mark.slow
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="parent-death signals are Linux's")
def test_sigterm_to_the_runner_leaves_no_rank_training(tmp_path):
    """The chain of the issue: the runner executes a notebook whose kernel launches ranks; SIGTERM to the runner
    takes the kernel down, and the kernel's ranks with it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.core.test_dist import _alive

    pids = tmp_path / "pids"
    pids.mkdir()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"import sys\nsys.path.insert(0, {str(paths.REPO_ROOT)!r})\n"
        "from tests.core.test_dist import sleeps_and_writes_its_pid\n"
        "from mlsysrepro.core.dist import launch\n"
        f"launch(sleeps_and_writes_its_pid, 2, args=({str(pids)!r},), timeout=300)")])
    nbformat.write(notebook, tmp_path / "sleeper.ipynb")
    script = ("import papermill\nfrom mlsysrepro.runner import _ipc_kernel_manager\n"
              f"papermill.execute_notebook({str(tmp_path / 'sleeper.ipynb')!r}, {str(tmp_path / 'out.ipynb')!r}, "
              "kernel_name='python3', progress_bar=False, kernel_manager_class=_ipc_kernel_manager())\n")
    launcher = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path)
    deadline = time.monotonic() + 90
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    ranks = [int(p.read_text()) for p in pids.iterdir()]
    assert len(ranks) == 2 and all(_alive(pid) for pid in ranks)
    os.kill(launcher.pid, signal.SIGTERM)
    launcher.wait()
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in ranks), "a rank outlived the runner"


@pytest.mark.slow
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="process groups are POSIX's")
def test_ctrl_c_stops_the_runner_and_its_kernel_and_prints_the_summary(tmp_path):
    """The kernel runs in a session of its own, out of the terminal's SIGINT: the runner must stop it itself, at
    once, and still say what finished."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.core.test_dist import _alive

    folder = tmp_path / "notebooks"
    folder.mkdir()
    pid_file = tmp_path / "kernel.pid"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)")])
    notebook.cells.insert(0, nbformat.v4.new_code_cell("scale = 'smoke'", metadata={"tags": ["parameters"]}))
    notebook.metadata.update(kernelspec={"name": "python3", "language": "python", "display_name": "Python 3"},
                             language_info={"name": "python"})
    nbformat.write(notebook, folder / "sleeper.ipynb")
    # a terminal's Ctrl-C: SIGINT raises KeyboardInterrupt (a shell starting pytest in the background would have it
    # ignored, and an ignored SIGINT is inherited)
    script = ("import signal, sys\nfrom pathlib import Path\nfrom mlsysrepro import runner\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
              f"runner.NOTEBOOKS = Path({str(folder)!r})\nsys.exit(runner.main(['--scale', 'smoke']))\n")
    started = subprocess.Popen([sys.executable, "-c", script], cwd=paths.REPO_ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        kernel = int(pid_file.read_text())
        assert _alive(kernel)
        interrupted = time.monotonic()
        started.send_signal(signal.SIGINT)
        output, _ = started.communicate(timeout=60)
    finally:  # whatever failed, leave nothing running
        started.kill()
        if pid_file.exists() and pid_file.read_text() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert time.monotonic() - interrupted < 30, output
    assert started.returncode == 130, output
    assert "interrupted: stopping the running notebooks" in output and "0 passed, 1 failed: sleeper" in output
    assert not _alive(kernel), "the kernel outlived the runner"


@pytest.mark.slow
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="prctl is Linux's")
def test_a_kernel_dies_with_a_runner_killed_under_a_child_subreaper(tmp_path):
    """systemd --user, tini and docker --init adopt orphans: a runner killed with SIGKILL (nothing of it runs to clean
    up) while its kernel starts must take the kernel with it. ipykernel's own parent watch starts with the kernel and
    only looks for PID 1 when its parent is already gone by then, so under a subreaper the kernel idles forever."""
    import subprocess
    import sys

    folder = tmp_path / "notebooks"
    folder.mkdir()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\ntime.sleep(300)")])
    notebook.cells.insert(0, nbformat.v4.new_code_cell("scale = 'smoke'", metadata={"tags": ["parameters"]}))
    notebook.metadata.update(kernelspec={"name": "python3", "language": "python", "display_name": "Python 3"},
                             language_info={"name": "python"})
    nbformat.write(notebook, folder / "sleeper.ipynb")
    start_runner = ("import sys\nfrom pathlib import Path\nfrom mlsysrepro import runner\n"
                    f"runner.NOTEBOOKS = Path({str(folder)!r})\nsys.exit(runner.main(['--scale', 'smoke']))\n")
    # the subreaper: adopts what its descendants orphan, kills the runner once the kernel runs, then reports
    subreaper = f"""
import ctypes, os, signal, subprocess, sys, time
from pathlib import Path
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
runner = subprocess.Popen([sys.executable, "-c", {start_runner!r}], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
def kernel_of(runner):  # the runner's child whose command starts an ipykernel, once it is spawned
    for task in Path(f"/proc/{{runner}}/task").glob("*"):
        for child in (task / "children").read_text().split():
            if b"ipykernel_launcher" in Path(f"/proc/{{child}}/cmdline").read_bytes():
                return int(child)
kernel, deadline = None, time.monotonic() + 120
while kernel is None and time.monotonic() < deadline:
    try:
        kernel = kernel_of(runner.pid)
    except OSError:
        pass
    time.sleep(0.01)
os.kill(runner.pid, signal.SIGKILL)  # while the kernel starts: before ipykernel watches its parent
runner.wait()
time.sleep(8)
reaped = set()
while True:  # the adopted children that died: a dead kernel is reaped here, a live one is not
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if pid == 0:
        break
    reaped.add(pid)
alive = kernel not in reaped and os.path.exists(f"/proc/{{kernel}}")
if alive:
    os.kill(kernel, signal.SIGKILL)
print("kernel alive" if alive else "kernel gone" if kernel else "no kernel started")
"""
    result = subprocess.run([sys.executable, "-c", subreaper], cwd=paths.REPO_ROOT, capture_output=True, text=True,
                            timeout=240)
    assert result.stdout.strip().splitlines()[-1:] == ["kernel gone"], result.stdout + result.stderr
