// The buckets asrt_bucket_start issued and asrt_wait has not yet waited.
#include "core/InFlightBuckets.h"
#include "core/Context.h"

#include <algorithm>
#include <utility>

namespace autoshard::rt {

void *InFlightBucket::packBuffer(Device &device, int64_t bytes) {
  return pack.reserve(device, bytes, "asrt_bucket_start");
}

InFlightBucket &InFlightBuckets::issue(OpenBucket &closed) {
  InFlightBucket &slot = slotsByHandle.take();
  std::swap(slot.bucket, closed);
  slot.seq = 0;
  return slot;
}

void InFlightBuckets::release(InFlightBucket &slot) {
  slotsByHandle.release(slot);
  slot.issued.reset();
}

Status InFlightBuckets::checkAllWaited(const std::string &when) const {
  if (slotsByHandle.inFlight() == 0)
    return Status::success();
  std::string list;
  for (InFlightBucket *slot : slotsByHandle.inFlightSlots())
    list += (list.empty() ? "" : "; ") + describeStreamOp(slot->info);
  return Error(when + " with " + std::to_string(slotsByHandle.inFlight()) +
               (slotsByHandle.inFlight() == 1 ? " asynchronous collective"
                                              : " asynchronous collectives") +
               " not waited: " + list +
               "; every asrt_bucket_start handle must be waited with "
               "asrt_wait before the step returns");
}

} // namespace autoshard::rt
