// The hooks each backend library (CPU, CUDA) implements once.
#pragma once

#include "autoshard/rt/abi.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

struct BackendOptions {
  /// Worker threads this rank may use for kernels (BLAS included); >= 1.
  int threads = 1;
  /// Index of this rank among the ranks on its node (device selection).
  int localRank = 0;
};

/// Called by the driver once, before the first step.
void initBackend(asrt_context *ctx, const BackendOptions &options);

/// "cpu" or "cuda"; printed by the driver.
const char *backendName();

/// The FLOP/s this rank's matrix products reach, measured once before the
/// first step with the backend's own GEMM and `options.threads`: the peak
/// that MFU is reported against when no device file gives one
/// (--device-spec). Sets `what` to what was measured, for the startup
/// header; returns 0 when the backend measures nothing (the CUDA backend,
/// whose peak comes from its device file).
double measurePeakFlopPerS(const BackendOptions &options, std::string &what);

class Comm;
class ControlPlane;
/// The backend's own communicator over `grid` for the step's collectives
/// (NCCL for the CUDA backend, bootstrapped over `control`), or null when
/// it has none and the driver's MPI communicator serves (the CPU backend).
/// Called once, after initBackend; collective over `control`.
std::unique_ptr<Comm> createBackendComm(asrt_context *ctx,
                                        ControlPlane &control,
                                        const std::vector<int64_t> &grid);

} // namespace autoshard::rt
