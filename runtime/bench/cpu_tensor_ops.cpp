// asrt-bench-tensor-ops: the CPU's generic tensor kernels on 1 thread and
// on T threads.
//
// The generic ops a PyTorch front end emits (elementwise chains with
// broadcasting, masks, reductions over the last and over an outer dim,
// softmax rows, transposes, dropout) each run as one asrt_* call that
// splits its outputs over the context's kernel threads (cpu/Parallel.h).
// This times each kernel on one large shape with 1 and with T kernel
// threads, on the same buffers and in the same run, and checks that both
// write the same bits (exit 1 if not). Times are not checked (the machines
// are shared).
#include "autoshard/rt/abi.h"
#include "core/Context.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

const char *const kUsage =
    "usage: asrt-bench-tensor-ops [--rows R] [--cols C] [--threads T] "
    "[--repeat N]\n"
    "  --rows     rows of the [R, C] f32 operands (default 4096)\n"
    "  --cols     columns, the innermost dim (default 4096)\n"
    "  --threads  kernel threads of the threaded column (default: every "
    "hardware thread)\n"
    "  --repeat   timed runs per kernel and thread count; the median is "
    "printed (default 5)\n";

/// One kernel call on the shared buffers; it writes `out` (bytes).
struct Kernel {
  const char *name;
  const char *shape;
  std::function<void(asrt_context &)> run;
  const void *out;
  size_t outBytes;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t k = values.size() / 2;
  return values.size() % 2 ? values[k] : 0.5 * (values[k - 1] + values[k]);
}

bool parsePositive(std::string_view text, int64_t &value) {
  auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() &&
         ptr == text.data() + text.size() && value >= 1;
}

