// The offload transfers asrt_transfer_start started and asrt_transfer_wait
// has not yet waited.
#include "memory/InFlightTransfers.h"
#include "core/Context.h"

#include <algorithm>

namespace autoshard::rt {

InFlightTransfer &InFlightTransfers::start() {
  InFlightTransfer &slot = slotsByHandle.take();
  int64_t handle = slot.handle;
  slot = InFlightTransfer();
  slot.handle = handle;
  return slot;
}

void InFlightTransfers::release(InFlightTransfer &slot) {
  slotsByHandle.release(slot);
  slot.issued.reset();
}

Status InFlightTransfers::checkAllWaited(const std::string &when) const {
  if (slotsByHandle.inFlight() == 0)
    return Status::success();
  std::string list;
  for (InFlightTransfer *slot : slotsByHandle.inFlightSlots())
    list += (list.empty() ? "" : "; ") + describeTransfer(slot->info);
  return Error(when + " with " + std::to_string(slotsByHandle.inFlight()) +
               (slotsByHandle.inFlight() == 1 ? " asynchronous transfer"
                                              : " asynchronous transfers") +
               " not waited: " + list +
               "; every asrt_transfer_start handle must be waited with "
               "asrt_transfer_wait before the step returns");
}

} // namespace autoshard::rt
