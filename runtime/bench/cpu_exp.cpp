// asrt-bench-exp: the CPU kernels' vectorizing exponential against glibc's.
//
// GELU (GPT-2's MLP), SiLU (Llama's SwiGLU) and every softmax (attention,
// the loss) exponentiate each element; std::exp is a libm call the
// compiler cannot vectorize, so those loops ran one element at a time.
// This measures, in one run and on the same inputs, the loops with
// std::exp (the kernels' code before fastExp, kept here as the baseline)
// and with fastExp:
//   exp          x[i] = exp(x[i]) over arguments in [-30, 0]
//   softmax row  exp(x - max) over attention rows of --row elements
//   gelu fwd     asrt_gelu_fwd, f32
//   gelu grad    asrt_gelu_grad, f32
//   gelu grad=   the same in place (dx = dy), as asrt_linear_grad_gelu
//                calls it
// and checks each fast result against the baseline's (exits 1 otherwise):
// the exponentials within 2 ulp; GELU, whose terms cancel near its
// minimum, within 4 float epsilons of max(|value|, 1). Times are not
// checked: the machines are shared.
#include "autoshard/rt/abi.h"
#include "core/Context.h"
#include "cpu/Exp.h"
#include "cpu/Reduce.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

using namespace autoshard::rt;

namespace {

const char *const kUsage =
    "usage: asrt-bench-exp [--size N] [--row R] [--repeat K]\n"
    "  --size    elements per run, K and M meaning 2^10 and 2^20 (default "
    "4M)\n"
    "  --row     softmax row length (default 128: a 128-token attention "
    "row)\n"
    "  --repeat  timed runs per row; the median is printed (default 5)\n";

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

/// The GELU kernels as they were, through std::exp.
void baselineGeluFwd(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float u = kSqrt2OverPi * (x[i] + kGeluCubic * x[i] * x[i] * x[i]);
    float e = std::exp(-2.0f * std::fabs(u));
    float inv = 1.0f / (1.0f + e);
    y[i] = x[i] * (u >= 0.0f ? inv : e * inv);
  }
}

void baselineGeluGrad(const float *dy, const float *x, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float xi = x[i];
    float u = kSqrt2OverPi * (xi + kGeluCubic * xi * xi * xi);
    float e = std::exp(-2.0f * std::fabs(u));
    float inv = 1.0f / (1.0f + e);
    float s = u >= 0.0f ? inv : e * inv;
    float sprime = 2.0f * e * inv * inv;
    float xc = std::clamp(xi, -20.0f, 20.0f);
    float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * xc * xc);
    dx[i] = dy[i] * (s + xc * sprime * du);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

/// Median ms of `repeat` runs of `run`, each after `reset`.
double timeMs(int repeat, const std::function<void()> &reset,
              const std::function<void()> &run) {
  std::vector<double> ms;
  for (int r = 0; r < repeat; ++r) {
    reset();
    auto start = std::chrono::steady_clock::now();
    run();
    auto end = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  return median(ms);
}

/// The largest |a - b| / max(|a|, 1).
double worstScaled(const std::vector<float> &a, const std::vector<float> &b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) /
                                std::max(std::fabs(double(a[i])), 1.0));
  return worst;
}

/// The largest distance in ulps between a and b (both finite or equal).
int64_t worstUlps(const std::vector<float> &a, const std::vector<float> &b) {
  auto ordinal = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : int64_t(i);
  };
  int64_t worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(ordinal(a[i]) - ordinal(b[i])));
  return worst;
}

bool parseCount(std::string_view text, int64_t &value) {
  int64_t multiplier = 1;
  if (!text.empty() && (text.back() == 'K' || text.back() == 'M')) {
    multiplier = text.back() == 'K' ? 1 << 10 : 1 << 20;
    text.remove_suffix(1);
  }
  auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 1 ||
      value > (int64_t(1) << 30) / multiplier)
    return false;
  value *= multiplier;
  return true;
}

