#!/usr/bin/env bash
# Build a wheelhouse for a machine that has no package index (a GPU node, a
# cluster's compute node) and already has torch, numpy, scipy, matplotlib,
# cloudpickle, click, psutil and python-dateutil.
#
#   bash scripts/offline_wheelhouse.sh [DIR] [PYTHON_VERSION] [--built-only]   # here, online
#   (copy DIR and the repository to the other machine)
#   bash scripts/offline_install.sh [DIR] [TARGET]                             # there, offline
#
# DIR defaults to .whl (ignored by git), PYTHON_VERSION to 3.12 (3.11 works
# too). Versions come from constraints.txt, the pins the test suite runs with.
# Meta-World's wheel is about 37 MB, 33 MB of it PNG textures that only rendering
# reads: the house gets a copy with them downscaled (scripts/slim_wheel.py; the same
# physics, checked bit for bit with --check-metaworld), 2.8 MB, so that the house
# (about 16 MB in all) travels beside the repository in a 64 MiB transfer. Ray and
# TensorBoard are left out: without them, everything but the Ray sampler
# backend and the TensorBoard viewer works (see garage_promp/_garage_compat.py).
# --built-only builds just the four packages that have no wheel upstream.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.whl}
PYVER=${2:-3.12}
BUILT_ONLY=${3:-}
PIP=("${PYTHON:-python3}" -m pip)
mkdir -p "$DIR"

pin() {  # the constraints.txt line of a package, e.g. "cma==3.3.0"
    grep -i "^$1==" constraints.txt || { echo "constraints.txt has no pin for $1" >&2; exit 1; }
}

# No wheels upstream for these: build pure-Python ones, in a throw-away virtual
# environment with the build tools pinned: every rebuild uses the same setuptools,
# whatever the Python's own (one that predates bdist_wheel, without the wheel
# package, fails with "invalid command 'bdist_wheel'").
BUILD_VENV=$(mktemp -d)
trap 'rm -rf "$BUILD_VENV"' EXIT
"${PYTHON:-python3}" -m venv "$BUILD_VENV"
BUILD_PIP=("$BUILD_VENV/bin/python" -m pip)
"${BUILD_PIP[@]}" install -q 'setuptools==75.8.2' 'wheel==0.45.1' "$(pin pillow)"
for p in akro dowel gym; do
    "${BUILD_PIP[@]}" wheel -q --no-cache-dir --no-deps --no-build-isolation -w "$DIR" "$(pin "$p")"
done
"${BUILD_PIP[@]}" wheel -q --no-cache-dir --no-deps --no-build-isolation -w "$DIR" garage==2021.3.0
if [ "$BUILT_ONLY" = "--built-only" ]; then
    exit 0
fi

PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64 manylinux_2_5_x86_64; do
    PLATFORMS+=(--platform "$p")
done
for p in mujoco gymnasium gym-notices cma setproctitle tensorboardX Farama-Notifications glfw \
         PyOpenGL metaworld absl-py etils ImageIO threadpoolctl; do
    "${PIP[@]}" download -q --no-deps --only-binary=:all: --python-version "$PYVER" \
        --implementation cp "${PLATFORMS[@]}" -d "$DIR" "$(pin "$p")"
done
FULL="$BUILD_VENV/full"
mkdir -p "$FULL"
mv "$DIR"/metaworld-*.whl "$FULL"/
"$BUILD_VENV/bin/python" scripts/slim_wheel.py "$FULL"/metaworld-*.whl "$DIR"
du -sh "$DIR"
