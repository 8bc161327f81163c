// Element type conversion on the CPU: f32 <-> bf16, rounding to nearest-even.
#include "Checks.h"
#include "Element.h"

#include "core/Context.h"
#include "core/Dtype.h"

#include <cstring>
#include <type_traits>

using autoshard::rt::OpTimer;
using namespace autoshard::rt::cpu;

extern "C" void asrt_cast(asrt_context *ctx, int32_t src_dtype, const void *src,
                          int32_t dst_dtype, void *dst, int64_t n) {
  OpTimer timer(ctx, "cast");
  const char *op = "cast";
  checkCount(op, "n", n);
  dispatchFloatDtype(op, src_dtype, [&](auto srcTag) {
    using Src = decltype(srcTag);
    dispatchFloatDtype(op, dst_dtype, [&](auto dstTag) {
      using Dst = decltype(dstTag);
      if constexpr (std::is_same_v<Src, Dst>) {
        // A cast to the same type is a copy; memmove because the ABI lets
        // an equal-size cast write over its input.
        if (dst != src && n > 0)
          std::memmove(dst, src, static_cast<size_t>(n) * sizeof(Src));
      } else {
        // Different sizes: abi.h requires distinct buffers.
        const Src *in = static_cast<const Src *>(src);
        Dst *out = static_cast<Dst *>(dst);
        for (int64_t i = 0; i < n; ++i)
          store(out, i, load(in, i));
      }
    });
  });
}
