// Handles of asynchronous operations and the slots that hold them, reused
// across steps: what asrt_bucket_start / asrt_wait and asrt_transfer_start /
// asrt_transfer_wait share.
#pragma once

#include "core/CommStream.h"
#include "core/Context.h"
#include "core/Expected.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

/// Slots of type `Slot` (which has an `int64_t handle`, 0 while free) for
/// operations issued with handles 1, 2, 3, ... and waited exactly once, in
/// any order. A waited operation's slot goes back to a free list and the
/// next operation takes the most recently freed one, so a step that issues
/// the same operations every step gets the same slots back, with whatever
/// they grew (buffers, member lists), and stops allocating after the first
/// step. Pure bookkeeping; one thread (the issuing one) uses it.
template <typename Slot> class HandleSlots {
public:
  /// `issuer` names the issuing call in find()'s errors
  /// ("asrt_bucket_start"), `verb` what it does ("issued", "started").
  HandleSlots(const char *issuer, const char *verb)
      : issuer(issuer), verb(verb) {}

  /// A slot for the next operation, with its handle set; whatever else it
  /// holds is a previous operation's, for the caller to reuse or reset.
  Slot &take() {
    Slot *slot;
    if (freeSlots.empty()) {
      storage.push_back(std::make_unique<Slot>());
      slot = storage.back().get();
    } else {
      slot = freeSlots.back();
      freeSlots.pop_back();
    }
    slot->handle = nextHandle++;
    active.push_back(slot);
    return *slot;
  }

  /// The slot of in-flight `handle`. Fails, saying why, for a handle that
  /// was never issued or was already waited.
  Expected<Slot *> find(int64_t handle) const {
    for (Slot *slot : active)
      if (slot->handle == handle)
        return slot;
    if (handle < 1 || handle > lastHandle())
      return Error("handle " + std::to_string(handle) +
                   " was not returned by " + issuer + " on this context (" +
                   (lastHandle() == 0 ? "it has " + std::string(verb) + " none"
                                      : "its handles are 1.." +
                                            std::to_string(lastHandle())) +
                   ")");
    return Error("handle " + std::to_string(handle) +
                 " was already waited; wait each handle exactly once");
  }

  /// Frees a waited operation's slot (its handle becomes 0).
  void release(Slot &slot) {
    auto it = std::find(active.begin(), active.end(), &slot);
    if (it == active.end())
      fatal("%s: the slot of handle %lld is not in flight", issuer,
            static_cast<long long>(slot.handle));
    active.erase(it); // keeps the issue order of the others
    slot.handle = 0;
    freeSlots.push_back(&slot);
  }

  /// Success when nothing is in flight; otherwise an error for `when`
  /// ("step 3 returned") that counts the operations not waited as `noun`s
  /// ("asynchronous collective"), lists them as `describe` names their
  /// StreamOpInfo, and names `waiter`, the call that waits them
  /// ("asrt_wait").
  Status checkAllWaited(const std::string &when, const char *noun,
                        const char *waiter,
                        std::string (*describe)(const StreamOpInfo &)) const {
    if (active.empty())
      return Status::success();
    std::string list;
    for (Slot *slot : active)
      list += (list.empty() ? "" : "; ") + describe(slot->info);
    return Error(when + " with " + std::to_string(active.size()) + " " + noun +
                 (active.size() == 1 ? "" : "s") + " not waited: " + list +
                 "; every " + issuer + " handle must be waited with " + waiter +
                 " before the step returns");
  }

  size_t inFlight() const { return active.size(); }
  int64_t lastHandle() const { return nextHandle - 1; }
  /// Slots created so far: the most operations ever in flight at once.
  size_t slots() const { return storage.size(); }

private:
  const char *issuer;
  const char *verb;
  std::vector<std::unique_ptr<Slot>> storage;
  std::vector<Slot *> freeSlots;
  std::vector<Slot *> active;
  int64_t nextHandle = 1;
};

/// Issues the operation of `slot` (a HandleSlots slot with `ctx`, `info`,
/// `issued` and `seq`) on `stream`: `run(&slot)` runs on the stream's thread
/// after the compute lane's work queued so far. Ties `timer`'s trace event
/// to it and returns its handle.
template <typename Slot>
int64_t issueOnStream(CommStream &stream, OpTimer &timer, void (*run)(void *),
                      Slot &slot) {
  slot.issued = slot.ctx->device->fence(Lane::Compute);
  slot.seq = stream.issue(run, &slot, slot.info);
  timer.setStreamOp(slot.seq, slot.handle);
  return slot.handle;
}

/// The in-flight slot of `handle` in `slots` (InFlightBuckets,
/// InFlightTransfers); fatal, naming `fn`, for a handle not in flight.
template <typename Slots>
auto &inFlightSlot(const Slots &slots, int64_t handle, const char *fn) {
  auto found = slots.find(handle);
  if (!found)
    fatal("%s: %s", fn, found.message().c_str());
  return **found;
}

/// Waits in `fn` until the operation of `slot` on `stream` has run, and ties
/// `timer`'s trace event to it.
template <typename Slot>
void waitOnStream(CommStream &stream, OpTimer &timer, const char *fn,
                  const Slot &slot) {
  stream.wait(slot.seq, fn, slot.info);
  timer.setStreamOp(slot.seq, slot.handle);
}

} // namespace autoshard::rt
