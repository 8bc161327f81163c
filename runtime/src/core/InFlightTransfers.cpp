// The offload transfers asrt_transfer_start started and asrt_transfer_wait
// has not yet waited.
#include "core/InFlightTransfers.h"
#include "core/Context.h"

#include <algorithm>

namespace autoshard::rt {

InFlightTransfer &InFlightTransfers::start() {
  InFlightTransfer *slot;
  if (freeSlots.empty()) {
    storage.push_back(std::make_unique<InFlightTransfer>());
    slot = storage.back().get();
  } else {
    slot = freeSlots.back();
    freeSlots.pop_back();
  }
  *slot = InFlightTransfer();
  slot->handle = nextHandle++;
  active.push_back(slot);
  return *slot;
}

Expected<InFlightTransfer *> InFlightTransfers::find(int64_t handle) const {
  for (InFlightTransfer *slot : active)
    if (slot->handle == handle)
      return slot;
  if (handle < 1 || handle > lastHandle())
    return Error("handle " + std::to_string(handle) +
                 " was not returned by asrt_transfer_start on this context (" +
                 (lastHandle() == 0
                      ? std::string("it has started none")
                      : "its handles are 1.." + std::to_string(lastHandle())) +
                 ")");
  return Error("handle " + std::to_string(handle) +
               " was already waited; wait each handle exactly once");
}

void InFlightTransfers::release(InFlightTransfer &slot) {
  auto it = std::find(active.begin(), active.end(), &slot);
  if (it == active.end())
    fatal("InFlightTransfers::release: the slot of handle %lld is not in "
          "flight",
          static_cast<long long>(slot.handle));
  active.erase(it); // keeps the start order of the others
  slot.handle = 0;
  slot.issued.reset();
  freeSlots.push_back(&slot);
}

Status InFlightTransfers::checkAllWaited(const std::string &when) const {
  if (active.empty())
    return Status::success();
  std::string list;
  for (InFlightTransfer *slot : active)
    list += (list.empty() ? "" : "; ") + describeTransfer(slot->info);
  return Error(when + " with " + std::to_string(active.size()) +
               (active.size() == 1 ? " asynchronous transfer"
                                   : " asynchronous transfers") +
               " not waited: " + list +
               "; every asrt_transfer_start handle must be waited with "
               "asrt_transfer_wait before the step returns");
}

} // namespace autoshard::rt
