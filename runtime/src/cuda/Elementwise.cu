// Elementwise kernels on the GPU: ReLU, GPT-2's GELU, SwiGLU's gate, add,
// scale, cast. The same formulas as runtime/src/cpu/Elementwise.cpp and
// Cast.cpp, in the same order, so that f32 results agree with the CPU
// backend to rounding and bf16 ones to one bf16 ulp.
#include "Activation.cuh"
#include "Cuda.h"
#include "Element.cuh"
#include "Grid.cuh"

#include <type_traits>

namespace autoshard::rt::cuda {
namespace {

template <typename T>
__global__ void reluFwdKernel(const T *x, T *y, int64_t n) {
  for (int64_t i : gridThreads(n)) {
    float v = load(x, i);
    store(y, i, v < 0.0f ? 0.0f : v); // NaN stays NaN, as torch.relu
  }
}

template <typename T>
__global__ void reluGradKernel(const T *dy, const T *x, T *dx, int64_t n) {
  for (int64_t i : gridThreads(n)) {
    float g = load(dy, i);
    store(dx, i, load(x, i) > 0.0f ? g : 0.0f);
  }
}

template <typename T>
__global__ void geluFwdKernel(const T *x, T *y, int64_t n) {
  for (int64_t i : gridThreads(n)) {
    float v = load(x, i);
    store(y, i, v * geluParts(v).s);
  }
}

template <typename T>
__global__ void geluGradKernel(const T *dy, const T *x, T *dx, int64_t n) {
  for (int64_t i : gridThreads(n)) {
    float v = load(x, i), g = load(dy, i);
    store(dx, i, g * geluDerivative(v));
  }
}

template <typename T>
__global__ void swigluFwdKernel(const T *gate, const T *up, T *y, int64_t n) {
  for (int64_t i : gridThreads(n)) {
    float g = load(gate, i), u = load(up, i);
    store(y, i, g * sigmoidParts(g).s * u);
  }
}

template <typename T>
__global__ void swigluGradKernel(const T *dy, const T *gate, const T *up,
                                 T *dgate, T *dup, int64_t n) {
  for (int64_t i : gridThreads(n)) {
    float d = load(dy, i), g = load(gate, i), u = load(up, i);
    store(dgate, i, d * u * siluDerivative(g));
    store(dup, i, d * g * sigmoidParts(g).s);
  }
}

template <typename T>
__global__ void addKernel(const T *a, const T *b, T *y, int64_t n) {
  for (int64_t i : gridThreads(n))
    store(y, i, load(a, i) + load(b, i));
}

template <typename T>
__global__ void scaleKernel(const T *x, T *y, int64_t n, float factor) {
  for (int64_t i : gridThreads(n))
    store(y, i, factor * load(x, i));
}

template <typename Src, typename Dst>
__global__ void castKernel(const Src *src, Dst *dst, int64_t n) {
  for (int64_t i : gridThreads(n))
    store(dst, i, load(src, i));
}

} // namespace

void reluFwd(cudaStream_t stream, int32_t dtype, const void *x, void *y,
             int64_t n) {
  dispatchFloat("relu_fwd", dtype, [&](auto tag) {
    using T = decltype(tag);
    reluFwdKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<T *>(y), n);
  });
  checkLaunch("relu_fwd");
}

void reluGrad(cudaStream_t stream, int32_t dtype, const void *dy,
              const void *x, void *dx, int64_t n) {
  dispatchFloat("relu_grad", dtype, [&](auto tag) {
    using T = decltype(tag);
    reluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const T *>(dy), static_cast<const T *>(x),
        static_cast<T *>(dx), n);
  });
  checkLaunch("relu_grad");
}

void geluFwd(cudaStream_t stream, int32_t dtype, const void *x, void *y,
             int64_t n) {
  dispatchFloat("gelu_fwd", dtype, [&](auto tag) {
    using T = decltype(tag);
    geluFwdKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<T *>(y), n);
  });
  checkLaunch("gelu_fwd");
}

void geluGrad(cudaStream_t stream, int32_t dtype, const void *dy,
              const void *x, void *dx, int64_t n) {
  dispatchFloat("gelu_grad", dtype, [&](auto tag) {
    using T = decltype(tag);
    geluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const T *>(dy), static_cast<const T *>(x),
        static_cast<T *>(dx), n);
  });
  checkLaunch("gelu_grad");
}

void swigluFwd(cudaStream_t stream, int32_t dtype, const void *gate,
               const void *up, void *y, int64_t n) {
  dispatchFloat("swiglu_fwd", dtype, [&](auto tag) {
    using T = decltype(tag);
    swigluFwdKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const T *>(gate), static_cast<const T *>(up),
        static_cast<T *>(y), n);
  });
  checkLaunch("swiglu_fwd");
}

void swigluGrad(cudaStream_t stream, int32_t dtype, const void *dy,
                const void *gate, const void *up, void *dgate, void *dup,
                int64_t n) {
  dispatchFloat("swiglu_grad", dtype, [&](auto tag) {
    using T = decltype(tag);
    swigluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const T *>(dy), static_cast<const T *>(gate),
        static_cast<const T *>(up), static_cast<T *>(dgate),
        static_cast<T *>(dup), n);
  });
  checkLaunch("swiglu_grad");
}

void add(cudaStream_t stream, int32_t dtype, const void *a, const void *b,
         void *y, int64_t n) {
  dispatchFloat("add", dtype, [&](auto tag) {
    using T = decltype(tag);
    addKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const T *>(a), static_cast<const T *>(b),
        static_cast<T *>(y), n);
  });
  checkLaunch("add");
}

void scale(cudaStream_t stream, int32_t dtype, const void *x, void *y,
           int64_t n, float factor) {
  dispatchFloat("scale", dtype, [&](auto tag) {
    using T = decltype(tag);
    scaleKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<T *>(y), n, factor);
  });
  checkLaunch("scale");
}

void cast(cudaStream_t stream, int32_t srcDtype, const void *src,
          int32_t dstDtype, void *dst, int64_t n) {
  dispatchFloat("cast", srcDtype, [&](auto srcTag) {
    using Src = decltype(srcTag);
    dispatchFloat("cast", dstDtype, [&](auto dstTag) {
      using Dst = decltype(dstTag);
      if constexpr (std::is_same_v<Src, Dst>) {
        if (dst != src && n > 0)
          check(cudaMemcpyAsync(dst, src, size_t(n) * sizeof(Src),
                                cudaMemcpyDeviceToDevice, stream),
                "cast");
      } else {
        castKernel<<<blocksFor(n), kThreads, 0, stream>>>(
            static_cast<const Src *>(src), static_cast<Dst *>(dst), n);
      }
    });
  });
  checkLaunch("cast");
}

} // namespace autoshard::rt::cuda
