// The ABI's collectives: validate, count ring bytes, then run on ctx->comm.
#include "comm/Comm.h"
#include "core/Context.h"
#include "core/Dtype.h"
#include "core/Stats.h"

#include <cstring>

using namespace autoshard::rt;

namespace {

/// Checks what every collective shares and returns the group size: 1 when
/// the context has no Comm (a single-process test) or the mask selects a
/// group of one.
int prepare(asrt_context *ctx, const char *op, const void *send,
            const void *recv, int64_t count, int32_t dtype, int32_t mask) {
  if (!ctx)
    fatal("%s: context is null", op);
  if (!isValidDtype(dtype))
    fatal("%s: dtype %d is not an asrt_dtype; expected 0..5 (%s)", op, dtype,
          dtypeList());
  if (count < 0)
    fatal("%s: count %lld is negative", op, static_cast<long long>(count));
  if (count > 0 && (!send || !recv))
    fatal("%s: %s buffer is null for %lld elements", op,
          send ? "receive" : "send", static_cast<long long>(count));
  if (!ctx->comm)
    return 1;
  if (Status s = checkGridMask(mask, ctx->comm->grid()); !s)
    fatal("%s: %s", op, s.message().c_str());
  return ctx->comm->groupSize(mask);
}

void checkReduceOp(const char *op, int32_t dtype, int32_t reduceOp) {
  if (Status s = checkReduction(dtype, reduceOp); !s)
    fatal("%s: %s", op, s.message().c_str());
}

/// A group of one: the result is the input (an average over one rank
/// included), so this is a copy unless the call is in place.
void copyLocal(void *recv, const void *send, int64_t count, int32_t dtype) {
  if (recv != send && count > 0)
    std::memmove(recv, send, static_cast<size_t>(count * dtypeSize(dtype)));
}

} // namespace

extern "C" void asrt_all_reduce(asrt_context *ctx, const void *send, void *recv,
                                int64_t count, int32_t dtype, int32_t reduce_op,
                                int32_t grid_axes_mask) {
  OpTimer timer(ctx, "all_reduce");
  const char *op = "asrt_all_reduce";
  int n = prepare(ctx, op, send, recv, count, dtype, grid_axes_mask);
  checkReduceOp(op, dtype, reduce_op);
  ctx->stats->recordCollective(
      CollectiveKind::AllReduce,
      ringBytesSent(CollectiveKind::AllReduce, count, n, dtypeSize(dtype)));
  if (n == 1)
    return copyLocal(recv, send, count, dtype);
  ctx->comm->allReduce(send, recv, count, static_cast<asrt_dtype>(dtype),
                       static_cast<asrt_reduce_op>(reduce_op), grid_axes_mask);
}

extern "C" void asrt_all_gather(asrt_context *ctx, const void *send, void *recv,
                                int64_t send_count, int32_t dtype,
                                int32_t grid_axes_mask) {
  OpTimer timer(ctx, "all_gather");
  int n = prepare(ctx, "asrt_all_gather", send, recv, send_count, dtype,
                  grid_axes_mask);
  ctx->stats->recordCollective(CollectiveKind::AllGather,
                               ringBytesSent(CollectiveKind::AllGather,
                                             n * send_count, n,
                                             dtypeSize(dtype)));
  if (n == 1)
    return copyLocal(recv, send, send_count, dtype);
  ctx->comm->allGather(send, recv, send_count, static_cast<asrt_dtype>(dtype),
                       grid_axes_mask);
}

extern "C" void asrt_reduce_scatter(asrt_context *ctx, const void *send,
                                    void *recv, int64_t recv_count,
                                    int32_t dtype, int32_t reduce_op,
                                    int32_t grid_axes_mask) {
  OpTimer timer(ctx, "reduce_scatter");
  const char *op = "asrt_reduce_scatter";
  int n = prepare(ctx, op, send, recv, recv_count, dtype, grid_axes_mask);
  checkReduceOp(op, dtype, reduce_op);
  ctx->stats->recordCollective(CollectiveKind::ReduceScatter,
                               ringBytesSent(CollectiveKind::ReduceScatter,
                                             n * recv_count, n,
                                             dtypeSize(dtype)));
  if (n == 1)
    return copyLocal(recv, send, recv_count, dtype);
  ctx->comm->reduceScatter(
      send, recv, recv_count, static_cast<asrt_dtype>(dtype),
      static_cast<asrt_reduce_op>(reduce_op), grid_axes_mask);
}
