// asrt-bench-adam: the CPU AdamW step against a torch-style baseline.
//
// ZeRO-Offload runs the optimizer step on the host, over every parameter of
// the rank's shard, so its speed is the speed of a step. This measures, in
// one run and on the same buffers:
//   naive        AdamW as torch's single-tensor CPU path runs it: one pass
//                over memory per tensor op (mul_, lerp_, mul_, addcmul_,
//                sqrt, div, add_, addcdiv_), with temporaries;
//   scalar loop  the runtime's kernel before it was vectorized and threaded:
//                one fused loop, branches inside, not vectorized;
//   asrt_adamw_update on 1 thread and on T threads.
// Every variant computes the same f32 operations in the same order, so all
// of them must agree bit for bit; the program checks that, and exits 1 if
// they do not. Times are not checked (the machines are shared).
#include "autoshard/rt/abi.h"
#include "core/Context.h"
#include "core/Dtype.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace autoshard::rt;

namespace {

const char *const kUsage =
    "usage: asrt-bench-adam [--sizes N,...] [--dtypes f32,bf16] "
    "[--threads T]\n"
    "                       [--repeat R]\n"
    "  --sizes    parameter counts, K and M meaning 2^10 and 2^20 "
    "(default 16M,64M)\n"
    "  --dtypes   gradient dtypes (default f32,bf16)\n"
    "  --threads  threads of the threaded row (default: every hardware "
    "thread)\n"
    "  --repeat   timed runs per row; the median is printed (default 5)\n";

// The hyperparameters of a typical LLM run; weight decay on, so that the
// baseline has its decay pass. No clipping scale.
constexpr float kLr = 1e-3f, kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f,
                kWeightDecay = 0.01f;

/// The update's operands: one rank's shard, updated in place as the
/// compiler emits it. 64-byte aligned like asrt_alloc's buffers.
struct AlignedFloats {
  explicit AlignedFloats(size_t n)
      : data(static_cast<float *>(
            std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64))),
        size(n) {
    if (!data) {
      std::fprintf(stderr,
                   "asrt-bench-adam: error: out of memory for %zu "
                   "floats\n",
                   n);
      std::exit(1);
    }
  }
  ~AlignedFloats() { std::free(data); }
  AlignedFloats(const AlignedFloats &) = delete;
  AlignedFloats &operator=(const AlignedFloats &) = delete;
  float *data;
  size_t size;
};

/// The scalars as the runtime forms them (Optimizer.cpp: in double, as
/// torch's Python floats, then used as float scalars).
struct Scalars {
  float decay, avgWeight, sqWeight, stepSize, correction2Sqrt;
};

Scalars scalarsFor(int32_t step) {
  const double rate = kLr;
  Scalars s;
  s.decay = static_cast<float>(1.0 - rate * kWeightDecay);
  s.avgWeight = static_cast<float>(1.0 - double(kBeta1));
  s.sqWeight = static_cast<float>(1.0 - double(kBeta2));
  s.stepSize = static_cast<float>(
      -rate / (1.0 - std::pow(double(kBeta1), double(step))));
  s.correction2Sqrt = static_cast<float>(
      std::sqrt(1.0 - std::pow(double(kBeta2), double(step))));
  return s;
}

float gradAt(const float *g, size_t i) { return g[i]; }
float gradAt(const uint16_t *g, size_t i) { return bf16ToFloat(g[i]); }

// ---- (a) The baseline: torch's single-tensor AdamW, op by op -------------
// torch.optim.AdamW(foreach=False) on a CPU tensor runs these tensor ops,
// each one pass over memory (aten's CPU kernels vectorize each pass, as the
// compiler does these loops). sqrt and div allocate their results; here the
// temporaries are allocated once, outside the timing, which favours the
// baseline. A bf16 gradient is first converted to f32 (grad.float()):
// torch's AdamW wants the gradient in the parameter's dtype.
struct NaiveTemporaries {
  explicit NaiveTemporaries(size_t n) : sqrtV(n), denom(n), grad32(n) {}
  AlignedFloats sqrtV, denom, grad32;
};

