#!/usr/bin/env bash
# Runs every test: lit (dialect, passes, tools, end to end on MPI ranks) and
# the runtime's unit tests, through ctest. GPU tests skip without a device.
set -euo pipefail
cd "$(dirname "$0")/../build"
export OPENBLAS_NUM_THREADS=1
ctest --output-on-failure "$@"
