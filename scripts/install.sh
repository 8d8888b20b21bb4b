#!/usr/bin/env bash
# Install garage_promp, garage 2021.3.0 and every pinned dependency into ./.venv.
# Safe to run twice: an existing .venv is reused and pip skips what is there.
#
# Why each step is the way it is:
# - pip==24.2: newer pips refuse garage 2021.3.0 outright ("Distributions from
#   PyPI cannot declare direct URL dependencies", about its metaworld dev extra),
#   even with --no-deps.
# - torch==2.13.0 first and exactly: this resolves to the CPU wheel; a looser
#   spec pulls several GB of CUDA packages.
# - garage with --no-deps: its pins (torch<1.8, tensorflow, gym 0.17,
#   mujoco-py, dowel==0.0.3) cannot be met on Python 3.11; we install the
#   dependencies its PyTorch side needs ourselves (setup.cfg, constraints.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" 'pip==24.2'
"${PIP[@]}" 'torch==2.13.0' -c constraints.txt
"${PIP[@]}" -c constraints.txt -e '.[dev,all]'
# Last, so pip's conflict check (skipped with --no-deps) never reports garage's
# unmeetable pins as an "ERROR: pip's dependency resolver ..." line.
"${PIP[@]}" --no-deps 'garage==2021.3.0'
# Lets `import garage` come before `import garage_promp` (garage_promp/_import_order.py).
.venv/bin/python -m garage_promp._import_order >/dev/null
# The lean path's compiled stepping loop (garage_promp/envs/_cstep.py): built now rather
# than on first use; without a C compiler the envs step from Python (same numbers).
.venv/bin/python -c 'from garage_promp.envs._cstep import main; main()'
.venv/bin/python -c "import sys, garage, garage_promp; assert 'tensorflow' not in sys.modules; print('garage_promp', garage_promp.__version__, 'installed in .venv')"
