#!/usr/bin/env bash
# The main job: train a small GPT-2 on the shipped public-domain corpus (KJV
# Genesis and Exodus, byte-level) with DDP on 2 MPI ranks. It prints the
# corpus's unigram entropy, which a model that ignores context cannot beat,
# then the loss every 50 steps and the loss on the held-out tokens every 200.
# docs/Training.md holds its log and duration (scripts/refresh-docs.sh --all
# reruns it; STEPS=N shortens it).
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/demo
mkdir -p "$out"
mpiflags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || mpiflags+=(--allow-run-as-root)
steps=${STEPS:-600}

set -x
python3 scripts/tokenize.py data/corpus/kjv-genesis-exodus.txt "$out/kjv"
build/bin/shard-gen gpt2-tiny --layers=4 --hidden=128 --seq=128 \
  --micro-batch=32 -o "$out/gpt.mlir"
# --with-eval links the model's evaluation step into the training binary:
# --eval-every evaluates 20 held-out batches every 200 steps and at the end.
# --plan-report says before launch what each rank will hold and send; the
# run's summary measures the same peak and bytes.
build/bin/shard-compile --strategy=ddp --world-size=2 --with-eval \
  --plan-report "$out/gpt.mlir" -o "$out/gpt-ddp2"
OPENBLAS_NUM_THREADS=1 mpirun "${mpiflags[@]}" -np 2 "$out/gpt-ddp2" \
  --steps "$steps" --log-every 50 --data "$out/kjv/train.bin" \
  --eval-every 200 --eval-steps 20 --eval-data "$out/kjv/val.bin" \
  --save-params "$out/gpt-final.safetensors"
# The same evaluation from the saved parameters: the model compiled
# forward-only (no backward pass, no optimizer) as a binary of its own.
build/bin/shard-compile --forward-only --strategy=ddp --world-size=2 \
  "$out/gpt.mlir" -o "$out/gpt-eval"
OPENBLAS_NUM_THREADS=1 mpirun "${mpiflags[@]}" -np 2 "$out/gpt-eval" \
  --steps 20 --log-every 20 --data "$out/kjv/val.bin" \
  --load-params "$out/gpt-final.safetensors"
