#!/usr/bin/env bash
# The one-shot device check of the CUDA backend (issue 7; docs/CudaBackend.md)
# in two halves, because the GPU machine has nvcc, CMake, ninja and PyTorch
# but no LLVM/MLIR (and perhaps no MPI, OpenBLAS, zlib or GoogleTest):
#
#   scripts/gpu-check.sh prepare [--bin DIR] [--inputs DIR]
#       On the build machine, with the compiler built: compiles the steps
#       the check runs into objects (shard-compile --emit=obj), trains the
#       tiny GPT on the CPU backend for the reference loss curve and its
#       held-out losses (the tiny step carries its evaluation step), tokenizes
#       the corpus, and copies GoogleTest's sources; all into DIR
#       (default gpu-inputs, git-ignored: carry it to the GPU machine).
#
#   scripts/gpu-check.sh [run] [--inputs DIR] [--build-dir DIR] [--no-build]
#                        [--minimal] [--timeout SECONDS] [--budget SECONDS]
#                        [--quick]
#       On the GPU machine: builds the runtime alone with the CUDA backend
#       (build-gpu), runs the CUDA kernels against the CPU backend's, links
#       the prepared objects with the CUDA runtime, trains the tiny GPT for
#       50 steps against the CPU loss curve and held-out loss, times GPT-2
#       small (bf16, seq 1024) and the same step in PyTorch (eager and
#       torch.compile, bench/torch_gpt2.py), our three attention kernels per
#       call against PyTorch's attention backends, cuDNN's among them
#       (bench/torch_attention.py), and prints a table last.
#       --no-build    use --build-dir as it is (CI: the project's own build)
#       --minimal     configure as a machine without MPI, OpenBLAS, zlib and
#                     GoogleTest would (the latter built from the inputs)
#       --timeout S   bound on each stage (default 300; each has its own,
#                     lower one too, which scales with S: the build's 240 s
#                     at 300 are 960 s at 1200, for a slower machine)
#       --budget S    bound on the whole run (default 450): later stages get
#                     what is left, and the table always comes last
#       --quick       fewer timed steps, no torch.compile
#       Its logs are under DIR/gpu-check, or $OUT/gpu-check when $OUT is set
#       (the device tool's machine), written there as they are made; the
#       table is also in table.txt there. A stage that fails is recorded
#       and the run goes on to the table; a failed training run is rerun
#       for 2 steps with CUDA_LAUNCH_BLOCKING=1 to name the faulting kernel.
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
budget_s=450
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
  --budget)
    [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || die "--budget needs a positive number of seconds"
    budget_s=$2
    shift 2
    ;;
  *) die "unknown argument '$1'; see the comment at the top of the script" ;;
  esac
done

# The steps of the check. The tiny GPT trains in f32 on the shipped corpus;
# GPT-2 small runs in bf16 (f32 masters and AdamW) at seq 1024.
tiny_batch=16
tiny_steps=50
# Its held-out loss every 25 steps, on 4 batches of the corpus's last 10%.
tiny_eval=(--eval-every 25 --eval-steps 4)
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
  # The tiny GPT carries its evaluation step (--with-eval), so that the
  # held-out losses are compared too.
  run_logged obj-tiny "$bin/shard-compile" --strategy=ddp --world-size=1 --emit=obj \
    --with-eval "$inputs/steps/tiny.mlir" -o "$inputs/steps/tiny.o"
  run_logged obj-gpt2-small "$bin/shard-compile" --strategy=ddp --world-size=1 --emit=obj \
    "$inputs/steps/gpt2-small.mlir" -o "$inputs/steps/gpt2-small.o"
  # The reference: the same tiny step on the CPU backend, same data.
  run_logged exe-tiny-cpu "$bin/shard-compile" --backend=cpu --strategy=ddp --world-size=1 \
    --with-eval "$inputs/steps/tiny.mlir" -o "$inputs/steps/tiny-cpu"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 \
    run_logged ref-tiny "$inputs/steps/tiny-cpu" --steps $tiny_steps --log-every 1 \
    --data "$inputs/tok/train.bin" "${tiny_eval[@]}" --eval-data "$inputs/tok/val.bin"
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
inputs=$(cd "$inputs" && pwd)
start=$(date +%s)
deadline=$((start + budget_s))
mkdir -p "$build" || die "cannot create '$build'"
# On the device tool's machine whatever lands in $OUT comes back: the logs
# are written there as they are made, so that they return however the run
# ends (a time limit's SIGKILL included).
if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  report="$OUT/gpu-check"
else
  report="$build/gpu-check"
