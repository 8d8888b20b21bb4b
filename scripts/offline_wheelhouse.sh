#!/usr/bin/env bash
# Build a wheelhouse for a machine that has no package index (a GPU node, a
# cluster's compute node) and already has torch, numpy, scipy, matplotlib,
# cloudpickle, click, psutil and python-dateutil.
#
#   bash scripts/offline_wheelhouse.sh [DIR] [PYTHON_VERSION]     # here, online
#   (copy DIR and the repository to the other machine)
#   bash scripts/offline_install.sh [DIR] [TARGET]                # there, offline
#
# DIR defaults to .whl (ignored by git), PYTHON_VERSION to 3.12. Meta-World's
# wheel is about 37 MB; everything else about 12 MB. Ray is left out: without
# it, everything but the Ray sampler backend works (see _garage_compat).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.whl}
PYVER=${2:-3.12}
PIP=(python3 -m pip)
mkdir -p "$DIR"
PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64 manylinux_2_5_x86_64; do
    PLATFORMS+=(--platform "$p")
done
for p in mujoco==3.3.0 gymnasium==1.4.0 gym-notices==0.1.0 cma==2.7.0 setproctitle==1.3.8 \
         tensorboardX==2.6.5 Farama-Notifications==0.0.6 glfw==2.11.0 PyOpenGL==3.1.10 \
         metaworld==3.1.1 absl-py==2.5.1 etils==1.15.0 ImageIO==2.38.1; do
    "${PIP[@]}" download -q --no-deps --only-binary=:all: --python-version "$PYVER" \
        --implementation cp "${PLATFORMS[@]}" -d "$DIR" "$p"
done
# No wheels upstream for these: build pure-Python ones.
for p in akro==0.0.8 dowel==0.0.4 gym==0.26.2 garage==2021.3.0; do
    "${PIP[@]}" wheel -q --no-deps --no-build-isolation -w "$DIR" "$p"
done
du -sh "$DIR"
