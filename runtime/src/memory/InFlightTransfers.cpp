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
  return slotsByHandle.checkAllWaited(when, "asynchronous transfer",
                                      "asrt_transfer_wait", describeTransfer);
}

} // namespace autoshard::rt
