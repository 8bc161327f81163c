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
  return slotsByHandle.checkAllWaited(when, "asynchronous collective",
                                      "asrt_wait", describeStreamOp);
}

} // namespace autoshard::rt
