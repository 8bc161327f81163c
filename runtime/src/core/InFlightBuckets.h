// The buckets asrt_bucket_start issued and asrt_wait has not yet waited.
#pragma once

#include "core/OpenBucket.h"
#include "core/CommStream.h"
#include "memory/Device.h"
#include "core/Expected.h"
#include "core/HandleSlots.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

/// One issued bucket: its own members and its own pack buffer, which stay
/// untouched by later buckets until it is waited, and the stream operation
/// that runs it.
struct InFlightBucket {
  OpenBucket bucket;
  /// Grow-only packing scratch of this slot, in device memory.
  DeviceScratch pack;
  /// What the compute lane had queued when the bucket was issued: the
  /// communication lane waits for it before packing the send buffers.
  Fence issued;
  StreamOpInfo info;
  uint64_t seq = 0;
  /// asrt_bucket_start's handle; 0 while the slot is free.
  int64_t handle = 0;
  /// The context, for the communication thread's use.
  asrt_context *ctx = nullptr;

  /// At least `bytes` bytes of this slot's pack buffer on `device`.
  void *packBuffer(Device &device, int64_t bytes);
};

/// Bookkeeping of asrt_bucket_start / asrt_wait: handles, and slots reused
/// across steps. Pure, no communication. The slot of a waited bucket goes
/// back to a free list and serves a later bucket with its grown member list
/// and pack buffer, so a step that issues the same buckets every step stops
/// allocating once every slot has served its largest bucket.
class InFlightBuckets {
public:
  /// Takes the closed bucket `closed` into a free slot (swapping member
  /// lists, so `closed` keeps a reusable one) and gives it the next handle:
  /// 1, 2, 3, ... in issue order.
  InFlightBucket &issue(OpenBucket &closed);
  /// The in-flight bucket of `handle`. Fails, saying why, for a handle that
  /// was never issued or was already waited.
  Expected<InFlightBucket *> find(int64_t handle) const {
    return slotsByHandle.find(handle);
  }
  /// Frees the slot of a waited bucket.
  void release(InFlightBucket &slot);
  /// At least `bytes` bytes for packing a blocking bucket (asrt_bucket_end)
  /// on `device`, valid until the next call; grow-only. Only the
  /// communication thread, which runs one collective at a time, calls it.
  void *blockingPackBuffer(Device &device, int64_t bytes) {
    return blockingPack.reserve(device, bytes, "asrt_bucket_end");
  }

  size_t inFlight() const { return slotsByHandle.inFlight(); }
  int64_t lastHandle() const { return slotsByHandle.lastHandle(); }
  /// Slots created so far (in flight or free): the most buckets that were
  /// ever in flight at once.
  size_t slots() const { return slotsByHandle.slots(); }
  /// Success when nothing is in flight; otherwise an error listing the
  /// buckets not waited, for `when` ("step 3 returned with ...").
  Status checkAllWaited(const std::string &when) const;

private:
  HandleSlots<InFlightBucket> slotsByHandle{"asrt_bucket_start", "issued"};
  DeviceScratch blockingPack;
};

} // namespace autoshard::rt
