#!/usr/bin/env bash
# The collection's GPU check (see benchmarks/gpu_check.py): every CUDA path at smoke, then the GPU benchmarks.
# Without CUDA it prints that it skipped and exits 0. Usage: benchmarks/gpu_check.sh [--out FILE] [--budget SECONDS]
#   [--dry-run]. The interpreter: $PYTHON if set, else the first of .venv/bin/python and python3 whose torch sees a
# GPU (on a lent GPU machine only the image's python3 does; benchmarks/gpu_kit.sh prepares what it lacks), else the
# first that exists.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
    for candidate in .venv/bin/python python3; do
        command -v "$candidate" >/dev/null || continue
        PYTHON="${PYTHON:-$candidate}"
        if "$candidate" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
            PYTHON="$candidate"
            break
        fi
    done
fi
exec "$PYTHON" benchmarks/gpu_check.py "$@"
