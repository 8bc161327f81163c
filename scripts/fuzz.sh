#!/usr/bin/env bash
# Fuzzes the compiler and the runtime's readers. Builds shard-fuzz (ASan +
# UBSan + libFuzzer, in its own build dir) and runs it for SECONDS (default
# 120) on a seed corpus cut from the tests; then fuzzes the readers of the
# files users hand to the tools and binaries, READER_SECONDS each (default
# 15): device files (shard-fuzz-device), and, built from runtime/ alone in
# build-fuzzer-runtime/, step manifests, checkpoints (MANIFEST and shard
# file), safetensors (--load-params), asdata and token files. A crash, a
# hang or a sanitizer report fails the run; the input is kept in
# BUILD/fuzz/artifacts. docs/Reliability.md, "Fuzzing".
#
#   scripts/fuzz.sh [SECONDS] [libFuzzer flags...]
#   AUTOSHARD_FUZZ_BUILD=DIR          compiler's build dir (default build-fuzzer)
#   AUTOSHARD_FUZZ_RUNTIME_BUILD=DIR  readers' build dir (default build-fuzzer-runtime)
#   AUTOSHARD_FUZZ_READER_SECONDS=N   seconds per reader (default 15; 0 skips them)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-120}
shift || true
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: SECONDS must be a positive number of seconds, got '$seconds'" >&2
  exit 2
fi
build=${AUTOSHARD_FUZZ_BUILD:-build-fuzzer}
runtime_build=${AUTOSHARD_FUZZ_RUNTIME_BUILD:-build-fuzzer-runtime}
reader_seconds=${AUTOSHARD_FUZZ_READER_SECONDS:-15}
if ! [[ "$reader_seconds" =~ ^[0-9]+$ ]]; then
  echo "fuzz.sh: AUTOSHARD_FUZZ_READER_SECONDS must be a number of seconds, got '$reader_seconds'" >&2
  exit 2
fi

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
cmake --build "$build" --target shard-fuzz shard-fuzz-device shard-gen

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

# run_fuzzer NAME BINARY SECONDS WORK CORPUS [seed dirs...] -- [flags...]:
# fuzzes into CORPUS (kept between runs) with artifacts in WORK/artifacts,
# fails on a finding, and says how to replay it.
run_fuzzer() {
  local name=$1 binary=$2 time=$3 where=$4 corpus=$5
  shift 5
  local dirs=()
  while [ "$1" != "--" ]; do dirs+=("$1"); shift; done
  shift
  local log="$where/fuzz-$name.log" artifacts="$where/artifacts"
  mkdir -p "$corpus" "$artifacts"
  local found_before
  found_before=$(ls "$artifacts" | wc -l)
  set +e
  "$binary" "$corpus" "${dirs[@]}" -max_total_time="$time" \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$@" \
    2>&1 | tee "$log" | grep -E '^INFO: Seed|^#[0-9]+(:| +(INITED|DONE|pulse))|^stat::'
  local status=${PIPESTATUS[0]}
  set -e
  # With -fork=1 -ignore_crashes=1 the fuzzer goes on past a finding and
  # exits 0: a new artifact fails the run all the same.
  if [ "$status" -eq 0 ] && [ "$(ls "$artifacts" | wc -l)" -gt "$found_before" ]; then
    status=1
  fi
  if [ "$status" -ne 0 ]; then
    tail -n 80 "$log" >&2
    echo "fuzz.sh: $name failed (status $status); the log is $log." >&2
    echo "  Replay an artifact:  $binary FILE" >&2
    echo "  Artifacts:           $(ls -t "$artifacts" | head -n 5 | tr '\n' ' ')" >&2
    echo "  Minimize it:         $binary -minimize_crash=1 -max_total_time=60 FILE" >&2
    echo "  then turn it into a regression test (test/fuzz/ for the compiler," >&2
    echo "  runtime/fuzz/regressions/ for the readers)." >&2
    exit "$status"
  fi
  echo "fuzz.sh: $name: no crash in ${time}s; the log is $log"
}

run_fuzzer shard-fuzz "$build/bin/shard-fuzz" "$seconds" "$work" "$corpus" "$seeds" -- \
  -dict=tools/shard-fuzz/mlir.dict -max_len=65536 -timeout=30 "$@"

[ "$reader_seconds" -eq 0 ] && exit 0

# Device files, from the shipped ones.
device_seeds="$work/seeds-device"
rm -rf "$device_seeds" && mkdir -p "$device_seeds"
cp data/devices/*.json "$device_seeds/"
run_fuzzer device "$build/bin/shard-fuzz-device" "$reader_seconds" "$work" \
  "$work/corpus-device" "$device_seeds" -- -max_len=16384 -timeout=30

# The runtime's readers, built from runtime/ alone with the same sanitizers.
if [ ! -f "$runtime_build/build.ninja" ]; then
  cmake -S runtime -B "$runtime_build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
    -DAUTOSHARD_ENABLE_CUDA=OFF -DAUTOSHARD_RUNTIME_FUZZER=ON
fi
readers=(manifest checkpoint safetensors asdata tokens)
targets=()
for reader in "${readers[@]}"; do targets+=("asrt-fuzz-$reader"); done
cmake --build "$runtime_build" --target "${targets[@]}"
reader_work="$runtime_build/fuzz"
reader_seeds="$reader_work/seeds"
rm -rf "$reader_seeds"
python3 runtime/fuzz/make-seeds.py "$reader_seeds"
# A real checkpoint and step manifest, from a training binary of the
# regular build (scripts/test.sh builds it before CI fuzzes), when it is.
trainer=${AUTOSHARD_BUILD:-build}/runtime/tests/driver/fake_zero_ws1
if [ -x "$trainer" ]; then
  ck="$reader_work/checkpoint-seed"
  rm -rf "$ck"
  "$trainer" --steps 1 --checkpoint-dir "$ck" > /dev/null
  "$trainer" --print-manifest > "$reader_seeds/manifest/fake-zero3"
  { cat "$ck"/step-00000001/MANIFEST; printf '%%%%file\n'
    cat "$ck"/step-00000001/rank-00000.safetensors; } > "$reader_seeds/checkpoint/fake-zero3"
  cp "$ck"/step-00000001/rank-00000.safetensors "$reader_seeds/safetensors/shard-file"
else
  echo "fuzz.sh: no $trainer: the checkpoint reader starts from a MANIFEST alone" >&2
fi
for reader in "${readers[@]}"; do
  # Inputs that once crashed a reader run first, every time.
  regressions=()
  [ -d "runtime/fuzz/regressions/$reader" ] && regressions=("runtime/fuzz/regressions/$reader")
  run_fuzzer "$reader" "$runtime_build/fuzz/asrt-fuzz-$reader" "$reader_seconds" \
    "$reader_work" "$reader_work/corpus-$reader" "$reader_seeds/$reader" \
    "${regressions[@]}" -- -max_len=16384 -timeout=30
done
echo "fuzz.sh: every reader ran ${reader_seconds}s without a finding"
