#!/usr/bin/env bash
# The collection's GPU check (see benchmarks/gpu_check.py): every CUDA path at smoke, then the GPU benchmarks.
# Without CUDA it prints that it skipped and exits 0. Usage: benchmarks/gpu_check.sh [--out FILE] [--budget SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3
exec "$python" benchmarks/gpu_check.py "$@"
