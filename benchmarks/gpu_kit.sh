#!/usr/bin/env bash
# The GPU kit (see benchmarks/gpu_kit.py): the wheels and datasets the GPU check needs on a bare lent GPU machine,
# gathered here into .gpu_kit/, checked to fit one device call, and the one command to run there printed.
# Usage: benchmarks/gpu_kit.sh [--dry-run]   (--dry-run: then run the check in a CPU stand-in of the GPU image)
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3
exec "$python" benchmarks/gpu_kit.py "$@"
