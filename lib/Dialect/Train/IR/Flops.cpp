//===- Flops.cpp - the FLOPs a training step's ops compute ----------------===//

#include "autoshard/Dialect/Train/IR/Flops.h"
#include "autoshard/Dialect/Train/IR/TrainDialect.h"

using namespace mlir;
using namespace autoshard::train;

static double elementsOf(Value value) {
  return static_cast<double>(
      cast<RankedTensorType>(value.getType()).getNumElements());
}

/// Each element of `result` is a dot product of length `k`: a multiply and
/// an add per term.
static double dotProductFlops(Value result, double k) {
  return 2.0 * elementsOf(result) * k;
}

/// A dimension of a [out, in] weight: the length of the dot products of
/// x . W^T (in, 1) and of dy . W (out, 0).
static double weightDim(Value weight, unsigned dim) {
  return static_cast<double>(
      cast<RankedTensorType>(weight.getType()).getDimSize(dim));
}

/// The rows of a [..., N] output gradient, which a weight gradient sums
/// over.
static double rowsOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return static_cast<double>(type.getNumElements()) /
         static_cast<double>(type.getShape().back());
}

double autoshard::train::opFlops(Operation *op) {
  // Every output element is a dot product over the weight's input dim.
  if (auto linear = dyn_cast<LinearOp>(op))
    return dotProductFlops(linear.getResult(),
                           weightDim(linear.getWeight(), 1));
  // dx[M, K] = dy[M, N] . W[N, K]
  if (auto grad = dyn_cast<LinearGradInputOp>(op))
    return dotProductFlops(grad.getResult(), weightDim(grad.getWeight(), 0));
  // dW[N, K] = dy^T . x, over every row.
  if (auto grad = dyn_cast<LinearGradWeightOp>(op))
    return dotProductFlops(grad.getResult(), rowsOf(grad.getOperand(0)));
  // A fused op computes what the ops it stands for compute (GELU and the
  // bias gradient count no FLOPs, as on their own).
  if (auto fused = dyn_cast<LinearGeluOp>(op))
    return dotProductFlops(fused.getPreActivation(),
                           weightDim(fused.getWeight(), 1));
  // The input gradient LinearGradGelu never stores has the
  // pre-activation's shape.
  if (auto fused = dyn_cast<LinearGradGeluOp>(op))
    return dotProductFlops(fused.getPreActivation(),
                           weightDim(fused.getWeight(), 0));
  if (auto fused = dyn_cast<LinearGradWeightBiasOp>(op))
    return dotProductFlops(fused.getWeightGrad(),
                           rowsOf(fused.getGradOutput()));
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    // Every output element is a dot product over the contracted dim.
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
    int64_t k = lhs.getShape().end()[matmul.getTransposeLhs() ? -2 : -1];
    return dotProductFlops(matmul.getResult(), static_cast<double>(k));
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