void naiveAdamW(float *p, const float *g, float *m, float *v, size_t n,
                int32_t step, NaiveTemporaries &tmp) {
  const Scalars s = scalarsFor(step);
  // param.mul_(1 - lr * weight_decay)
  for (size_t i = 0; i < n; ++i)
    p[i] = p[i] * s.decay;
  // exp_avg.lerp_(grad, 1 - beta1): torch's lerp picks its form per element.
  for (size_t i = 0; i < n; ++i)
    m[i] = s.avgWeight < 0.5f ? m[i] + s.avgWeight * (g[i] - m[i])
                              : g[i] - (g[i] - m[i]) * (1.0f - s.avgWeight);
  // exp_avg_sq.mul_(beta2)
  for (size_t i = 0; i < n; ++i)
    v[i] = v[i] * kBeta2;
  // .addcmul_(grad, grad, value=1 - beta2)
  for (size_t i = 0; i < n; ++i)
    v[i] = v[i] + s.sqWeight * g[i] * g[i];
  // denom = exp_avg_sq.sqrt()
  float *t1 = tmp.sqrtV.data, *t2 = tmp.denom.data;
  for (size_t i = 0; i < n; ++i)
    t1[i] = std::sqrt(v[i]);
  // / bias_correction2_sqrt
  for (size_t i = 0; i < n; ++i)
    t2[i] = t1[i] / s.correction2Sqrt;
  // .add_(eps)
  for (size_t i = 0; i < n; ++i)
    t2[i] = t2[i] + kEps;
  // param.addcdiv_(exp_avg, denom, value=-step_size)
  for (size_t i = 0; i < n; ++i)
    p[i] = p[i] + s.stepSize * m[i] / t2[i];
}

void naiveAdamW(float *p, const uint16_t *g, float *m, float *v, size_t n,
                int32_t step, NaiveTemporaries &tmp) {
  // grad.float()
  float *g32 = tmp.grad32.data;
  for (size_t i = 0; i < n; ++i)
    g32[i] = bf16ToFloat(g[i]);
  naiveAdamW(p, g32, m, v, n, step, tmp);
}

// ---- The runtime's kernel before this benchmark: one loop, branches -----
// inside (weight decay, lerp form, clipping scale), a sqrt that sets errno;
// it did not vectorize (clang: "library call cannot be vectorized"), which
// the pragma and attribute keep true now that this file is built without
// errno (CMakeLists.txt: so that the baseline's sqrt pass vectorizes, as
// aten's does).
template <typename T>
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
void scalarLoopAdamW(float *param, const T *grad, float *exp_avg,
                     float *exp_avg_sq, size_t n, int32_t step,
                     const float *grad_scale, float weight_decay) {
  const Scalars s = scalarsFor(step);
  const bool scaled = grad_scale != nullptr;
  const float gradScale = scaled ? grad_scale[0] : 1.0f;
#if defined(__clang__)
#pragma clang loop vectorize(disable) interleave(disable)
#endif
  for (size_t i = 0; i < n; ++i) {
    float p = param[i];
    float g = gradAt(grad, i);
    float m = exp_avg[i];
    float v = exp_avg_sq[i];
    if (scaled)
      g = gradScale * g;
    if (weight_decay != 0.0f)
      p = p * s.decay;
    m = s.avgWeight < 0.5f ? m + s.avgWeight * (g - m)
                           : g - (g - m) * (1.0f - s.avgWeight);
    v = v * kBeta2;
    v = v + s.sqWeight * g * g;
    float denom = std::sqrt(v) / s.correction2Sqrt + kEps;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p + s.stepSize * m / denom;
  }
}

// ---- Driving the variants ------------------------------------------------

enum class Variant { Naive, ScalarLoop, Kernel1, KernelT };

/// Buffers of one (dtype, size) configuration.
struct Problem {
  Problem(size_t n, bool bf16)
      : n(n), bf16(bf16), p(n), m(n), v(n), grad32(bf16 ? 0 : n),
        grad16(bf16 ? n : 0), tmp(n) {}
  size_t n;
  bool bf16;
  AlignedFloats p, m, v;
  AlignedFloats grad32;
  std::vector<uint16_t> grad16;
  NaiveTemporaries tmp;
};

/// Deterministic, cheap to generate, in the ranges of a real run:
/// parameters ~ N(0, 0.02)-sized, gradients ~1e-3, moments consistent
/// with them.
void fill(Problem &pb) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto uniform = [&state]() { // splitmix64 -> [-1, 1)
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 40) / (1ull << 23) -
                              1.0);
  };
  for (size_t i = 0; i < pb.n; ++i) {
    pb.p.data[i] = 0.02f * uniform();
    pb.m.data[i] = 1e-4f * uniform();
    float r = uniform();
    pb.v.data[i] = 1e-6f * r * r;
    float g = 1e-3f * uniform();
    if (pb.bf16)
      pb.grad16[i] = floatToBf16(g);
    else
      pb.grad32.data[i] = g;
  }
}

