#!/usr/bin/env bash
# The CUDA backend's kernels on the CUDA emulator under AddressSanitizer and
# UndefinedBehaviorSanitizer: the runtime built alone in its own build dir
# (default build-emu-asan), then the emulator's, the kernels' (in both
# thread orders), the device's and the emulated NCCL's tests. Emulated device memory is
# allocated at the size asked for, so a kernel or a cuBLAS call that reads
# or writes past a buffer (on a GPU: silent corruption or a fault) is
# reported here. docs/CudaBackend.md, "Emulated build".
#
#   scripts/cuda-emu-asan.sh            AUTOSHARD_EMU_ASAN_BUILD=DIR
set -euo pipefail
cd "$(dirname "$0")/.."

build=${AUTOSHARD_EMU_ASAN_BUILD:-build-emu-asan}
export CCACHE_BASEDIR="$PWD"
if [ ! -f "$build/build.ninja" ]; then
  sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  cmake -S runtime -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    "-DCMAKE_C_FLAGS=$sanitize" "-DCMAKE_CXX_FLAGS=$sanitize" \
    -DCMAKE_EXE_LINKER_FLAGS="-fuse-ld=lld -fsanitize=address,undefined" \
    -DPython3_EXECUTABLE=/usr/bin/python3 \
    -DAUTOSHARD_ENABLE_CUDA=ON -DAUTOSHARD_CUDA_EMU=ON
fi
tests=(asrt_cuda_emulator_test asrt_cuda_kernels_emu_test asrt_cuda_device_emu_test
  asrt_nccl_emu_test)
cmake --build "$build" --target "${tests[@]}"

# Leaks are not this check's subject (the tests' death-test children exit
# without cleanup); stack switches are announced to ASan (Fibers.cpp), and
# without fake stacks, each of which would cost a worker an mmap.
export ASAN_OPTIONS=detect_leaks=0:detect_stack_use_after_return=0
export UBSAN_OPTIONS=print_stacktrace=1
export OPENBLAS_NUM_THREADS=1
cd "$build"
ctest --output-on-failure -L cuda-emu
