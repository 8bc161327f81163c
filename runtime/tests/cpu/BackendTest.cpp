// Tests of the CPU backend hooks that the driver calls before the first step.
#include "TestUtil.h"

#include "core/Backend.h"

#include <cblas.h>

namespace autoshard::rt::test {
namespace {

using CpuBackendTest = CpuKernelTest;

TEST_F(CpuBackendTest, NameIsCpu) { EXPECT_STREQ(backendName(), "cpu"); }

TEST_F(CpuBackendTest, InitSetsOpenBlasThreads) {
  int before = openblas_get_num_threads();
  BackendOptions options;
  options.threads = before == 2 ? 1 : 2;
  initBackend(&ctx, options);
  EXPECT_EQ(openblas_get_num_threads(), options.threads);
  openblas_set_num_threads(before);
}

// The peak MFU is against without a device file: a real GEMM's rate, and
// a header that says what was measured.
TEST_F(CpuBackendTest, MeasuresAGemmPeak) {
  BackendOptions options;
  options.threads = 1;
  std::string what;
  double peak = measurePeakFlopPerS(options, what);
  // Any machine that runs these tests does more than 0.1 GFLOP/s and less
  // than 100 TFLOP/s on one core.
  EXPECT_GT(peak, 1e8);
  EXPECT_LT(peak, 1e14);
  EXPECT_EQ(what, "measured: cblas_sgemm 768^3 f32, 1 thread");
}

TEST_F(CpuBackendTest, ZeroThreadsIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BackendOptions options;
  options.threads = 0;
  EXPECT_DEATH(initBackend(&ctx, options),
               "cpu backend: thread count 0 must be at least 1");
}

} // namespace
} // namespace autoshard::rt::test
