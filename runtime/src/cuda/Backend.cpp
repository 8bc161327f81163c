// CUDA backend hooks: pick this rank's GPU and make it the context's device.
#include "CudaDevice.h"

#include "comm/Comm.h"
#include "core/Backend.h"
#include "core/Context.h"
#include "core/Control.h"
#include "core/Stats.h"

#include <memory>
#include <string>

#if ASRT_HAVE_NCCL
#include "nccl/NcclComm.h"
#endif

namespace autoshard::rt {

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

std::unique_ptr<Comm> createBackendComm(asrt_context *ctx,
                                        ControlPlane &control,
                                        const std::vector<int64_t> &grid) {
#if ASRT_HAVE_NCCL
  // A world of one has no collectives to run: every group is this rank.
  if (control.size() == 1)
    return nullptr;
  cuda::CudaDevice &device = cuda::cudaDevice(ctx, "createBackendComm");
  device.makeCurrent("createBackendComm");
  // Rank 0's unique id reaches every rank over the control plane (MPI or
  // the TCP rendezvous); then all create the world communicator at once.
  std::string id = control.rank() == 0 ? ncclUniqueIdBytes() : std::string();
  control.broadcast(id, 0);
  return createNcclComm(control.rank(), control.size(), grid, id,
                        device.stream(Lane::Comm), device);
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
