//===- Flops.cpp - the FLOPs a training step's ops compute ----------------===//

#include "autoshard/Dialect/Train/IR/Flops.h"
#include "autoshard/Dialect/Train/IR/TrainDialect.h"

using namespace mlir;
using namespace autoshard::train;

static double elementsOf(Value value) {
  return static_cast<double>(
      cast<RankedTensorType>(value.getType()).getNumElements());
}

double autoshard::train::opFlops(Operation *op) {
  if (auto linear = dyn_cast<LinearOp>(op)) {
    // Every output element is a dot product over the weight's input dim.
    auto w = cast<RankedTensorType>(linear.getWeight().getType());
    return 2.0 * elementsOf(linear.getResult()) *
           static_cast<double>(w.getDimSize(1));
  }
  if (auto grad = dyn_cast<LinearGradInputOp>(op)) {
    // dx[M, K] = dy[M, N] . W[N, K]
    auto w = cast<RankedTensorType>(grad.getWeight().getType());
    return 2.0 * elementsOf(grad.getResult()) *
           static_cast<double>(w.getDimSize(0));
  }
  if (auto grad = dyn_cast<LinearGradWeightOp>(op)) {
    // dW[N, K] = dy^T . x, over every row.
    auto dy = cast<RankedTensorType>(grad.getOperand(0).getType());
    double rows = static_cast<double>(dy.getNumElements()) /
                  static_cast<double>(dy.getShape().back());
    return 2.0 * elementsOf(grad.getResult()) * rows;
  }
  // A fused op computes what the ops it stands for compute (GELU and the
  // bias gradient count no FLOPs, as on their own).
  if (auto fused = dyn_cast<LinearGeluOp>(op)) {
    auto w = cast<RankedTensorType>(fused.getWeight().getType());
    return 2.0 * elementsOf(fused.getPreActivation()) *
           static_cast<double>(w.getDimSize(1));
  }
  if (auto fused = dyn_cast<LinearGradGeluOp>(op)) {
    // The input gradient it never stores has the pre-activation's shape.
    auto w = cast<RankedTensorType>(fused.getWeight().getType());
    return 2.0 * elementsOf(fused.getPreActivation()) *
           static_cast<double>(w.getDimSize(0));
  }
  if (auto fused = dyn_cast<LinearGradWeightBiasOp>(op)) {
    auto dy = cast<RankedTensorType>(fused.getGradOutput().getType());
    double rows = static_cast<double>(dy.getNumElements()) /
                  static_cast<double>(dy.getShape().back());
    return 2.0 * elementsOf(fused.getWeightGrad()) * rows;
  }
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    // Every output element is a dot product over the contracted dim.
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
    int64_t k = lhs.getShape().end()[matmul.getTransposeLhs() ? -2 : -1];
    return 2.0 * elementsOf(matmul.getResult()) * static_cast<double>(k);
  }
  if (isa<CausalAttentionOp, CausalAttentionGradOp>(op)) {
    // q: [B, T, H, D]: scores and values.
    auto q = cast<RankedTensorType>(
        op->getOperand(isa<CausalAttentionOp>(op) ? 0 : 1).getType());
    if (q.getRank() != 4)
      return 0;
    double b = q.getDimSize(0), t = q.getDimSize(1), h = q.getDimSize(2),
           d = q.getDimSize(3);
    double forward = 4.0 * b * h * t * t * d;
    return isa<CausalAttentionOp>(op) ? forward : 2 * forward;
  }
  return 0;
}

double autoshard::train::blockFlops(Block &block) {
  double total = 0;
  for (Operation &op : block)
    total += opFlops(&op);
  return total;
}