int usageError(const std::string &message) {
  std::fprintf(stderr, "asrt-bench-exp: error: %s\n%s", message.c_str(),
               kUsage);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  int64_t n = 4 << 20, row = 128, repeat = 5;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (flag != "--size" && flag != "--row" && flag != "--repeat")
      return usageError("unknown option '" + std::string(flag) + "'");
    if (i + 1 >= argc)
      return usageError(std::string(flag) + " needs a value");
    std::string_view value = argv[++i];
    int64_t &target = flag == "--size" ? n : flag == "--row" ? row : repeat;
    if (!parseCount(value, target) || (flag == "--repeat" && target > 1000))
      return usageError(std::string(flag) + ": '" + std::string(value) +
                        "' is not valid; expected a count >= 1" +
                        (flag == "--repeat" ? " and <= 1000"
                                            : ", optionally with K or M"));
  }
  n = (n + row - 1) / row * row; // whole softmax rows

  // Arguments: exp over [-30, 0]; GELU over [-8, 8], where both tails
  // and the middle are exercised; softmax rows of logits in [-6, 6].
  std::vector<float> expIn(n), geluIn(n), dy(n), logits(n);
  uint32_t state = 12345;
  auto uniform = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f;
  };
  for (int64_t i = 0; i < n; ++i) {
    expIn[i] = -30.0f * uniform();
    geluIn[i] = 16.0f * uniform() - 8.0f;
    dy[i] = 2.0f * uniform() - 1.0f;
    logits[i] = 12.0f * uniform() - 6.0f;
  }
  std::vector<float> base(n), fast(n);
  asrt_context ctx;

  std::printf("asrt-bench-exp: %lld elements, median of %lld runs, one "
              "thread\n",
              static_cast<long long>(n), static_cast<long long>(repeat));
  std::printf("%-12s %-24s %10s %10s %10s\n", "loop", "variant", "ms",
              "ns/elem", "x std::exp");
  bool ok = true;
  auto report = [&](const char *loop, double baseMs, double fastMs,
                    bool ulpCheck) {
    double perBase = baseMs * 1e6 / static_cast<double>(n);
    double perFast = fastMs * 1e6 / static_cast<double>(n);
    std::printf("%-12s %-24s %10.3f %10.3f %10.2f\n", loop, "std::exp",
                baseMs, perBase, 1.0);
    std::printf("%-12s %-24s %10.3f %10.3f %10.2f\n", loop, "fastExp", fastMs,
                perFast, baseMs / fastMs);
    if (ulpCheck) {
      int64_t ulps = worstUlps(base, fast);
      std::printf("check: %s within 2 ulp of std::exp's: %s (worst %lld)\n",
                  loop, ulps <= 2 ? "yes" : "no",
                  static_cast<long long>(ulps));
      ok = ok && ulps <= 2;
      return;
    }
    double scaled = worstScaled(base, fast);
    bool close = scaled <= 4 * 1.1920929e-7;
    std::printf("check: %s within 4 eps of std::exp's (scaled by max(|v|, "
                "1)): %s (worst %.3g)\n",
                loop, close ? "yes" : "no", scaled);
    ok = ok && close;
  };

  auto copyIn = [&](std::vector<float> &to, const std::vector<float> &from) {
    return [&to, &from] { std::copy(from.begin(), from.end(), to.begin()); };
  };
  double baseMs = timeMs(repeat, copyIn(base, expIn), [&] {
    for (int64_t i = 0; i < n; ++i)
      base[i] = std::exp(base[i]);
  });
  double fastMs = timeMs(repeat, copyIn(fast, expIn), [&] {
    for (int64_t i = 0; i < n; ++i)
      fast[i] = cpu::fastExp(fast[i]);
  });
  report("exp", baseMs, fastMs, true);

  auto rows = [&](std::vector<float> &x, bool useFast) {
    for (int64_t r = 0; r < n; r += row) {
      float *p = x.data() + r;
      float m = cpu::rowMaximum(p, row);
      if (useFast) {
        cpu::expShifted(p, row, m);
      } else {
        for (int64_t j = 0; j < row; ++j)
          p[j] = std::exp(p[j] - m);
      }
    }
  };
  baseMs = timeMs(repeat, copyIn(base, logits), [&] { rows(base, false); });
  fastMs = timeMs(repeat, copyIn(fast, logits), [&] { rows(fast, true); });
  report("softmax row", baseMs, fastMs, true);

  auto nothing = [] {};
  baseMs = timeMs(repeat, nothing,
                  [&] { baselineGeluFwd(geluIn.data(), base.data(), n); });
  fastMs = timeMs(repeat, nothing, [&] {
    asrt_gelu_fwd(&ctx, ASRT_DTYPE_F32, geluIn.data(), fast.data(), n);
  });
  report("gelu fwd", baseMs, fastMs, false);
  baseMs = timeMs(repeat, nothing, [&] {
    baselineGeluGrad(dy.data(), geluIn.data(), base.data(), n);
  });
  fastMs = timeMs(repeat, nothing, [&] {
    asrt_gelu_grad(&ctx, ASRT_DTYPE_F32, dy.data(), geluIn.data(), fast.data(),
                   n);
  });
  report("gelu grad", baseMs, fastMs, false);
  // In place, as asrt_linear_grad_gelu calls it (dx = dy).
  baseMs = timeMs(repeat, copyIn(base, dy), [&] {
    baselineGeluGrad(base.data(), geluIn.data(), base.data(), n);
  });
  fastMs = timeMs(repeat, copyIn(fast, dy), [&] {
    asrt_gelu_grad(&ctx, ASRT_DTYPE_F32, fast.data(), geluIn.data(),
                   fast.data(), n);
  });
  report("gelu grad=", baseMs, fastMs, false);
  return ok ? 0 : 1;
}
