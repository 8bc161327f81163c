//===- TrainDialect.h - the training-graph dialect --------------*- C++ -*-===//

#ifndef AUTOSHARD_DIALECT_TRAIN_IR_TRAINDIALECT_H
#define AUTOSHARD_DIALECT_TRAIN_IR_TRAINDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "autoshard/Dialect/Train/IR/TrainDialect.h.inc"
#include "autoshard/Dialect/Train/IR/TrainEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "autoshard/Dialect/Train/IR/TrainAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "autoshard/Dialect/Train/IR/TrainTypes.h.inc"

#include "autoshard/Dialect/Train/IR/TrainInterfaces.h.inc"

#include "llvm/Support/Regex.h"

namespace autoshard::train {
/// `regex` anchored to match a whole name, as a param_group's names and a
/// plan's keep_gathered match parameter names.
llvm::Regex wholeNameRegex(llvm::StringRef regex);
/// The first of `groups` that selects a parameter of this name and size
/// (the one that places it), or null: the plan's own placements apply.
ParamGroupAttr firstSelectingGroup(llvm::ArrayRef<ParamGroupAttr> groups,
                                   llvm::StringRef name, int64_t elements);

/// The values a float attribute of a train op or attribute may hold. Every
/// one must at least be finite: a NaN or infinite constant poisons the step
/// at run time, where the first sign of it is a diverged loss.
enum class FloatRule {
  Finite,      // any finite value (a scale)
  NonNegative, // finite and >= 0 (a weight decay, a momentum)
  Positive,    // finite and > 0 (an epsilon, a rope base, a max norm, lr)
  UnitInterval // in [0, 1) (an Adam beta)
};

/// Checks `value`, the float attribute `name`, against `rule`, with one
/// message per rule that names the attribute, what it must be and the
/// value: the verifiers of every train op and attribute use it, so that
/// each float rule is checked and worded alike.
mlir::LogicalResult
verifyFloat(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
            llvm::StringRef name, double value, FloatRule rule);

/// The gradient rule of the elementwise functions of one tensor (the ops
/// of train.unary_grad's functions): grad_input = train.unary_grad of `fn`
/// and `alpha`, or the gradient itself for add_scalar.
mlir::LogicalResult buildUnaryGradient(mlir::OpBuilder &b, mlir::Operation *op,
                                       UnaryFn fn, float alpha,
                                       llvm::ArrayRef<mlir::Value> grads,
                                       llvm::ArrayRef<bool> needed,
                                       llvm::MutableArrayRef<mlir::Value> operandGrads);

/// The trait of the loss ops (Train_Loss in TrainOps.td): it carries no
/// code, the passes ask `op->hasTrait<LossTrait>()`.
template <typename ConcreteType>
class LossTrait : public mlir::OpTrait::TraitBase<ConcreteType, LossTrait> {};

/// The NumPy broadcast of two shapes (aligned at the right; a dimension of
/// 1 or a missing one repeats), or failure when they do not broadcast.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);
} // namespace autoshard::train

#define GET_OP_CLASSES
#include "autoshard/Dialect/Train/IR/TrainOps.h.inc"

#endif // AUTOSHARD_DIALECT_TRAIN_IR_TRAINDIALECT_H
