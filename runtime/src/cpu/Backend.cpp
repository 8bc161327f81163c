// CPU backend hooks: the driver's thread budget goes to OpenBLAS.
#include "core/Backend.h"
#include "comm/Comm.h"
#include "core/Context.h"

#include "Blas.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

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

double measurePeakFlopPerS(const BackendOptions &options, std::string &what) {
#if ASRT_HAVE_CBLAS
  // Large enough for OpenBLAS to run its blocked kernel at full speed
  // (about 1 GFLOP: a few ms per call), small enough not to delay the
  // start. The best of a few calls after a warm-up one, as a GEMM
  // benchmark reports.
  constexpr int n = 768;
  constexpr int calls = 4;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f),
      c(size_t(n) * n);
  double best = 0;
  for (int i = 0; i < calls; ++i) {
    auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    if (i > 0 && seconds > 0)
      best = std::max(best, 2.0 * n * n * n / seconds);
  }
  what = "measured: cblas_sgemm " + std::to_string(n) + "^3 f32, " +
         std::to_string(options.threads) +
         (options.threads == 1 ? " thread" : " threads");
  return best;
#else
  (void)options;
  // The reference GEMM of a build without BLAS says nothing of the
  // machine's peak.
  what.clear();
  return 0;
#endif
}

// The CPU's collectives are MPI's, which the driver sets up.
std::unique_ptr<Comm> createBackendComm(asrt_context *, ControlPlane &,
                                        const std::vector<int64_t> &) {
  return nullptr;
}

} // namespace autoshard::rt
