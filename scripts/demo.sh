#!/usr/bin/env bash
# The main job on the built-in example: compile the MLP's training step for 2
# ranks with DDP and train it for 50 steps, printing the loss.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/demo
mkdir -p "$out"
set -x
build/bin/shard-compile --strategy=ddp --world-size=2 examples/mlp.mlir -o "$out/mlp-ddp2"
mpiflags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || mpiflags+=(--allow-run-as-root)
OPENBLAS_NUM_THREADS=1 mpirun "${mpiflags[@]}" -np 2 "$out/mlp-ddp2" --steps 50 --log-every 5
