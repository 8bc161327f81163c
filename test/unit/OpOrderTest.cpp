// OpOrder against the block's own order, under the moves that exhaust gaps.
#include "autoshard/Dialect/Train/Transforms/OpOrder.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir;
using namespace autoshard::train;

namespace {

class OpOrderTest : public ::testing::Test {
protected:
  OpOrderTest() : builder(&context) {
    context.allowUnregisteredDialects();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
    for (int i = 0; i < 200; ++i)
      ops.push_back(makeOp());
  }

  Operation *makeOp() {
    return builder.create(OperationState(builder.getUnknownLoc(), "test.op"));
  }

  Block &block() { return *module->getBody(); }

  /// Every op's successor is after it and nothing else, as the block has it.
  void expectSameOrder(const OpOrder &order) {
    Operation *prev = nullptr;
    for (Operation &op : block()) {
      if (prev)
        ASSERT_TRUE(order.isBefore(prev, &op));
      prev = &op;
    }
    std::mt19937 random(7);
    std::uniform_int_distribution<size_t> pick(0, ops.size() - 1);
    for (int i = 0; i < 2000; ++i) {
      Operation *a = ops[pick(random)], *b = ops[pick(random)];
      ASSERT_EQ(order.isBefore(a, b), a != b && a->isBeforeInBlock(b));
    }
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
  std::vector<Operation *> ops;
};

TEST_F(OpOrderTest, RandomMoves) {
  OpOrder order(block());
  std::mt19937 random(42);
  std::uniform_int_distribution<size_t> pick(0, ops.size() - 1);
  for (int i = 0; i < 5000; ++i) {
    Operation *op = ops[pick(random)], *anchor = ops[pick(random)];
    if (op == anchor)
      continue;
    if (i % 2)
      order.moveAfter(op, anchor);
    else
      order.moveBefore(op, anchor);
  }
  expectSameOrder(order);
}

// Many ops moved into one gap, as the scheduler hoists a bucket's casts and
// reads before its gather: far more than the initial gap can split.
TEST_F(OpOrderTest, ManyMovesIntoOneGap) {
  OpOrder order(block());
  Operation *anchor = ops[100];
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i] != anchor)
        order.moveBefore(ops[i], anchor);
  expectSameOrder(order);
  // The other side of the same spot.
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i] != anchor)
      order.moveAfter(ops[i], anchor);
  expectSameOrder(order);
}

TEST_F(OpOrderTest, InsertAndErase) {
  OpOrder order(block());
  // New ops all right after the front, then at the back.
  for (int i = 0; i < 300; ++i) {
    builder.setInsertionPointAfter(ops.front());
    ops.push_back(makeOp());
    order.inserted(ops.back());
  }
  builder.setInsertionPointToEnd(&block());
  for (int i = 0; i < 300; ++i) {
    ops.push_back(makeOp());
    order.inserted(ops.back());
  }
  expectSameOrder(order);
  for (int i = 0; i < 100; ++i) {
    Operation *op = ops.back();
    ops.pop_back();
    order.erased(op);
    op->erase();
  }
  expectSameOrder(order);
}

} // namespace