fi
rm -rf "$report"
mkdir -p "$report" || die "cannot create '$report'"
results="$report/results.txt" # key=value lines for the table
: >"$results"
note() { echo "$1=$2" >>"$results"; }
# Seconds a stage may take: its own bound (scaled by --timeout / 300),
# --timeout, and what is left of --budget (keeping 20 s for the table),
# whichever is least; at least 10.
stage_time() {
  local t=$(($1 * timeout_s / 300)) left=$((deadline - $(date +%s) - 20))
  ((timeout_s < t)) && t=$timeout_s
  ((left < t)) && t=$left
  ((t < 10)) && t=10
  echo "$t"
}
bounded() { # seconds command...: the command under timeout (TERM, then KILL)
  local t=$1
  shift
  timeout -k 5 "$t" "$@"
}
# The first error of a log (else its last line), for the table.
first_error() {
  local line
  line=$(grep -m 1 -E "autoshard runtime error|error:|Error" "$1" 2>/dev/null ||
    grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1)
  echo "${line:-(no output)}" | cut -c1-200
}

# Launcher variables left in the environment (a PyTorch pod's RANK, Slurm's
# PMI) would turn the plain processes below into a rendezvous or a refused
# mpirun launch: the check runs everything as a world of one.
for v in RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT \
  OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMI_SIZE PMI_RANK PMIX_RANK; do
  [[ -n "${!v:-}" ]] && echo "unset $v=${!v}" >>"$report/env.log"
  unset "$v"
done
# The machine, before anything is built: a driver older than the toolkit
# shows here already.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
{
  echo "== nvcc"; "$nvcc" --version 2>&1
  echo "== c++"; "${CXX:-g++}" --version 2>&1 | head -n 1
  echo "== cmake"; cmake --version 2>&1 | head -n 1
  echo "== nvidia-smi"; nvidia-smi 2>&1 | head -n 15
  echo "== python"; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
} >>"$report/env.log"

