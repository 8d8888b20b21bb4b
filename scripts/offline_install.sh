#!/usr/bin/env bash
# Install the wheelhouse of scripts/offline_wheelhouse.sh without a package
# index, into TARGET (default /tmp/garage_promp_site), then print the exports
# that make the repository importable. Run from anywhere:
#   bash scripts/offline_install.sh [DIR] [TARGET]
#   eval "$(bash scripts/offline_install.sh .whl /tmp/site | tail -1)"
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/.whl}
TARGET=${2:-/tmp/garage_promp_site}
python3 -m pip install -q --no-index --no-deps --no-compile --target "$TARGET" "$DIR"/*.whl
echo "export PYTHONPATH=$TARGET:$ROOT OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MUJOCO_GL=disable"
