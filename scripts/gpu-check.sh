#!/usr/bin/env bash
# The one-shot device check of the CUDA backend (issue 7; docs/CudaBackend.md)
# in two halves, because the GPU machine has nvcc, CMake, ninja and PyTorch
# but no LLVM/MLIR (and perhaps no MPI, OpenBLAS, zlib or GoogleTest):
#
#   scripts/gpu-check.sh prepare [--bin DIR] [--inputs DIR]
#       On the build machine, with the compiler built: compiles the steps
#       the check runs into objects (shard-compile --emit=obj), trains the
#       tiny GPT on the CPU backend for the reference loss curve, tokenizes
#       the corpus, and copies GoogleTest's sources; all into DIR
#       (default gpu-inputs, git-ignored: carry it to the GPU machine).
#
#   scripts/gpu-check.sh [run] [--inputs DIR] [--build-dir DIR] [--no-build]
#                        [--minimal] [--timeout SECONDS] [--quick]
#       On the GPU machine: builds the runtime alone with the CUDA backend
#       (build-gpu), runs the CUDA kernels against the CPU backend's, links
#       the prepared objects with the CUDA runtime, trains the tiny GPT for
#       50 steps against the CPU loss curve, times GPT-2 small (bf16, seq
#       1024) and the same step in PyTorch (eager and torch.compile,
#       bench/torch_gpt2.py), and prints a table last.
#       --no-build    use --build-dir as it is (CI: the project's own build)
#       --minimal     configure as a machine without MPI, OpenBLAS, zlib and
#                     GoogleTest would (the latter built from the inputs)
#       --timeout S   bound on each stage (default 300)
#       --quick       fewer timed steps, no torch.compile
#       Its logs are under DIR/gpu-check (and copied to $OUT when that is set,
#       as the device tool sets it).
#
# Without a GPU every stage that needs one says so and the script exits 0
# having checked nothing on a device (the table says so). Exit status 1: a
# check failed; 2: a bad command line, missing inputs or a failed build.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

