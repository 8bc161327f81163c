// Elementwise kernels on the CPU: ReLU, GPT-2's GELU, SwiGLU's gate, add.
#include "Activation.h"
#include "Checks.h"
#include "Element.h"
#include "Layers.h"
#include "Parallel.h"

#include "core/Context.h"

#include <cmath>

using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

// Every loop below reads element i of each input before writing element i of
// the outputs, so outputs may alias inputs as the ABI allows (for bf16 too:
// an aliased output has its input's type and index).

extern "C" void asrt_relu_fwd(asrt_context *ctx, int32_t dtype, const void *x,
                              void *y, int64_t n) {
  OpTimer timer(ctx, "relu_fwd");
  const char *op = "relu_fwd";
  checkCount(op, "n", n);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *result = static_cast<T *>(y);
    // Written so that a NaN input stays NaN (as torch.relu does) instead of
    // being hidden as 0 from the loss.
    ASRT_INDEPENDENT_ITERATIONS
    for (int64_t i = 0; i < n; ++i) {
      float v = load(in, i);
      store(result, i, v < 0.0f ? 0.0f : v);
    }
  });
}

extern "C" void asrt_relu_grad(asrt_context *ctx, int32_t dtype, const void *dy,
                               const void *x, void *dx, int64_t n) {
  OpTimer timer(ctx, "relu_grad");
  const char *op = "relu_grad";
  checkCount(op, "n", n);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy);
    const T *in = static_cast<const T *>(x);
    T *result = static_cast<T *>(dx);
    ASRT_INDEPENDENT_ITERATIONS
    for (int64_t i = 0; i < n; ++i) {
      float gi = load(g, i);
      store(result, i, load(in, i) > 0.0f ? gi : 0.0f);
    }
  });
}

void autoshard::rt::cpu::geluForward(const char *op, int32_t dtype,
                                     const void *x, void *y, int64_t n) {
  checkCount(op, "n", n);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *result = static_cast<T *>(y);
    ASRT_INDEPENDENT_ITERATIONS
    for (int64_t i = 0; i < n; ++i) {
      float xi = load(in, i);
      store(result, i, xi * geluParts(xi).s);
    }
  });
}

extern "C" void asrt_gelu_fwd(asrt_context *ctx, int32_t dtype, const void *x,
                              void *y, int64_t n) {
  OpTimer timer(ctx, "gelu_fwd");
  geluForward("gelu_fwd", dtype, x, y, n);
}

void autoshard::rt::cpu::geluGrad(const char *op, int32_t dtype,
                                  const void *dy, const void *x, void *dx,
                                  int64_t n) {
  checkCount(op, "n", n);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy);
    const T *in = static_cast<const T *>(x);
    T *result = static_cast<T *>(dx);
    ASRT_INDEPENDENT_ITERATIONS
    for (int64_t i = 0; i < n; ++i) {
      float xi = load(in, i);
      float gi = load(g, i);
      store(result, i, gi * geluDerivative(xi));
    }
  });
}

extern "C" void asrt_gelu_grad(asrt_context *ctx, int32_t dtype, const void *dy,
                               const void *x, void *dx, int64_t n) {
  OpTimer timer(ctx, "gelu_grad");
  geluGrad("gelu_grad", dtype, dy, x, dx, n);
}

extern "C" void asrt_swiglu_fwd(asrt_context *ctx, int32_t dtype,
                                const void *gate, const void *up, void *y,
                                int64_t n) {
  OpTimer timer(ctx, "swiglu_fwd");
  const char *op = "swiglu_fwd";
  checkCount(op, "n", n);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(gate);
    const T *u = static_cast<const T *>(up);
    T *result = static_cast<T *>(y);
    ASRT_INDEPENDENT_ITERATIONS
    for (int64_t i = 0; i < n; ++i) {
      float gi = load(g, i), ui = load(u, i);
      store(result, i, gi * sigmoidParts(gi).s * ui);
    }
  });
}

extern "C" void asrt_swiglu_grad(asrt_context *ctx, int32_t dtype,
                                 const void *dy, const void *gate,
                                 const void *up, void *dgate, void *dup,
                                 int64_t n) {
  OpTimer timer(ctx, "swiglu_grad");
  const char *op = "swiglu_grad";
  checkCount(op, "n", n);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *d = static_cast<const T *>(dy);
    const T *g = static_cast<const T *>(gate);
    const T *u = static_cast<const T *>(up);
    T *dg = static_cast<T *>(dgate);
    T *du = static_cast<T *>(dup);
    ASRT_INDEPENDENT_ITERATIONS
    for (int64_t i = 0; i < n; ++i) {
      float di = load(d, i), gi = load(g, i), ui = load(u, i);
      store(dg, i, di * ui * siluDerivative(gi));
      store(du, i, di * gi * sigmoidParts(gi).s);
    }
  });
}

extern "C" void asrt_add(asrt_context *ctx, int32_t dtype, const void *a,
                         const void *b, void *y, int64_t n) {
  OpTimer timer(ctx, "add");
  const char *op = "add";
  checkCount(op, "n", n);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *lhs = static_cast<const T *>(a);
    const T *rhs = static_cast<const T *>(b);
    T *result = static_cast<T *>(y);
    // The generic lowering's add: split like the generic kernels.
    forEachChunk(ctx, n, 1, [&](int64_t begin, int64_t end) {
      ASRT_INDEPENDENT_ITERATIONS
      for (int64_t i = begin; i < end; ++i)
        store(result, i, load(lhs, i) + load(rhs, i));
    });
  });
}

extern "C" void asrt_scale(asrt_context *ctx, int32_t dtype, const void *x,
                           void *y, int64_t n, float factor) {
  OpTimer timer(ctx, "scale");
  const char *op = "scale";
  checkCount(op, "n", n);
  dispatchFloatDtype(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *result = static_cast<T *>(y);
    // train.scale, which generic models use too: split like the generic
    // kernels.
    forEachChunk(ctx, n, 1, [&](int64_t begin, int64_t end) {
      ASRT_INDEPENDENT_ITERATIONS
      for (int64_t i = begin; i < end; ++i)
        store(result, i, factor * load(in, i));
    });
  });
}
