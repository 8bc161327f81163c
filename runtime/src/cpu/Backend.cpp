// CPU backend hooks: the driver's thread budget goes to OpenBLAS.
#include "core/Backend.h"
#include "comm/Comm.h"
#include "core/Context.h"

#include "Blas.h"

namespace autoshard::rt {

void initBackend(asrt_context *ctx, const BackendOptions &options) {
  (void)ctx;
  if (options.threads < 1)
    fatal("cpu backend: thread count %d must be at least 1", options.threads);
#if ASRT_HAVE_CBLAS
  // Set explicitly so that ranks sharing a node do not each start one
  // OpenBLAS thread per core; the driver has already folded
  // OPENBLAS_NUM_THREADS / OMP_NUM_THREADS into the count.
  openblas_set_num_threads(options.threads);
#endif
}

const char *backendName() { return "cpu"; }

// The CPU's collectives are MPI's, which the driver sets up.
std::unique_ptr<Comm> createBackendComm(asrt_context *, ControlPlane &,
                                        const std::vector<int64_t> &) {
  return nullptr;
}

} // namespace autoshard::rt
