// A Comm over another through host memory, for device memory MPI cannot
// read (a GPU's, when no NCCL communicator is used).
#include "comm/Comm.h"
#include "memory/Device.h"
#include "core/Dtype.h"
#include "core/FlatShard.h"

#include <vector>

namespace autoshard::rt {

namespace {

/// Every collective copies its input from device to host memory on the
/// communication lane, runs `inner` over the host copies and copies the
/// result back: correct on any device, at the price of two copies per
/// collective and no GPU-direct transfers. The buffers are grow-only, so
/// steady steps allocate nothing.
class HostStagedComm final : public Comm {
public:
  HostStagedComm(std::unique_ptr<Comm> inner, Device &device)
      : Comm(inner->rank(), inner->size(), inner->grid()),
        inner(std::move(inner)), device(device) {}

  void allReduce(const void *send, void *recv, int64_t count, asrt_dtype dtype,
                 asrt_reduce_op op, int32_t mask) override {
    int64_t bytes = count * dtypeSize(dtype);
    void *in = down(sendHost, send, bytes);
    inner->allReduce(in, in, count, dtype, op, mask);
    up(recv, in, bytes);
  }

  void allGather(const void *send, void *recv, int64_t sendCount,
                 asrt_dtype dtype, int32_t mask) override {
    int64_t bytes = sendCount * dtypeSize(dtype);
    void *in = down(sendHost, send, bytes);
    void *out = room(recvHost, bytes * groupSize(mask));
    inner->allGather(in, out, sendCount, dtype, mask);
    up(recv, out, bytes * groupSize(mask));
  }

  void reduceScatter(const void *send, void *recv, int64_t recvCount,
                     asrt_dtype dtype, asrt_reduce_op op,
                     int32_t mask) override {
    int64_t bytes = recvCount * dtypeSize(dtype);
    void *in = down(sendHost, send, bytes * groupSize(mask));
    void *out = room(recvHost, bytes);
    inner->reduceScatter(in, out, recvCount, dtype, op, mask);
    up(recv, out, bytes);
  }

  void allGatherShards(const void *shard, void *full, int64_t numel,
                       asrt_dtype dtype, int32_t mask) override {
    FlatShardLayout layout{numel, groupSize(mask)};
    int64_t eb = dtypeSize(dtype);
    void *in = down(sendHost, shard, layout.chunk() * eb);
    void *out = room(recvHost, numel * eb);
    inner->allGatherShards(in, out, numel, dtype, mask);
    up(full, out, numel * eb);
  }

  void reduceScatterShards(const void *full, void *shard, int64_t numel,
                           asrt_dtype dtype, asrt_reduce_op op,
                           int32_t mask) override {
    FlatShardLayout layout{numel, groupSize(mask)};
    int64_t eb = dtypeSize(dtype);
    void *in = down(sendHost, full, numel * eb);
    void *out = room(recvHost, layout.chunk() * eb);
    inner->reduceScatterShards(in, out, numel, dtype, op, mask);
    // Only the valid part: the padding is the caller's (Comm.h).
    up(shard, out, layout.validCount(groupIndex(mask)) * eb);
  }

  void barrier() override { inner->barrier(); }
  std::string describeWait() const override { return inner->describeWait(); }

private:
  static void *room(std::vector<char> &buffer, int64_t bytes) {
    if (buffer.size() < static_cast<size_t>(bytes))
      buffer.resize(static_cast<size_t>(bytes));
    return buffer.data();
  }
  void *down(std::vector<char> &buffer, const void *src, int64_t bytes) {
    void *host = room(buffer, bytes);
    device.toHost(Lane::Comm, host, src, bytes);
    return host;
  }
  void up(void *dst, const void *host, int64_t bytes) {
    device.toDevice(Lane::Comm, dst, host, bytes);
  }

  std::unique_ptr<Comm> inner;
  Device &device;
  std::vector<char> sendHost, recvHost;
};

} // namespace

std::unique_ptr<Comm> stageThroughHost(std::unique_ptr<Comm> inner,
                                       Device &device) {
  return std::make_unique<HostStagedComm>(std::move(inner), device);
}

} // namespace autoshard::rt