mode=run
if [[ $# -gt 0 && ( "$1" == prepare || "$1" == run ) ]]; then
  mode=$1
  shift
fi
inputs=gpu-inputs
bin=build/bin
build=build-gpu
do_build=1
minimal=0
quick=0
timeout_s=300
die() { echo "gpu-check.sh: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
  --inputs) [[ $# -ge 2 ]] || die "--inputs needs a directory"; inputs=$2; shift 2 ;;
  --bin) [[ $# -ge 2 ]] || die "--bin needs a directory"; bin=$2; shift 2 ;;
  --build-dir) [[ $# -ge 2 ]] || die "--build-dir needs a directory"; build=$2; shift 2 ;;
  --no-build) do_build=0; shift ;;
  --minimal) minimal=1; shift ;;
  --quick) quick=1; shift ;;
  --timeout)
    [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a positive number of seconds"
    timeout_s=$2
    shift 2
    ;;
  *) die "unknown argument '$1'; see the comment at the top of the script" ;;
  esac
done

# The steps of the check. The tiny GPT trains in f32 on the shipped corpus;
# GPT-2 small runs in bf16 (f32 masters and AdamW) at seq 1024.
tiny_batch=16
tiny_steps=50
gpt2_batch=8

# ---------------------------------------------------------------- prepare
if [[ $mode == prepare ]]; then
  for tool in shard-gen shard-compile; do
    [[ -x "$bin/$tool" ]] || die "no $bin/$tool: build the compiler first (README), or pass --bin"
  done
  rm -rf "$inputs"
  mkdir -p "$inputs/steps" "$inputs/tok" "$inputs/ref" || die "cannot create '$inputs'"
  run_logged() { # name command...: run, keep its output, fail loudly
    local name=$1
    shift
    if ! "$@" >"$inputs/$name.log" 2>&1; then
      tail -n 20 "$inputs/$name.log" >&2
      die "prepare: '$*' failed (log: $inputs/$name.log)"
    fi
  }
  run_logged tokenize python3 scripts/tokenize.py data/corpus/kjv-genesis-exodus.txt "$inputs/tok"
  run_logged gen-tiny "$bin/shard-gen" gpt2-tiny --micro-batch=$tiny_batch -o "$inputs/steps/tiny.mlir"
  run_logged gen-gpt2 "$bin/shard-gen" gpt2-small --micro-batch=$gpt2_batch --precision=bf16 \
    -o "$inputs/steps/gpt2-small.mlir"
  for step in tiny gpt2-small; do
    run_logged "obj-$step" "$bin/shard-compile" --strategy=ddp --world-size=1 --emit=obj \
      "$inputs/steps/$step.mlir" -o "$inputs/steps/$step.o"
  done
  # The reference: the same tiny step on the CPU backend, same data.
  run_logged exe-tiny-cpu "$bin/shard-compile" --backend=cpu --strategy=ddp --world-size=1 \
    "$inputs/steps/tiny.mlir" -o "$inputs/steps/tiny-cpu"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 \
    run_logged ref-tiny "$inputs/steps/tiny-cpu" --steps $tiny_steps --log-every 1 \
    --data "$inputs/tok/train.bin"
  cp "$inputs/ref-tiny.log" "$inputs/ref/tiny-cpu.log"
  rm -f "$inputs/steps/tiny-cpu" "$inputs"/steps/*.mlir
  # GoogleTest's sources, for a machine without GoogleTest (Debian ships
  # them in googletest, which the README's setup installs).
  [[ -d /usr/src/googletest ]] || die "no /usr/src/googletest: apt install googletest"
  cp -r /usr/src/googletest "$inputs/googletest"
  {
    echo "prepared $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "tiny: gpt2-tiny, f32, micro-batch $tiny_batch, $tiny_steps steps on the corpus"
    echo "gpt2-small: bf16, micro-batch $gpt2_batch, seq 1024"
  } >"$inputs/PREPARED"
  echo "gpu-check.sh: prepared '$inputs' ($(du -sh "$inputs" | cut -f1)); carry it to the GPU machine and run scripts/gpu-check.sh there"
  exit 0
fi

# -------------------------------------------------------------------- run
[[ -f "$inputs/PREPARED" ]] || die "no prepared inputs in '$inputs': run 'scripts/gpu-check.sh prepare' on the build machine first"
start=$(date +%s)
mkdir -p "$build" || die "cannot create '$build'"
report="$build/gpu-check"
mkdir -p "$report"
# On the device tool's machine, whatever lands in $OUT comes back: the logs
# and results go there too, however the run ends.
if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  trap 'mkdir -p "$OUT/gpu-check" && cp "$report"/*.log "$report"/*.txt "$report"/*.json "$OUT/gpu-check/" 2>/dev/null' EXIT
fi
results="$report/results.txt" # key=value lines for the table
: >"$results"
note() { echo "$1=$2" >>"$results"; }

if ((do_build)); then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [[ -x "$nvcc" ]] || die "no nvcc on PATH or in /usr/local/cuda/bin: install the CUDA toolkit"
  flags=(-DCMAKE_BUILD_TYPE=Release -DAUTOSHARD_ENABLE_CUDA=ON
    "-DAUTOSHARD_GTEST_SOURCE_DIR=$root/$inputs/googletest")
  if ((minimal)); then
    flags+=(-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
      -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON -DAUTOSHARD_USE_OPENBLAS=OFF)
  fi
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  if ! cmake -S runtime -B "$build" "${generator[@]}" "${flags[@]}" >"$report/configure.log" 2>&1; then
    tail -n 20 "$report/configure.log" >&2
    die "configuring the runtime failed (log: $report/configure.log)"
  fi
  # Without MPI the runtime also builds a fake training binary that checks
  # how it joins a job (runtime/tests/launch).
  launch_target=()
  grep -q "fake_train_nompi" "$build/build.ninja" "$build/Makefile" 2>/dev/null &&
    launch_target=(fake_train_nompi)
  if ! timeout "$timeout_s" cmake --build "$build" --parallel \
    --target asrt_cuda_runtime asrt_cuda_kernels_test asrt_cuda_device_test \
    "${launch_target[@]}" >"$report/build.log" 2>&1; then
    tail -n 30 "$report/build.log" >&2
    die "building the CUDA runtime and its tests failed (log: $report/build.log)"
  fi
fi

# The link line the runtime's build wrote (runtime/CMakeLists.txt).
link_line=$(find "$build" -name cuda-link-line.txt -type f 2>/dev/null | head -n 1)
[[ -n "$link_line" ]] || die "no cuda-link-line.txt under '$build': configure it with the CUDA toolkit"

# 1. Kernels against the CPU backend, and the device's own tests.
kernels_status=0
for t in asrt_cuda_kernels_test asrt_cuda_device_test; do
  test_bin=$(find "$build" -name "$t" -type f -perm -u+x 2>/dev/null | head -n 1)
  [[ -n "$test_bin" ]] || die "no $t under '$build'"
  timeout "$timeout_s" "$test_bin" --gtest_color=no >"$report/$t.log" 2>&1
  s=$?
  ((s == 124)) && echo "gpu-check.sh: $t ran past ${timeout_s}s" >&2
  ((s != 0)) && kernels_status=1
done
python3 - "$report" "$results" <<'PY'
import re, sys
report, results = sys.argv[1], sys.argv[2]
counts = {"OK": 0, "FAILED": 0, "SKIPPED": 0}
reason = ""
for name in ("asrt_cuda_kernels_test", "asrt_cuda_device_test"):
    for line in open(f"{report}/{name}.log", errors="replace"):
        m = re.match(r"\[\s+(OK|FAILED|SKIPPED)\s+\] \S+ \(", line)
        if m:
            counts[m.group(1)] += 1
        if not reason and "no CUDA device" in line:
            reason = line.strip()
with open(results, "a") as out:
    out.write(f"kernels={counts['OK']} passed, {counts['FAILED']} failed, {counts['SKIPPED']} skipped\n")
    if reason:
        out.write(f"no_device={reason}\n")
PY
no_device=$(grep -c '^no_device=' "$results")
# A runtime without MPI: its launch tests (one process, a torchrun-style
# rendezvous, mpirun refused), which need no GPU.
launch_status=0
if [[ -n "$(find "$build" -name fake_train_nompi -type f -perm -u+x 2>/dev/null | head -n 1)" ]]; then
  (cd "$build" && ctest -L launch --output-on-failure) >"$report/launch.log" 2>&1
  launch_status=$?
  note launch "$(grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$report/launch.log" || echo "see $report/launch.log")"
fi
# The machine as CUDA and the driver see it, for the table. A GPU that
# nvidia-smi lists but CUDA does not (a driver older than the toolkit's
# runtime: cudaErrorInsufficientDriver) is a failed check, not "no device".
gpu_list=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_list=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
  [[ -n "$gpu_list" ]] && note gpu "$gpu_list (driver), $("${nvcc:-nvcc}" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n 1)"
fi
driver_mismatch=0
if ((no_device)) && [[ -n "$gpu_list" ]]; then
  echo "gpu-check.sh: nvidia-smi lists '$gpu_list' but CUDA reports no device: $(grep '^no_device=' "$results" | cut -d= -f2-)" >&2
  echo "gpu-check.sh: the driver is probably older than the CUDA runtime the build used (nvcc $("${nvcc:-nvcc}" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n 1))" >&2
  driver_mismatch=1
fi

# 2. Link the prepared steps with the CUDA runtime.
cxx=${CXX:-$(command -v g++ || command -v c++ || command -v clang++)}
mapfile -t items <"$link_line"
for step in tiny gpt2-small; do
  if ! "$cxx" -o "$report/$step" "$inputs/steps/$step.o" -Wl,--start-group "${items[@]}" \
    -Wl,--end-group -lstdc++ -lpthread -lm >"$report/link-$step.log" 2>&1; then
    tail -n 20 "$report/link-$step.log" >&2
    die "linking $step failed (log: $report/link-$step.log)"
  fi
done

# A world of one runs as a plain process on the GPU machine (no mpirun).
# A runtime built with MPI initialises it as a singleton; the GPU machine's
# session may be root, which Open MPI refuses unless told (as in prepare).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
train_status=0
if ((no_device)); then
  # Without a GPU the binary must say so and fail, never crash.
  "$report/tiny" --steps 1 >"$report/tiny.log" 2>&1
  s=$?
  if ((s == 0 || s > 128)) || ! grep -q "no CUDA device" "$report/tiny.log"; then
    echo "gpu-check.sh: the CUDA binary did not end with 'no CUDA device' (status $s; log: $report/tiny.log)" >&2
    train_status=1
  fi
  note tiny "not run: no CUDA device (the binary said so, status $s)"
else
  # 3. The tiny GPT against the CPU backend's loss curve.
  timeout "$timeout_s" "$report/tiny" --steps $tiny_steps --log-every 1 \
    --data "$inputs/tok/train.bin" >"$report/tiny.log" 2>&1
  s=$?
  if ((s != 0)); then
    note tiny "failed (status $s; log: $report/tiny.log)"
    train_status=1
  elif python3 test/e2e/Inputs/runs.py losses "$inputs/ref/tiny-cpu.log" "$report/tiny.log" \
    --steps $tiny_steps --rtol 1e-3 >"$report/tiny-compare.log" 2>&1; then
    note tiny "$tiny_steps steps, losses within 1e-3 of the CPU backend's ($(tail -n 1 "$report/tiny-compare.log"))"
  else
    note tiny "losses differ from the CPU backend's: $(tail -n 1 "$report/tiny-compare.log")"
    train_status=1
  fi

  # 4. GPT-2 small: our binary, then PyTorch on the same GPU. Every step
  # is logged so that the table takes the median over the steps after the
  # first 3, as bench/torch_gpt2.py times its steps after 3 warmup steps
  # (the first step pays cuBLAS's and CUDA's one-time setup, which
  # --stats-json's mean_step_ms includes).
  steps=20
  ((quick)) && steps=8
  timeout "$timeout_s" "$report/gpt2-small" --steps $steps --log-every 1 \
    --stats-json "$report/gpt2-small.json" >"$report/gpt2-small.log" 2>&1
  note gpt2_status $?
  # Where the step's device time goes: a few more steps with each op's
  # kernels timed on the device (CUDA events), apart from the timed run.
  timeout "$timeout_s" "$report/gpt2-small" --steps 4 --device-op-times \
    --stats-json "$report/gpt2-small-ops.json" >"$report/gpt2-small-ops.log" 2>&1
  note ops_status $?
  torch_modes=both
  ((quick)) && torch_modes=eager
  if python3 -c "import torch" 2>/dev/null; then
    timeout "$timeout_s" python3 bench/torch_gpt2.py --model gpt2-small --batch $gpt2_batch \
      --seq 1024 --mode $torch_modes --steps $steps --warmup 3 \
      --json "$report/torch.json" >"$report/torch.log" 2>&1
    note torch_status $?
  else
    note torch_status "no torch"
  fi
fi

# The table, last.
python3 - "$report" "$results" "$(($(date +%s) - start))" "$gpt2_batch" <<'PY'
import json, os, re, sys
report, results, seconds, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
kv = {}
for line in open(results):
    key, _, value = line.rstrip("\n").partition("=")
    kv[key] = value
print(f"\nCUDA backend device check ({seconds} s; logs in {report})")
print(f"  kernels vs CPU backend : {kv.get('kernels', '?')}")
print(f"  tiny GPT vs CPU curve  : {kv.get('tiny', '?')}")
if "launch" in kv:
    print(f"  launch without MPI     : {kv['launch']}")
if "gpu" in kv:
    print(f"  gpu                    : {kv['gpu']}")
if "no_device" in kv:
    print(f"  skipped: {kv['no_device']}; nothing was checked on a GPU")
    sys.exit(0)
torch = {}
if os.path.exists(f"{report}/torch.json"):
    torch = json.load(open(f"{report}/torch.json"))
seq = 1024
flops = torch.get("flops_per_token")
peak = (torch.get("matmul_peak") or {}).get("tflops")
rows = []
ours = None
if kv.get("gpt2_status") == "0" and os.path.exists(f"{report}/gpt2-small.json"):
    stats = json.load(open(f"{report}/gpt2-small.json"))
    mean = stats.get("mean_step_ms")
    # The step lines' own times, after 3 warmup steps (see above).
    timed = []
    for line in open(f"{report}/gpt2-small.log", errors="replace"):
        m = re.match(r"step (\d+) loss \S+ ms (\S+)$", line.strip())
        if m and int(m.group(1)) > 3:
            timed.append(float(m.group(2)))
    timed.sort()
    ms = timed[len(timed) // 2] if timed else mean
    if ms:
        ours = ms
        rows.append(("autoshard (cuda)", ms))
        if timed and mean:
            print(f"  gpt2-small (autoshard)  : median of {len(timed)} steps after 3 warmup; "
                  f"mean of all {stats.get('steps')} steps {mean:.2f} ms")
else:
    print(f"  gpt2-small (autoshard)  : failed, status {kv.get('gpt2_status')} (log: {report}/gpt2-small.log)")
if kv.get("ops_status") == "0" and os.path.exists(f"{report}/gpt2-small-ops.json"):
    profile = json.load(open(f"{report}/gpt2-small-ops.json"))
    steps = max(profile.get("steps") or 1, 1)
    timed_ops = sorted(((op["device_ms"] / steps, name)
                        for name, op in profile.get("ops", {}).items()
                        if "device_ms" in op), reverse=True)
    total = sum(ms for ms, _ in timed_ops)
    print(f"  gpt2-small device time : {total:.2f} ms of compute per step "
          f"(--device-op-times, {steps} steps, first included); most:")
    for ms, name in timed_ops[:8]:
        print(f"    {name:28}{ms:9.2f} ms {100 * ms / total:5.1f}%")
elif "ops_status" in kv:
    print(f"  gpt2-small device time : status {kv.get('ops_status')} (log: {report}/gpt2-small-ops.log)")
for mode, m in (torch.get("modes") or {}).items():
    rows.append((f"pytorch {mode}", m["step_ms_median"]))
if kv.get("torch_status") not in (None, "0"):
    print(f"  pytorch                : status {kv.get('torch_status')} (log: {report}/torch.log)")
print(f"\nGPT-2 small, bf16, batch {batch} x seq {seq}"
      + (f"; measured bf16 matmul peak {peak:.0f} TFLOP/s" if peak else ""))
print(f"  {'':18}{'step ms':>10}{'tokens/s':>12}{'TFLOP/s':>10}{'MFU':>8}{'thru/ours':>10}")
for name, ms in rows:
    tps = batch * seq / (ms / 1000)
    tf = tps * flops / 1e12 if flops else float("nan")
    mfu = f"{100 * tf / peak:7.1f}%" if peak and flops else "      -"
    rel = f"{ours / ms:9.2f}x" if ours else "         -"
    print(f"  {name:18}{ms:10.2f}{tps:12,.0f}{tf:10.1f}{mfu:>8}{rel}")
PY
status=$?
((status != 0)) && exit 1
((kernels_status != 0 || train_status != 0 || driver_mismatch != 0 || launch_status != 0)) && exit 1
exit 0
