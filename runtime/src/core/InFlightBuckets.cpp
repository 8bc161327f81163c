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
  InFlightBucket *slot;
  if (freeSlots.empty()) {
    storage.push_back(std::make_unique<InFlightBucket>());
    slot = storage.back().get();
  } else {
    // The most recently freed slot: with the same buckets every step, the
    // same slots serve the same buckets, already large enough.
    slot = freeSlots.back();
    freeSlots.pop_back();
  }
  std::swap(slot->bucket, closed);
  slot->handle = nextHandle++;
  slot->seq = 0;
  active.push_back(slot);
  return *slot;
}

Expected<InFlightBucket *> InFlightBuckets::find(int64_t handle) const {
  for (InFlightBucket *slot : active)
    if (slot->handle == handle)
      return slot;
  if (handle < 1 || handle > lastHandle())
    return Error("handle " + std::to_string(handle) +
                 " was not returned by asrt_bucket_start on this context (" +
                 (lastHandle() == 0
                      ? std::string("it has issued none")
                      : "its handles are 1.." + std::to_string(lastHandle())) +
                 ")");
  return Error("handle " + std::to_string(handle) +
               " was already waited; wait each handle exactly once");
}

void InFlightBuckets::release(InFlightBucket &slot) {
  auto it = std::find(active.begin(), active.end(), &slot);
  if (it == active.end())
    fatal("InFlightBuckets::release: the slot of handle %lld is not in flight",
          static_cast<long long>(slot.handle));
  active.erase(it); // keeps the issue order of the others
  slot.handle = 0;
  slot.issued.reset();
  freeSlots.push_back(&slot);
}

Status InFlightBuckets::checkAllWaited(const std::string &when) const {
  if (active.empty())
    return Status::success();
  std::string list;
  for (InFlightBucket *slot : active)
    list += (list.empty() ? "" : "; ") + describeStreamOp(slot->info);
  return Error(when + " with " + std::to_string(active.size()) +
               (active.size() == 1 ? " asynchronous collective"
                                   : " asynchronous collectives") +
               " not waited: " + list +
               "; every asrt_bucket_start handle must be waited with "
               "asrt_wait before the step returns");
}

} // namespace autoshard::rt
