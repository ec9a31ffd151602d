#!/usr/bin/env bash
# The GPU kit (see benchmarks/gpu_kit.py): the wheels and datasets the GPU check needs on a bare lent GPU machine,
# gathered here into .gpu_kit/, checked to fit one device call, and the one command to run there printed.
# Usage: benchmarks/gpu_kit.sh [--dry-run]   (--dry-run: then run the check in a CPU stand-in of the GPU image)
set -euo pipefail
cd "$(dirname "$0")/.."
# The project's environment (run_all.sh builds .venv on first use): the kit reads the dataset registry through it.
if [[ -z "${PYTHON:-}" ]]; then
    ./run_all.sh --list >/dev/null
    PYTHON=.venv/bin/python
fi
exec "$PYTHON" benchmarks/gpu_kit.py "$@"