void runVariant(Variant variant, Problem &pb, size_t n, int32_t step,
                asrt_context &one, asrt_context &many) {
  float *p = pb.p.data, *m = pb.m.data, *v = pb.v.data;
  if (variant == Variant::Naive) {
    if (pb.bf16)
      naiveAdamW(p, pb.grad16.data(), m, v, n, step, pb.tmp);
    else
      naiveAdamW(p, pb.grad32.data, m, v, n, step, pb.tmp);
    return;
  }
  if (variant == Variant::ScalarLoop) {
    if (pb.bf16)
      scalarLoopAdamW(p, pb.grad16.data(), m, v, n, step, nullptr,
                      kWeightDecay);
    else
      scalarLoopAdamW(p, pb.grad32.data, m, v, n, step, nullptr, kWeightDecay);
    return;
  }
  asrt_context &ctx = variant == Variant::Kernel1 ? one : many;
  const void *grad = pb.bf16 ? static_cast<const void *>(pb.grad16.data())
                             : static_cast<const void *>(pb.grad32.data);
  const float lr = kLr;
  asrt_adamw_update(&ctx, pb.bf16 ? ASRT_DTYPE_BF16 : ASRT_DTYPE_F32, p, grad,
                    m, v, &lr, &step, nullptr, p, m, v, static_cast<int64_t>(n),
                    kBeta1, kBeta2, kEps, kWeightDecay);
}

/// Every variant from the same state, on the first `n` elements: the
/// outputs must be the same bits.
bool variantsAgree(Problem &pb, size_t n, asrt_context &one,
                   asrt_context &many) {
  std::vector<float> p0(pb.p.data, pb.p.data + n), m0(pb.m.data, pb.m.data + n),
      v0(pb.v.data, pb.v.data + n);
  std::vector<float> first;
  bool agree = true;
  for (Variant variant : {Variant::Naive, Variant::ScalarLoop, Variant::Kernel1,
                          Variant::KernelT}) {
    std::copy(p0.begin(), p0.end(), pb.p.data);
    std::copy(m0.begin(), m0.end(), pb.m.data);
    std::copy(v0.begin(), v0.end(), pb.v.data);
    runVariant(variant, pb, n, /*step=*/7, one, many);
    std::vector<float> out(3 * n);
    std::copy(pb.p.data, pb.p.data + n, out.begin());
    std::copy(pb.m.data, pb.m.data + n, out.begin() + n);
    std::copy(pb.v.data, pb.v.data + n, out.begin() + 2 * n);
    if (first.empty())
      first = std::move(out);
    else if (std::memcmp(first.data(), out.data(),
                         first.size() * sizeof(float)) != 0)
      agree = false;
  }
  std::copy(p0.begin(), p0.end(), pb.p.data);
  std::copy(m0.begin(), m0.end(), pb.m.data);
  std::copy(v0.begin(), v0.end(), pb.v.data);
  return agree;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t k = values.size() / 2;
  return values.size() % 2 ? values[k] : 0.5 * (values[k - 1] + values[k]);
}

std::string sizeName(size_t n) {
  if (n % (1u << 20) == 0)
    return std::to_string(n >> 20) + "M";
  if (n % (1u << 10) == 0)
    return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

// ---- Command line --------------------------------------------------------

struct BenchOptions {
  std::vector<size_t> sizes = {16u << 20, 64u << 20};
  std::vector<bool> bf16 = {false, true};
  int threads = 0; // 0: every hardware thread
  int repeat = 5;
};

std::vector<std::string_view> splitList(std::string_view text) {
  std::vector<std::string_view> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos)
      comma = text.size();
    items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

bool parseSize(std::string_view text, size_t &size) {
  size_t multiplier = 1;
  if (!text.empty() && (text.back() == 'K' || text.back() == 'M')) {
    multiplier = text.back() == 'K' ? (1u << 10) : (1u << 20);
    text.remove_suffix(1);
  }
  uint64_t count;
  auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), count);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
      count == 0 || count > (uint64_t(1) << 40) / multiplier)
    return false;
  size = static_cast<size_t>(count * multiplier);
  return true;
}

bool parsePositive(std::string_view text, int &value) {
  auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() &&
         ptr == text.data() + text.size() && value >= 1;
}

int usageError(const std::string &message) {
  std::fprintf(stderr, "asrt-bench-adam: error: %s\n%s", message.c_str(),
               kUsage);
  return 2;
}

std::string invalid(std::string_view flag, std::string_view value,
                    const char *expected) {
  return std::string(flag) + ": '" + std::string(value) +
         "' is not valid; expected " + expected;
}

} // namespace

