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

TEST_F(CpuBackendTest, ZeroThreadsIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BackendOptions options;
  options.threads = 0;
  EXPECT_DEATH(initBackend(&ctx, options),
               "cpu backend: thread count 0 must be at least 1");
}

} // namespace
} // namespace autoshard::rt::test
