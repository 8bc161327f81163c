// The offload transfers asrt_transfer_start started and asrt_transfer_wait
// has not yet waited.
#pragma once

#include "core/CommStream.h"
#include "memory/Device.h"
#include "core/Expected.h"
#include "core/HandleSlots.h"
#include "stats/Stats.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

/// One transfer: what moves, from where to where. `arg` is the NVMe
/// argument of a read or write (-1 for a host/device copy); a read has no
/// `src`, a write no `dst`.
struct Transfer {
  TransferKind kind = TransferKind::ToHost;
  int32_t arg = -1;
  void *dst = nullptr;
  const void *src = nullptr;
  int64_t bytes = 0;
};

/// One started transfer: what the offload thread runs, and the stream
/// operation that runs it. Its address stays fixed until it is waited.
struct InFlightTransfer {
  Transfer transfer;
  /// What the compute lane had queued when the transfer started: a copy
  /// from device memory waits for it (the kernels that wrote its source).
  Fence issued;
  StreamOpInfo info;
  uint64_t seq = 0;
  /// asrt_transfer_start's handle; 0 while the slot is free.
  int64_t handle = 0;
  /// The context, for the offload thread's use.
  asrt_context *ctx = nullptr;
};

/// Bookkeeping of asrt_transfer_start / asrt_transfer_wait: handles (1, 2,
/// 3, ... in start order, apart from asrt_bucket_start's) and slots reused
/// across steps. Pure, no transfers: a waited transfer's slot goes back to
/// a free list, so a step that starts the same transfers every step stops
/// allocating after the first.
class InFlightTransfers {
public:
  /// A free slot with the next handle; the caller fills it in.
  InFlightTransfer &start();
  /// The in-flight transfer of `handle`. Fails, saying why, for a handle
  /// that was never started or was already waited.
  Expected<InFlightTransfer *> find(int64_t handle) const {
    return slotsByHandle.find(handle);
  }
  /// Frees the slot of a waited transfer.
  void release(InFlightTransfer &slot);

  size_t inFlight() const { return slotsByHandle.inFlight(); }
  int64_t lastHandle() const { return slotsByHandle.lastHandle(); }
  /// Slots created so far: the most transfers that were ever in flight at
  /// once.
  size_t slots() const { return slotsByHandle.slots(); }
  /// Success when nothing is in flight; otherwise an error listing the
  /// transfers not waited (kind, handle, argument, bytes), for `when`
  /// ("step 3 returned").
  Status checkAllWaited(const std::string &when) const;

private:
  HandleSlots<InFlightTransfer> slotsByHandle{"asrt_transfer_start", "started"};
};

} // namespace autoshard::rt
