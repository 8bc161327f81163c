//===- OpOrder.h - program order of a block under moves ---------*- C++ -*-===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_OPORDER_H
#define AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_OPORDER_H

#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>

namespace autoshard::train {

/// The program order of the ops of one block while a pass moves ops in it.
///
/// `Operation::isBeforeInBlock` renumbers the whole block on the first query
/// after any move; a pass that queries after nearly every move (the
/// collective scheduler) is then quadratic in the block's size. Here every
/// op has a 64-bit label, sparse at first; a moved or new op takes the
/// middle of its neighbours' gap, and only when that gap is used up are the
/// labels of a window around it spread out again, the window doubling until
/// it holds enough free labels. Queries are O(1); a move is O(1) unless
/// many ops land in one spot, where the spreading costs in proportion to
/// the ops already packed there.
///
/// Every move and insertion in the block must go through it (or be
/// reported with `inserted`), and every erasure reported with `erased`.
class OpOrder {
public:
  explicit OpOrder(mlir::Block &block);

  /// Whether `a` is before `b`; both are in the block.
  bool isBefore(mlir::Operation *a, mlir::Operation *b) const;

  void moveBefore(mlir::Operation *op, mlir::Operation *anchor);
  void moveAfter(mlir::Operation *op, mlir::Operation *anchor);
  /// Labels an op just created in the block.
  void inserted(mlir::Operation *op) { place(op); }
  /// Forgets an op about to be erased.
  void erased(mlir::Operation *op) { label.erase(op); }

private:
  void place(mlir::Operation *op);
  void spread(mlir::Operation *op);
  uint64_t lowerBound(mlir::Operation *op) const;
  uint64_t upperBound(mlir::Operation *op) const;

  llvm::DenseMap<mlir::Operation *, uint64_t> label;
};

} // namespace autoshard::train

#endif // AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_OPORDER_H