int main(int argc, char **argv) {
  BenchOptions options;
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
    if (flag != "--sizes" && flag != "--dtypes" && flag != "--threads" &&
        flag != "--repeat")
      return usageError("unknown option '" + std::string(flag) + "'");
    if (!hasValue) {
      if (i + 1 >= argc)
        return usageError(std::string(flag) + " needs a value");
      value = argv[++i];
    }
    if (flag == "--sizes") {
      options.sizes.clear();
      for (std::string_view item : splitList(value)) {
        size_t size;
        if (!parseSize(item, size))
          return usageError(invalid(
              flag, item,
              "a parameter count >= 1, optionally with K or M (2^10, 2^20)"));
        options.sizes.push_back(size);
      }
    } else if (flag == "--dtypes") {
      options.bf16.clear();
      for (std::string_view item : splitList(value)) {
        if (item != "f32" && item != "bf16")
          return usageError(invalid(flag, item, "f32 or bf16"));
        options.bf16.push_back(item == "bf16");
      }
    } else if (flag == "--threads") {
      if (!parsePositive(value, options.threads))
        return usageError(invalid(flag, value, "an integer >= 1"));
    } else if (!parsePositive(value, options.repeat)) {
      return usageError(invalid(flag, value, "an integer >= 1"));
    }
  }
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const int threads =
      options.threads > 0 ? options.threads : static_cast<int>(hardware);

  asrt_context one, many;
  many.setOptimizerThreads(threads);

  std::printf("asrt-bench-adam: AdamW step in place (weight decay %g), "
              "median of %d runs, %u hardware threads\n",
              static_cast<double>(kWeightDecay), options.repeat, hardware);
  std::printf("GB/s: the bytes each variant reads and writes per parameter "
              "(B/param), over its time\n");
  bool allAgree = true;
  for (bool bf16 : options.bf16) {
    for (size_t n : options.sizes) {
      Problem pb(n, bf16);
      fill(pb);
      const size_t checked = std::min<size_t>(n, 1u << 20);
      const bool agree = variantsAgree(pb, checked, one, many);
      allAgree = allAgree && agree;

      struct Row {
        Variant variant;
        const char *name;
        int threads;
        double bytesPerParam;
        std::vector<double> seconds;
      };
      const double gradBytes = bf16 ? 2.0 : 4.0;
      // Naive: decay 8, lerp 12, mul 8, addcmul 12, sqrt 8, div 8, add 8,
      // addcdiv 16 bytes per parameter; a bf16 gradient's conversion 2 + 4
      // more. Fused: p, m, v read and written once, the gradient read once.
      const double naiveBytes = 80.0 + (bf16 ? 6.0 : 0.0);
      const double fusedBytes = 24.0 + gradBytes;
      std::vector<Row> rows = {
          {Variant::Naive, "naive (torch ops)", 1, naiveBytes, {}},
          {Variant::ScalarLoop, "scalar loop", 1, fusedBytes, {}},
          {Variant::Kernel1, "asrt_adamw_update", 1, fusedBytes, {}},
      };
      if (threads > 1)
        rows.push_back(
            {Variant::KernelT, "asrt_adamw_update", threads, fusedBytes, {}});
      // One untimed run each (page faults, caches), then the timed runs
      // round-robin, so that the machine's load drifts over all rows alike.
      int32_t step = 1;
      for (Row &row : rows)
        runVariant(row.variant, pb, n, step++, one, many);
      for (int r = 0; r < options.repeat; ++r)
        for (Row &row : rows) {
          auto start = std::chrono::steady_clock::now();
          runVariant(row.variant, pb, n, step++, one, many);
          row.seconds.push_back(std::chrono::duration<double>(
                                    std::chrono::steady_clock::now() - start)
                                    .count());
        }

      std::printf("\n%s gradients, %s params (%zu)\n", bf16 ? "bf16" : "f32",
                  sizeName(n).c_str(), n);
      std::printf("%-20s %7s %10s %8s %8s %8s\n", "variant", "threads", "ms",
                  "B/param", "GB/s", "x naive");
      const double naive = median(rows[0].seconds);
      for (const Row &row : rows) {
        double t = median(row.seconds);
        std::printf("%-20s %7d %10.2f %8.0f %8.1f %8.2f\n", row.name,
                    row.threads, t * 1e3, row.bytesPerParam,
                    row.bytesPerParam * static_cast<double>(n) / t / 1e9,
                    naive / t);
      }
      std::printf("check: the variants agree bit for bit on %zu elements: "
                  "%s\n",
                  checked, agree ? "yes" : "NO");
    }
  }
  std::fflush(stdout);
  if (!allAgree) {
    std::fprintf(stderr, "asrt-bench-adam: error: the variants' results "
                         "differ; the kernel no longer computes torch's "
                         "operations in torch's order\n");
    return 1;
  }
  return 0;
}
