//===- OpOrder.cpp - program order of a block under moves -----------------===//

#include "autoshard/Dialect/Train/Transforms/OpOrder.h"

#include "mlir/IR/Operation.h"

#include <cassert>
#include <limits>

using namespace mlir;
using namespace autoshard::train;

/// Far enough apart that a long run of ops (a bucket's hoisted casts and
/// reads) lands in one gap before the labels around it must be spread out.
static constexpr uint64_t kStride = uint64_t(1) << 32;
/// The gap a spreading leaves between neighbours, at least: about 16 more
/// ops fit into any one gap before the next spreading there.
static constexpr uint64_t kMinGap = uint64_t(1) << 16;

OpOrder::OpOrder(Block &block) {
  uint64_t next = 0;
  for (Operation &op : block)
    label[&op] = next += kStride;
}

bool OpOrder::isBefore(Operation *a, Operation *b) const {
  assert(label.count(a) && label.count(b) && "op not in the order");
  return label.lookup(a) < label.lookup(b);
}

void OpOrder::moveBefore(Operation *op, Operation *anchor) {
  op->moveBefore(anchor);
  place(op);
}

void OpOrder::moveAfter(Operation *op, Operation *anchor) {
  op->moveAfter(anchor);
  place(op);
}

void OpOrder::place(Operation *op) {
  uint64_t low = lowerBound(op), high = upperBound(op);
  if (high - low >= 2) {
    label[op] = low + (high - low) / 2;
    return;
  }
  spread(op);
}

/// 0 stands for the front of the block: no op has it.
uint64_t OpOrder::lowerBound(Operation *op) const {
  Operation *prev = op->getPrevNode();
  return prev ? label.lookup(prev) : 0;
}

/// The largest label stands for the back of the block: no op has it.
uint64_t OpOrder::upperBound(Operation *op) const {
  Operation *next = op->getNextNode();
  return next ? label.lookup(next) : std::numeric_limits<uint64_t>::max();
}

/// Spreads the labels of the smallest window around `op` (doubling in each
/// direction) that leaves at least kMinGap between neighbours, evenly
/// between the labels of the ops just outside it. The whole block always
/// qualifies in practice: 2^64 labels for far fewer ops.
void OpOrder::spread(Operation *op) {
  Operation *first = op, *last = op;
  uint64_t count = 1;
  for (uint64_t grow = 1;; grow *= 2) {
    for (uint64_t i = 0; i < grow && first->getPrevNode(); ++i, ++count)
      first = first->getPrevNode();
    for (uint64_t i = 0; i < grow && last->getNextNode(); ++i, ++count)
      last = last->getNextNode();
    uint64_t low = lowerBound(first), high = upperBound(last);
    uint64_t gap = (high - low) / (count + 1);
    bool whole = !first->getPrevNode() && !last->getNextNode();
    if (gap < kMinGap && !whole)
      continue;
    assert(gap >= 1 && "more ops than labels");
    uint64_t next = low;
    for (Operation *it = first;; it = it->getNextNode()) {
      label[it] = next += gap;
      if (it == last)
        break;
    }
    return;
  }
}
