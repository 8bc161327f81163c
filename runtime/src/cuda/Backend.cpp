// CUDA backend hooks: pick this rank's GPU and make it the context's device.
#include "CudaDevice.h"

#include "comm/Comm.h"
#include "core/Backend.h"
#include "core/Context.h"
#include "core/Control.h"
#include "stats/Stats.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#if ASRT_HAVE_NCCL
#include "nccl/NcclComm.h"
#endif

namespace autoshard::rt {

#if ASRT_HAVE_NCCL
namespace {

/// Whether two ranks of the job run on one GPU (more ranks than GPUs, as a
/// test on a one-GPU machine has): NCCL 2.28 refuses that when the world
/// communicator forms ("Duplicate GPU detected", ncclInvalidUsage), on
/// every rank. GPU UUIDs are unique across nodes, so comparing them is
/// NCCL's own test. Collective over `control`: every rank gets the same
/// answer.
bool ranksShareAGpu(const cuda::CudaDevice &device, ControlPlane &control) {
  cudaDeviceProp properties{};
  cuda::check(cudaGetDeviceProperties(&properties, device.ordinal()),
              "createBackendComm: reading the GPU's UUID "
              "(cudaGetDeviceProperties)");
  std::vector<std::string> uuids = control.allGather(
      std::string(properties.uuid.bytes, sizeof properties.uuid.bytes));
  std::sort(uuids.begin(), uuids.end());
  return std::adjacent_find(uuids.begin(), uuids.end()) != uuids.end();
}

} // namespace
#endif

void initBackend(asrt_context *ctx, const BackendOptions &options) {
  if (!ctx)
    fatal("cuda backend: initBackend: context is null");
  // options.threads is the CPU backend's budget of kernel (BLAS) threads;
  // the GPU's kernels use none of them, so it is ignored here.
  std::string error;
  int count = cuda::deviceCount(error);
  // A machine without a GPU or driver (the build machines) ends here, with
  // the probe's reason: "no CUDA device: ...".
  if (count <= 0)
    fatal("%s; the CUDA backend needs a GPU for every rank (local rank %d)",
          error.c_str(), options.localRank);
  if (options.localRank < 0)
    fatal("cuda backend: local rank %d is negative", options.localRank);
  // Buffers already allocated would be released on the wrong device.
  Stats::Snapshot now = ctx->stats->snapshot();
  if (now.currentBytes > 0 || now.hostCurrentBytes > 0)
    fatal("cuda backend: initBackend must run before anything is allocated "
          "(%lld device and %lld host bytes are)",
          static_cast<long long>(now.currentBytes),
          static_cast<long long>(now.hostCurrentBytes));
  // One process per GPU: the ranks of a node take the node's devices in
  // local-rank order. The modulo lets more ranks than GPUs share them (a
  // test on a one-GPU machine) and keeps a launcher that already narrows
  // CUDA_VISIBLE_DEVICES to one GPU per rank on device 0.
  int ordinal = options.localRank % count;
  ctx->device = std::make_unique<cuda::CudaDevice>(ordinal);
}

const char *backendName() { return "cuda"; }

// A GPU's MFU is against its data sheet's peak (--device-spec
// data/devices/<gpu>.json), as PaLM and nanoGPT report it: what a short
// cuBLAS run reaches is not that figure.
double measurePeakFlopPerS(const BackendOptions &, std::string &what) {
  what.clear();
  return 0;
}

std::unique_ptr<Comm> createBackendComm(asrt_context *ctx,
                                        ControlPlane &control,
                                        const std::vector<int64_t> &grid) {
#if ASRT_HAVE_NCCL
  // A world of one has no collectives to run: every group is this rank.
  if (control.size() == 1)
    return nullptr;
  cuda::CudaDevice &device = cuda::cudaDevice(ctx, "createBackendComm");
  device.makeCurrent("createBackendComm");
  // Ranks sharing a GPU cannot form a NCCL communicator: the driver's MPI
  // communicator (under mpirun) or Gloo's (torchrun-style) serves them
  // instead, through host copies (without either the driver says what the
  // job needs).
  if (ranksShareAGpu(device, control)) {
    if (control.rank() == 0) {
      bool mpi = std::string(control.kind()) == "mpi";
      std::fprintf(stderr,
                   "autoshard: ranks of this job share a GPU, which NCCL does "
                   "not allow: the collectives go through %s and host memory "
                   "instead (one GPU per rank for NCCL)\n",
                   mpi ? "MPI" : "Gloo over TCP");
      std::fflush(stderr);
    }
    return nullptr;
  }
  // Rank 0's unique id reaches every rank over the control plane (MPI or
  // the TCP rendezvous); then all create the world communicator at once.
  std::string id = control.rank() == 0 ? ncclUniqueIdBytes() : std::string();
  control.broadcast(id, 0);
  // A rank that fails (its collective timeout included) aborts its NCCL
  // communicators before it exits, as PyTorch's watchdog does, so that no
  // collective is left running on the GPU for a dead job.
  addFatalCleanupHook(abortNcclComms);
  // The control plane carries the words that let a collective timeout
  // name the member NCCL waits for (the job's store under a torchrun-style
  // launch, MPI messages under mpirun).
  return createNcclComm(
      control.rank(), control.size(), grid, id, device.stream(Lane::Comm),
      device, kNcclSetupTimeoutSeconds, control.waitWords(), control.timeout());
#else
  // Without NCCL the driver's MPI communicator serves, through host
  // copies.
  (void)ctx;
  (void)control;
  (void)grid;
  return nullptr;
#endif
}

} // namespace autoshard::rt
