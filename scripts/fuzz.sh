#!/usr/bin/env bash
# Fuzzes the compiler: builds shard-fuzz (ASan + UBSan + libFuzzer, in its
# own build dir) and runs it for SECONDS (default 120) on a seed corpus cut
# from the tests. A crash, a hang or a sanitizer report fails the run; the
# input is kept in BUILD/fuzz/artifacts. docs/Reliability.md, "Fuzzing".
#
#   scripts/fuzz.sh [SECONDS] [libFuzzer flags...]
#   AUTOSHARD_FUZZ_BUILD=DIR   build dir (default build-fuzzer)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-120}
shift || true
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: SECONDS must be a positive number of seconds, got '$seconds'" >&2
  exit 2
fi
build=${AUTOSHARD_FUZZ_BUILD:-build-fuzzer}

export CCACHE_BASEDIR="$PWD"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
    -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld \
    -DPython3_EXECUTABLE=/usr/bin/python3 \
    -DAUTOSHARD_ENABLE_RUNTIME=OFF -DAUTOSHARD_ENABLE_FUZZER=ON
fi
cmake --build "$build" --target shard-fuzz shard-gen

work="$build/fuzz"
seeds="$work/seeds"        # rebuilt each run from the tests
corpus="$work/corpus"      # what the fuzzer finds; kept between runs
artifacts="$work/artifacts"
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus" "$artifacts"

# Every test file, cut at the `// -----` of -split-input-file, and the
# examples: valid steps at every stage of the pipeline and one invalid case
# per verifier diagnostic.
find test examples -name '*.mlir' | sort | while read -r file; do
  awk -v prefix="$seeds/$(echo "$file" | tr '/' '_')" '
    BEGIN { out = prefix ".0" }
    /^\/\/ -----/ { close(out); out = prefix "." ++n; next }
    { print > out }' "$file"
done
# Whole models from shard-gen: small ones, since the fuzzer mutates bytes.
gen() {
  "$build/bin/shard-gen" "$@" 2>>"$work/shard-gen.log" ||
    { cat "$work/shard-gen.log" >&2; exit 1; }
}
rm -f "$work/shard-gen.log"
small=(--layers=1 --hidden=16 --heads=2 --vocab=32 --seq=8 --micro-batch=4)
gen gpt2-tiny -o "$seeds/gen-gpt2-tiny.mlir"
gen llama-tiny -o "$seeds/gen-llama-tiny.mlir"
gen gpt2-tiny "${small[@]}" -o "$seeds/gen-gpt2-small.mlir"
gen gpt2-tiny "${small[@]}" --optimizer=sgd --tie-embeddings \
  -o "$seeds/gen-gpt2-sgd-tied.mlir"
gen llama-tiny "${small[@]}" --kv-heads=1 --ffn=32 --precision=bf16 \
  --grad-accum=2 --max-grad-norm=1 -o "$seeds/gen-llama-bf16-accum.mlir"
# Random ops of the train dialect, one per file, mostly invalid: each op's
# verifier and shape rules, from edge values up.
python3 tools/shard-fuzz/random-ops.py \
  include/autoshard/Dialect/Train/IR/TrainOps.td "$seeds" 2000
echo "fuzz.sh: $(ls "$seeds" | wc -l) seeds, $(ls "$corpus" | wc -l) inputs in $corpus"

log="$work/fuzz.log"
found_before=$(ls "$artifacts" | wc -l)
set +e
"$build/bin/shard-fuzz" "$corpus" "$seeds" \
  -dict=tools/shard-fuzz/mlir.dict \
  -max_total_time="$seconds" -max_len=65536 -timeout=30 \
  -artifact_prefix="$artifacts/" -print_final_stats=1 "$@" \
  2>&1 | tee "$log" | grep -E '^INFO: Seed|^#[0-9]+(:| +(INITED|DONE|pulse))|^stat::'
status=${PIPESTATUS[0]}
set -e
# With -fork=1 -ignore_crashes=1 the fuzzer goes on past a finding and
# exits 0: a new artifact fails the run all the same.
if [ "$status" -eq 0 ] && [ "$(ls "$artifacts" | wc -l)" -gt "$found_before" ]; then
  status=1
fi
if [ "$status" -ne 0 ]; then
  tail -n 80 "$log" >&2
  echo "fuzz.sh: shard-fuzz failed (status $status); the log is $log." >&2
  echo "  Replay an artifact:  $build/bin/shard-fuzz FILE" >&2
  echo "  Artifacts:           $(ls -t "$artifacts" | head -n 5 | tr '\n' ' ')" >&2
  echo "  Minimize it:         $build/bin/shard-fuzz -minimize_crash=1 -max_total_time=60 FILE" >&2
  echo "  then turn it into a lit test under test/ that expects a diagnostic." >&2
  exit "$status"
fi
echo "fuzz.sh: no crash in ${seconds}s; the log is $log"