int usageError(const std::string &message) {
  std::fprintf(stderr, "asrt-bench-tensor-ops: error: %s\n%s", message.c_str(),
               kUsage);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  int64_t rows = 4096, cols = 4096, threadsFlag = 0, repeat = 5;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::string_view flag = arg, value;
    bool hasValue = false;
    if (size_t eq = arg.find('='); eq != std::string_view::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    }
    int64_t *target = flag == "--rows"      ? &rows
                      : flag == "--cols"    ? &cols
                      : flag == "--threads" ? &threadsFlag
                      : flag == "--repeat"  ? &repeat
                                            : nullptr;
    if (!target)
      return usageError("unknown option '" + std::string(flag) + "'");
    if (!hasValue) {
      if (i + 1 >= argc)
        return usageError(std::string(flag) + " needs a value");
      value = argv[++i];
    }
    if (!parsePositive(value, *target) ||
        (target == &threadsFlag && *target > 1024))
      return usageError(std::string(flag) + ": '" + std::string(value) +
                        "' is not valid; expected an integer >= 1" +
                        (target == &threadsFlag ? " and <= 1024" : ""));
  }
  if (rows > (int64_t(1) << 30) / cols)
    return usageError("--rows times --cols is over 2^30 elements");
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const int threads = threadsFlag > 0 ? static_cast<int>(threadsFlag)
                                      : static_cast<int>(hardware);
  const int64_t n = rows * cols;

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::vector<float> x(n), x2(n), bias(cols), y(n), y2(n), red(rows),
      colRed(cols);
  for (float &v : x)
    v = uniform(rng);
  for (float &v : x2)
    v = uniform(rng);
  for (float &v : bias)
    v = uniform(rng);
  std::vector<uint8_t> mask(n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      mask[r * cols + c] = c <= r % cols; // a causal mask's shape
  const float minusInf = -1e30f;

  const int64_t dims[] = {rows, cols}, dense[] = {cols, 1}, row[] = {0, 1},
                scalar[] = {0, 0}, transposed[] = {1, rows};
  const int64_t rowsOut[] = {rows}, rowsStride[] = {cols}, colsRed[] = {cols},
                unit[] = {1}, colsOut[] = {cols}, rowsRed[] = {rows};
  std::vector<Kernel> kernels = {
      {"unary gelu_tanh", "[R, C]",
       [&](asrt_context &ctx) {
         asrt_unary(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_GELU_TANH, x.data(),
                    y.data(), n, 0);
       },
       y.data(), n * sizeof(float)},
      {"unary_grad gelu_tanh", "[R, C]",
       [&](asrt_context &ctx) {
         asrt_unary_grad(&ctx, ASRT_DTYPE_F32, ASRT_UNARY_GELU_TANH, x2.data(),
                         x.data(), y.data(), n, 0);
       },
       y.data(), n * sizeof(float)},
      {"binary add", "[R, C] + [C]",
       [&](asrt_context &ctx) {
         asrt_binary(&ctx, ASRT_DTYPE_F32, ASRT_BINARY_ADD, x.data(),
                     bias.data(), y.data(), 2, dims, dense, row);
       },
       y.data(), n * sizeof(float)},
      {"select", "mask ? [R, C] : -inf",
       [&](asrt_context &ctx) {
         asrt_select(&ctx, ASRT_DTYPE_F32, mask.data(), x.data(), &minusInf,
                     y.data(), 2, dims, dense, dense, scalar);
       },
       y.data(), n * sizeof(float)},
      {"reduce sum", "[R, C] -> [R]",
       [&](asrt_context &ctx) {
         asrt_reduce(&ctx, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, x.data(),
                     red.data(), 1, rowsOut, rowsStride, 1, colsRed, unit);
       },
       red.data(), rows * sizeof(float)},
      {"reduce sum", "[R, C] -> [C]",
       [&](asrt_context &ctx) {
         asrt_reduce(&ctx, ASRT_DTYPE_F32, ASRT_REDUCE_SUM, x.data(),
                     colRed.data(), 1, colsOut, unit, 1, rowsRed, rowsStride);
       },
       colRed.data(), cols * sizeof(float)},
      {"softmax", "rows of C",
       [&](asrt_context &ctx) {
         asrt_softmax(&ctx, ASRT_DTYPE_F32, x.data(), y2.data(), rows, cols, 0);
       },
       y2.data(), n * sizeof(float)},
      {"softmax_grad", "rows of C",
       [&](asrt_context &ctx) {
         asrt_softmax_grad(&ctx, ASRT_DTYPE_F32, x.data(), y2.data(), y.data(),
                           rows, cols, 0);
       },
       y.data(), n * sizeof(float)},
      {"copy_strided", "[R, C] -> [C, R]",
       [&](asrt_context &ctx) {
         asrt_copy_strided(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), 2, dims,
                           dense, 0, transposed, 0);
       },
       y.data(), n * sizeof(float)},
      {"dropout p=0.1", "[R, C]",
       [&](asrt_context &ctx) {
         asrt_dropout(&ctx, ASRT_DTYPE_F32, x.data(), y.data(), n, cols, 0,
                      rows, 0.1f, 0);
       },
       y.data(), n * sizeof(float)},
  };

  asrt_context one, many;
  many.setKernelThreads(threads);
  std::printf("asrt-bench-tensor-ops: f32 [R, C] = [%lld, %lld], median of "
              "%lld runs, %u hardware threads\n",
              static_cast<long long>(rows), static_cast<long long>(cols),
              static_cast<long long>(repeat), hardware);
  std::printf("%-22s%-22s%12s%12s%10s%8s\n", "kernel", "shape", "ms 1 thr",
              ("ms " + std::to_string(threads) + " thr").c_str(), "speed-up",
              "same");
  bool allSame = true;
  std::vector<uint8_t> first;
  for (const Kernel &k : kernels) {
    // The bits: 1 thread, then T threads, from the same inputs.
    const auto *out = static_cast<const uint8_t *>(k.out);
    k.run(one);
    first.assign(out, out + k.outBytes);
    k.run(many);
    const bool same = std::memcmp(first.data(), out, k.outBytes) == 0;
    allSame = allSame && same;
    // Timed runs alternate, so that the machine's load drifts over both
    // columns alike.
    std::vector<double> t1, tT;
    for (int64_t r = 0; r < repeat; ++r)
      for (asrt_context *ctx : {&one, &many}) {
        auto start = std::chrono::steady_clock::now();
        k.run(*ctx);
        double s = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
        (ctx == &one ? t1 : tT).push_back(s);
      }
    const double m1 = median(t1) * 1e3, mT = median(tT) * 1e3;
    std::printf("%-22s%-22s%12.2f%12.2f%10.2f%8s\n", k.name, k.shape, m1, mT,
                m1 / mT, same ? "yes" : "NO");
  }
  std::printf("check: every kernel writes the same bits on 1 and %d "
              "threads: %s\n",
              threads, allSame ? "yes" : "no");
  return allSame ? 0 : 1;
}
