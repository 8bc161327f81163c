#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks (idempotent), then configures
# and builds autoshard into build/.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22
  libclang-rt-22-dev
  ninja-build ccache cmake
  openmpi-bin libopenmpi-dev libopenblas-dev zlib1g-dev
  libgloo-dev  # CPU collectives of torchrun-style launches (no MPI)
  libgtest-dev libgmock-dev libbenchmark-dev python3 python3-numpy
  python3-venv librsvg2-bin
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi

# The Python side (autoshard.torch: the PyTorch front end, its tests and
# benchmarks) lives in one virtual environment, .venv, with the packages
# from PyPI at the versions the tests were written against; the package
# itself is put on the environment's path (python/). The C++ build and the
# numpy references do not need it.
venv_packages=(torch==2.15.0 transformers==5.24.0 safetensors==0.8.0 numpy)
if ! .venv/bin/python -c "import torch, transformers, safetensors, numpy" \
    2>/dev/null; then
  echo "setup: installing ${venv_packages[*]} into .venv (about 2 minutes)"
  /usr/bin/python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check "${venv_packages[@]}"
fi
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$PWD/python" > "$site/autoshard.pth"

export CCACHE_BASEDIR="$PWD"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
    -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld \
    -DPython3_EXECUTABLE=/usr/bin/python3
fi
cmake --build build