# Everything from here on records what failed and goes on to the table;
# `skip` holds why the stages after a failed build or link cannot run.
skip=""
kernels_status=0 train_status=0 driver_mismatch=0 launch_status=0
if ((do_build)); then
  if [[ ! -x "$nvcc" ]]; then
    skip="no nvcc on PATH or in /usr/local/cuda/bin"
  else
    # A world of one needs no MPI: building without it also builds the
    # launch tests, and spares an MPI that lacks MPI_THREAD_MULTIPLE.
    flags=(-DCMAKE_BUILD_TYPE=Release -DAUTOSHARD_ENABLE_CUDA=ON -DAUTOSHARD_CUDA_EMU=OFF
      "-DAUTOSHARD_GTEST_SOURCE_DIR=$inputs/googletest" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
    if ((minimal)); then
      flags+=(-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON
        -DAUTOSHARD_USE_OPENBLAS=OFF)
    fi
    generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    if ! cmake -S runtime -B "$build" "${generator[@]}" "${flags[@]}" >"$report/configure.log" 2>&1; then
      # nvcc rejects a host compiler newer than it knows; it usually works.
      if grep -q "unsupported GNU version" "$report/configure.log"; then
        rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
        cmake -S runtime -B "$build" "${generator[@]}" "${flags[@]}" \
          -DCMAKE_CUDA_FLAGS=-allow-unsupported-compiler >>"$report/configure.log" 2>&1 ||
          skip="configuring the runtime failed: $(first_error "$report/configure.log")"
      else
        skip="configuring the runtime failed: $(first_error "$report/configure.log")"
      fi
    fi
    if [[ -z "$skip" ]]; then
      # Without MPI the runtime also builds a fake training binary that
      # checks how it joins a job (runtime/tests/launch).
      launch_target=()
      grep -q "fake_train_nompi" "$build/build.ninja" "$build/Makefile" 2>/dev/null &&
        launch_target=(fake_train_nompi)
      bounded "$(stage_time 240)" cmake --build "$build" --parallel \
        --target asrt_cuda_runtime asrt_cuda_kernels_test asrt_cuda_device_test \
        "${launch_target[@]}" >"$report/build.log" 2>&1 ||
        skip="building the CUDA runtime and its tests failed: $(first_error "$report/build.log")"
    fi
  fi
  [[ -n "$skip" ]] && echo "gpu-check.sh: $skip (logs: $report)" >&2
fi

link_line=""
if [[ -z "$skip" ]]; then
  # The link line the runtime's build wrote (runtime/CMakeLists.txt).
  link_line=$(find "$build" -name cuda-link-line.txt -type f 2>/dev/null | head -n 1)
  [[ -n "$link_line" ]] || skip="no cuda-link-line.txt under '$build': configure it with the CUDA toolkit"
fi

# 1. Kernels against the CPU backend, and the device's own tests: one
# process per test suite, so that a kernel fault (fatal, or a sticky CUDA
# error that fails everything after it) costs one suite, not the rest.
no_device=0
if [[ -z "$skip" ]]; then
  for t in asrt_cuda_kernels_test asrt_cuda_device_test; do
    test_bin=$(find "$build" -name "$t" -type f -perm -u+x 2>/dev/null | head -n 1)
    if [[ -z "$test_bin" ]]; then
      echo "[ CRASHED ] $t: not built" >>"$report/$t.log"
      kernels_status=1
      continue
    fi
    : >"$report/$t.log"
    mapfile -t suites < <("$test_bin" --gtest_list_tests 2>/dev/null | grep -E '^[^ ]+\.( |$)' | cut -d' ' -f1)
    if ((${#suites[@]} == 0)); then
      echo "[ CRASHED ] $t: --gtest_list_tests listed nothing" >>"$report/$t.log"
      kernels_status=1
    fi
    for suite in "${suites[@]}"; do
      bounded "$(stage_time 90)" "$test_bin" --gtest_color=no "--gtest_filter=$suite*" \
        >>"$report/$t.log" 2>&1
      s=$?
      if ((s != 0)); then
        kernels_status=1
        # A suite that did not finish: say where it stopped.
        if ! tail -n 3 "$report/$t.log" | grep -q "PASSED\|FAILED TEST"; then
          echo "[ CRASHED ] $suite status $s after: $(grep '^\[ RUN' "$report/$t.log" | tail -n 1)" \
            >>"$report/$t.log"
        fi
      fi
    done
  done
  python3 - "$report" "$results" <<'PY'
import re, sys
report, results = sys.argv[1], sys.argv[2]
counts = {"OK": 0, "FAILED": 0, "SKIPPED": 0, "CRASHED": 0}
reason = ""
failed = []
for name in ("asrt_cuda_kernels_test", "asrt_cuda_device_test"):
    for line in open(f"{report}/{name}.log", errors="replace"):
        # A test's own result line ("[  FAILED  ] Suite.Test (3 ms)"), not
        # the summary's list, or a suite that did not finish.
        m = (re.match(r"\[\s+(OK|FAILED|SKIPPED)\s+\] (\S+) \(", line) or
             re.match(r"\[ (CRASHED) \] (\S+)", line))
        if m:
            counts[m.group(1)] += 1
            if m.group(1) in ("FAILED", "CRASHED") and len(failed) < 5:
                failed.append(m.group(2))
        if not reason and "no CUDA device" in line:
            reason = line.strip()
with open(results, "a") as out:
    text = (f"{counts['OK']} passed, {counts['FAILED']} failed, "
            f"{counts['SKIPPED']} skipped")
    if counts["CRASHED"]:
        text += f", {counts['CRASHED']} suites crashed"
    if failed:
        text += " (" + ", ".join(failed) + ")"
    out.write(f"kernels={text}\n")
    if reason:
        out.write(f"no_device={reason}\n")
PY
  no_device=$(grep -c '^no_device=' "$results")
  # A runtime without MPI: its launch tests (one process, a torchrun-style
  # rendezvous, mpirun refused), which need no GPU.
  if [[ -n "$(find "$build" -name fake_train_nompi -type f -perm -u+x 2>/dev/null | head -n 1)" ]]; then
    (cd "$build" && bounded "$(stage_time 90)" ctest -L launch --timeout 60 --output-on-failure) \
      >"$report/launch.log" 2>&1
    launch_status=$?
    note launch "$(grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$report/launch.log" || echo "see $report/launch.log")"
  fi
fi
# The machine as CUDA and the driver see it, for the table. A GPU that
# nvidia-smi lists but CUDA does not (a driver older than the toolkit's
# runtime: cudaErrorInsufficientDriver) is a failed check, not "no device".
gpu_list=""
nvcc_release=$("$nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n 1)
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_list=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
  [[ -n "$gpu_list" ]] && note gpu "$gpu_list (driver), nvcc $nvcc_release"
fi
if ((no_device)) && [[ -n "$gpu_list" ]]; then
  why=$(grep '^no_device=' "$results" | cut -d= -f2-)
  echo "gpu-check.sh: nvidia-smi lists '$gpu_list' but CUDA reports no device: $why" >&2
  if [[ "$why" == *InsufficientDriver* ]]; then
    echo "gpu-check.sh: the driver is older than the CUDA runtime the build used (nvcc $nvcc_release)" >&2
  fi
  driver_mismatch=1
fi

# 2. Link the prepared steps with the CUDA runtime.
if [[ -z "$skip" ]]; then
  cxx=${CXX:-$(command -v g++ || command -v c++ || command -v clang++)}
  mapfile -t items <"$link_line"
  mkdir -p "$build/steps"
  for step in tiny gpt2-small; do
    if ! "$cxx" -o "$build/steps/$step" "$inputs/steps/$step.o" -Wl,--start-group "${items[@]}" \
      -Wl,--end-group -lstdc++ -lpthread -lm >"$report/link-$step.log" 2>&1; then
      skip="linking $step failed: $(first_error "$report/link-$step.log")"
      echo "gpu-check.sh: $skip (log: $report/link-$step.log)" >&2
      break
    fi
  done
fi

# A failed training run is run again for 2 steps with every launch
# synchronous, so that the error names the kernel that faulted rather than
# the next synchronising call.
diagnose() { # name args...
  local name=$1
  shift
  CUDA_LAUNCH_BLOCKING=1 bounded "$(stage_time 60)" "$build/steps/$name" --steps 2 "$@" \
    >"$report/$name-blocking.log" 2>&1
  echo "$(first_error "$report/$name.log"); synchronous rerun: $(first_error "$report/$name-blocking.log")"
}

# A world of one runs as a plain process on the GPU machine (no mpirun).
# A runtime built with MPI (CI's own build) initialises it as a singleton;
# the session may be root, which Open MPI refuses unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [[ -n "$skip" ]]; then
  note tiny "not run: $skip"
  train_status=1
elif ((no_device)); then
  # Without a GPU the binary must say so and fail, never crash.
  "$build/steps/tiny" --steps 1 >"$report/tiny.log" 2>&1
  s=$?
  if ((s == 0 || s > 128)) || ! grep -q "no CUDA device" "$report/tiny.log"; then
    echo "gpu-check.sh: the CUDA binary did not end with 'no CUDA device' (status $s; log: $report/tiny.log)" >&2
    train_status=1
  fi
  note tiny "not run: no CUDA device (the binary said so, status $s)"
else
  # 3. The tiny GPT against the CPU backend's loss curve.
  bounded "$(stage_time 90)" "$build/steps/tiny" --steps $tiny_steps --log-every 1 \
    --data "$inputs/tok/train.bin" "${tiny_eval[@]}" --eval-data "$inputs/tok/val.bin" >"$report/tiny.log" 2>&1
  s=$?
  if ((s != 0)); then
    note tiny "failed (status $s): $(diagnose tiny --data "$inputs/tok/train.bin")"
    train_status=1
  elif python3 test/e2e/Inputs/runs.py losses "$inputs/ref/tiny-cpu.log" "$report/tiny.log" \
    --steps $tiny_steps --rtol 1e-3 --norm-rtol 1e-2 >"$report/tiny-compare.log" 2>&1 &&
    python3 test/e2e/Inputs/runs.py eval-loss "$report/tiny.log" --after $tiny_steps \
      "$inputs/ref/tiny-cpu.log" --rtol 1e-3 >>"$report/tiny-compare.log" 2>&1; then
    note tiny "$tiny_steps steps, losses and held-out loss within 1e-3 of the CPU backend's, gradient norms within 1e-2 ($(tail -n 3 "$report/tiny-compare.log" | tr '\n' ' '))"
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
  bounded "$(stage_time 120)" "$build/steps/gpt2-small" --steps $steps --log-every 1 \
    --stats-json "$report/gpt2-small.json" >"$report/gpt2-small.log" 2>&1
  s=$?
  note gpt2_status $s
  if ((s != 0)); then
    note gpt2_error "$(diagnose gpt2-small)"
  else
    # The same step with attention on tensor cores instead of the flash
    # kernels (CUDA cores): as cuBLAS batched GEMMs (ASRT_CUDA_ATTENTION=gemm)
    # and as flash kernels through WMMA (wmma). The fastest becomes the
    # default.
    for attention in gemm wmma; do
      ASRT_CUDA_ATTENTION=$attention bounded "$(stage_time 90)" "$build/steps/gpt2-small" \
        --steps $steps --log-every 1 >"$report/gpt2-small-$attention.log" 2>&1
      note "${attention}_status" $?
    done
    # Where the step's device time goes: a few more steps with each op's
    # kernels timed on the device (CUDA events), apart from the timed run;
    # for the other two attentions too, whose per-call times go beside
    # PyTorch's attention kernels' (below).
    bounded "$(stage_time 60)" "$build/steps/gpt2-small" --steps 4 --device-op-times \
      --stats-json "$report/gpt2-small-ops.json" >"$report/gpt2-small-ops.log" 2>&1
    note ops_status $?
    for attention in gemm wmma; do
      ASRT_CUDA_ATTENTION=$attention bounded "$(stage_time 45)" "$build/steps/gpt2-small" \
        --steps 4 --device-op-times --stats-json "$report/gpt2-small-ops-$attention.json" \
        >"$report/gpt2-small-ops-$attention.log" 2>&1
    done
  fi
  # PyTorch's attention kernels (flash, cuDNN, memory-efficient, math) at
  # GPT-2 small's attention shape: whether cuDNN's fused attention would
  # beat ours (issue 7).
  if python3 -c "import torch" 2>/dev/null; then
    bounded "$(stage_time 60)" python3 bench/torch_attention.py --batch $gpt2_batch --heads 12 \
      --seq 1024 --head-dim 64 --json "$report/attention.json" >"$report/attention.log" 2>&1
    note attention_status $?
  fi
  torch_modes=both
  ((quick)) && torch_modes=eager
  if python3 -c "import torch" 2>/dev/null; then
    # The JSON is written after each mode: eager's numbers stay if
    # torch.compile fails or runs out of time.
    bounded "$(stage_time 240)" python3 bench/torch_gpt2.py --model gpt2-small --batch $gpt2_batch \
      --seq 1024 --mode $torch_modes --steps $steps --warmup 3 \
      --json "$report/torch.json" >"$report/torch.log" 2>&1
    note torch_status $?
  else
    note torch_status "no torch"
  fi
fi

[[ -n "$skip" ]] && note stopped "$skip"
# The table, last.
python3 - "$report" "$results" "$(($(date +%s) - start))" "$gpt2_batch" <<'PY' | tee "$report/table.txt"
import json, os, re, sys
report, results, seconds, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
kv = {}
for line in open(results):
    key, _, value = line.rstrip("\n").partition("=")
    kv[key] = value
print(f"\nCUDA backend device check ({seconds} s; logs in {report})")
print(f"  kernels vs CPU backend : {kv.get('kernels', '?')}")
print(f"  tiny GPT vs CPU curve  : {kv.get('tiny', '?')}")
if "stopped" in kv:
    print(f"  stopped                : {kv['stopped']}")
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
def timed_steps(log):
    """The step lines' own times, after 3 warmup steps (see above)."""
    timed = []
    for line in open(log, errors="replace"):
        m = re.match(r"step (\d+) loss \S+ ms (\S+)( |$)", line.strip())
        if m and int(m.group(1)) > 3:
            timed.append(float(m.group(2)))
    return sorted(timed)

if kv.get("gpt2_status") == "0" and os.path.exists(f"{report}/gpt2-small.json"):
    stats = json.load(open(f"{report}/gpt2-small.json"))
    mean = stats.get("mean_step_ms")
    timed = timed_steps(f"{report}/gpt2-small.log")
    ms = timed[len(timed) // 2] if timed else mean
    if ms:
        ours = ms
        rows.append(("autoshard (cuda)", ms))
        if timed and mean:
            print(f"  gpt2-small (autoshard) : median of {len(timed)} steps after 3 warmup; "
                  f"mean of all {stats.get('steps')} steps {mean:.2f} ms")
elif "gpt2_status" in kv:
    print(f"  gpt2-small (autoshard) : failed, status {kv.get('gpt2_status')}: "
          f"{kv.get('gpt2_error', '')} (log: {report}/gpt2-small.log)")
for attention in ("gemm", "wmma"):
    status = kv.get(f"{attention}_status")
    if status == "0":
        timed = timed_steps(f"{report}/gpt2-small-{attention}.log")
        if timed:
            rows.append((f"autoshard ({attention})", timed[len(timed) // 2]))
    elif status is not None:
        print(f"  gpt2-small {attention} attn   : status {status}: "
              f"first error in {report}/gpt2-small-{attention}.log")
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
# Attention per call, ours (device time of the op, --device-op-times)
# beside PyTorch's kernels at the same shape (bench/torch_attention.py).
attn = []
for variant, path in (("flash", "gpt2-small-ops.json"), ("gemm", "gpt2-small-ops-gemm.json"),
                      ("wmma", "gpt2-small-ops-wmma.json")):
    def per_call(op):
        """Mean device ms per call, less the slowest (the first's setup)."""
        calls, total = op["device_calls"], op["device_ms"]
        if calls > 1 and "device_max_ms" in op:
            return (total - op["device_max_ms"]) / (calls - 1)
        return total / calls
    try:
        ops = json.load(open(f"{report}/{path}")).get("ops", {})
        attn.append((f"autoshard {variant}", per_call(ops["causal_attention_fwd"]),
                     per_call(ops["causal_attention_grad"])))
    except (OSError, ValueError, KeyError, ZeroDivisionError):
        pass
torch_attn = {}
if os.path.exists(f"{report}/attention.json"):
    torch_attn = json.load(open(f"{report}/attention.json")).get("backends", {})
for backend, r in torch_attn.items():
    if "fwd_ms" in r:
        attn.append((f"pytorch {backend}", r["fwd_ms"], r["bwd_ms"]))
if attn:
    best = min(attn, key=lambda a: a[1] + a[2])
    print(f"\nCausal attention per call, bf16, batch {batch} x 12 heads x seq {seq} x 64 "
          f"(ours: in the step, the slowest call left out; pytorch: median call)")
    print(f"  {'':18}{'fwd ms':>10}{'bwd ms':>10}{'total':>10}")
    for name, f, b in attn:
        mark = "  fastest" if (name, f, b) == best else ""
        print(f"  {name:18}{f:10.3f}{b:10.3f}{f + b:10.3f}{mark}")
for backend, r in torch_attn.items():
    if "error" in r:
        print(f"  pytorch {backend:10}not run: {r['error'][:120]}")
if kv.get("attention_status") not in (None, "0") and not torch_attn:
    print(f"  pytorch attention      : status {kv.get('attention_status')} "
          f"(log: {report}/attention.log)")
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
status=${PIPESTATUS[0]}
((status != 0)) && exit 1
[[ -n "$skip" ]] && exit 2
((kernels_status != 0 || train_status != 0 || driver_mismatch != 0 || launch_status != 0)) && exit 1
exit 0
