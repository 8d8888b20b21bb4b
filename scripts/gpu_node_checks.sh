#!/usr/bin/env bash
# What only a GPU node with many cores can measure, in one go, within a time budget:
#
#   eval "$(bash scripts/offline_install.sh .whl /tmp/site | tail -1)"   # offline nodes
#   bash scripts/gpu_node_checks.sh OUT_DIR [SECONDS] [WORKERS]
#
# In order, each step given part of what is left of SECONDS (default 540):
#   1. machine.txt: the GPU, CPUs and versions, and each step's exit status;
#   2. test_device.log: pytest tests/algos/test_device.py (the GPU update against the CPU);
#   3. table/throughput.json: the HumanoidRandDirec ProMP iteration on the CPU and the GPU,
#      then every algorithm side by side with garage's MAMLTRPO at the paper batch on
#      WORKERS (default 14) workers, with GPU columns;
#   4. workers/workers.json: ProMP over 4, 8 and WORKERS workers on HalfCheetahFwdBack, and
#      on ML1 reach-v3 where Meta-World is installed.
# The benchmarks stop starting measurements at their share of the budget
# (benchmarks/throughput.py --time-limit), save after each one and list what they skipped;
# `benchmarks/throughput.py --summarize OUT_DIR/table/throughput.json` prints a table again.
# A measurement started just before its limit runs to its end (garage's MAMLTRPO, about a
# minute on 16 cores), so give the script's caller a minute or two more than SECONDS.
# Step 4 on ML1 reach-v3 takes about 2 minutes per worker count on an H100 node's 16 cores
# (2026-11-28): with a 15-minute lease, run it on its own or with fewer counts.
set -u
usage='usage: gpu_node_checks.sh OUT_DIR [SECONDS] [WORKERS]'
OUT=${1:?$usage}
BUDGET=${2:-540}
WORKERS=${3:-14}
case "$BUDGET$WORKERS" in *[!0-9]*) echo "$usage (SECONDS and WORKERS: whole numbers)" >&2; exit 2;; esac
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
cd "$(dirname "$0")/.." || exit 2
PY=${PYTHON:-python3}
if ! "$PY" -c 'import garage_promp, garage' 2>/dev/null; then
    echo "garage_promp does not import with $PY: install it first (scripts/install.sh, or the" \
         "exports printed by scripts/offline_install.sh), or name the Python in PYTHON=" >&2
    exit 2
fi
T0=$(date +%s)
left() { local t=$(( BUDGET - ($(date +%s) - T0) )); echo $(( t > 1 ? t : 1 )); }
export PYTHONUNBUFFERED=1

{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  echo "cpus: $(getconf _NPROCESSORS_ONLN)"
  "$PY" -c 'import sys, torch, numpy, mujoco; print(sys.version.split()[0], torch.__version__, numpy.__version__, mujoco.__version__, "cuda:", torch.cuda.is_available())'
  "$PY" -c 'from garage_promp.envs._cstep import main; main()'
} > "$OUT/machine.txt" 2>&1

t=$(left); timeout "$(( t < 150 ? t : 150 ))" "$PY" -m pytest -q -p no:cacheprovider \
    tests/algos/test_device.py > "$OUT/test_device.log" 2>&1
echo "test_device exit: $?" >> "$OUT/machine.txt"

# Two thirds of what is left, less a minute for the measurement running at the limit.
t=$(left); t=$(( t * 2 / 3 - 60 )); t=$(( t > 1 ? t : 1 ))
"$PY" benchmarks/throughput.py --env HalfCheetahFwdBack --batch paper --n-workers "$WORKERS" \
    --memory-env HumanoidRandDirec --gpu auto --time-limit "$t" --out "$OUT/table" \
    > "$OUT/throughput.log" 2>&1
echo "table exit: $?" >> "$OUT/machine.txt"

COUNTS=$(printf '%s\n' 4 8 "$WORKERS" | sort -nu | paste -sd, -)
ENVS=(--env HalfCheetahFwdBack)
if "$PY" -c 'import metaworld' 2>/dev/null; then ENVS+=(--env ML1:reach-v3); fi
t=$(left); t=$(( t - 60 )); t=$(( t > 1 ? t : 1 ))
"$PY" benchmarks/throughput.py --mode workers "${ENVS[@]}" --worker-counts "$COUNTS" \
    --algo ProMP --time-limit "$t" --out "$OUT/workers" > "$OUT/workers.log" 2>&1
echo "workers exit: $?" >> "$OUT/machine.txt"
cat "$OUT/machine.txt"
