#!/usr/bin/env bash
# mlsysrepro's two commands:
#   ./run_all.sh [--scale smoke|default] [--only a,b] [--jobs N] [--list]
#                                                               run every notebook (figures + REPRODUCTION.md);
#                                                               --jobs N: N at once, the cores split between them
#   ./run_all.sh test [pytest args...]                            unit tests + every notebook at scale=smoke,
#                                                               in two pytest-xdist processes (MLSYSREPRO_TEST_PROCESSES)
#   ./run_all.sh book                                             the HTML book under build/book/ (after a run)
# Both first make sure .venv exists and holds the project (`pip install -e ".[dev]"`).
set -euo pipefail
cd "$(dirname "$0")"

VENV=.venv
STAMP="$VENV/.installed"

ensure_env() {
    if [[ ! -x "$VENV/bin/python" ]]; then
        echo "==> creating $VENV"
        python3 -m venv "$VENV"
    fi
    # Reinstall when pyproject.toml changed since the last install.
    if [[ ! -f "$STAMP" || pyproject.toml -nt "$STAMP" ]]; then
        echo "==> installing mlsysrepro and its dependencies into $VENV (about a minute)"
        "$VENV/bin/python" -m pip install --quiet --upgrade pip
        "$VENV/bin/python" -m pip install --quiet -e ".[dev]"
        touch "$STAMP"
    fi
}

export MPLBACKEND=Agg
ensure_env

if [[ "${1:-}" == "test" ]]; then
    shift
    # two test processes (pytest-xdist), all of a notebook's tests in one of them (tests/conftest.py); "-n 0" runs one
    exec "$VENV/bin/python" -m pytest -n "${MLSYSREPRO_TEST_PROCESSES:-2}" --dist loadscope "$@"
fi
if [[ "${1:-}" == "book" ]]; then
    shift
    exec "$VENV/bin/python" -m mlsysrepro.book "$@"
fi
exec "$VENV/bin/python" -m mlsysrepro.runner "$@"
