//===- StepEmitter.h - emitting runtime calls for a training step -*- C++ -*-===//

#ifndef AUTOSHARD_LIB_CONVERSION_TRAINTORUNTIME_STEPEMITTER_H
#define AUTOSHARD_LIB_CONVERSION_TRAINTORUNTIME_STEPEMITTER_H

#include "autoshard/Conversion/MemoryPlan.h"
#include "autoshard/Conversion/RuntimeABI.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringMap.h"

namespace autoshard {

/// What the per-op rules see of the lowering: the buffer behind each tensor
/// and helpers to build a call. Buffer placement (allocation, result slots,
/// in-place reuse, frees) is the lowering's business, not the rules'.
class StepEmitter {
public:
  virtual ~StepEmitter() = default;

  /// The buffer holding the value of `tensor`, which must be defined.
  virtual mlir::Value buffer(mlir::Value tensor) = 0;
  /// The buffer `result` is written to. `mayAliasOperand` names the
  /// operand whose buffer the op may overwrite elementwise with this result
  /// (an optimizer's parameter), or -1. `reads` are the operands the op
  /// reads to compute `result` (a multi-tensor update's tensor reads its
  /// own and the shared scalars); empty means all of them.
  virtual mlir::Value output(mlir::Value result, int mayAliasOperand = -1,
                             llvm::ArrayRef<unsigned> reads = {}) = 0;
  /// Makes `result` live in `tensor`'s buffer, `byteOffset` bytes in; the op
  /// emits no code for it (views: reshape, slices).
  virtual void alias(mlir::Value result, mlir::Value tensor,
                     int64_t byteOffset = 0) = 0;
  /// Whether `result` may be computed in `input`'s buffer: `input` is a
  /// temporary of the step that dies at this op, and `result` needs no
  /// buffer of its own (it is not written to a caller's result buffer).
  virtual bool canReuse(mlir::Value input, mlir::Value result) = 0;
  /// Likewise for an asynchronous op that reads `input` from its start
  /// (this op) until `wait` and writes `result` by then: `input` is a
  /// temporary read by this op alone, no other tensor in its buffer is read
  /// after this op, and nothing reads the buffer after `wait`.
  virtual bool canReuseUntil(mlir::Value input, mlir::Value result,
                             mlir::Operation *wait) = 0;
  /// Makes `result` live in `input`'s buffer, written by the op.
  virtual void reuse(mlir::Value result, mlir::Value input) = 0;
  /// A buffer of `bytes` in the step's arena that the runtime packs a
  /// bucket into, alive from this op to `until` (this op when null).
  virtual mlir::Value packBuffer(int64_t bytes, mlir::Operation *until) = 0;

  /// The runtime handle (an i64, 0 for a collective that needed no call)
  /// of a started collective's `!train.pending` value.
  virtual void bindHandle(mlir::Value pending, mlir::Value handle) = 0;
  virtual mlir::Value handle(mlir::Value pending) = 0;

  /// The runtime context argument.
  virtual mlir::Value context() = 0;
  virtual mlir::OpBuilder &builder() = 0;
  virtual mlir::Location loc() = 0;

  mlir::Value i64(int64_t value);
  mlir::Value i32(int32_t value);
  mlir::Value f32(float value);
  mlir::Value nullPtr();
  /// A pointer to a constant array of `values` in the generated object
  /// (dims and strides of the generic kernels), or null when empty.
  mlir::Value i64Array(llvm::ArrayRef<int64_t> values);
  /// A pointer to the generated object's read-only constant `value` (an
  /// array attribute of the LLVM array type `type`), a private global
  /// named `prefix`.N made once per distinct value.
  mlir::Value constantAddress(llvm::StringRef prefix, mlir::Attribute value,
                              mlir::Type type, unsigned alignment = 0);
  /// Calls the runtime function `callee`, an ABI_FUNCTION, with the context
  /// prepended to `args`, and returns its result if it has one. The callee
  /// is declared on first use with the type abi.h gives it; `args` must be
  /// the arguments abi.h declares after the context (checked at compile
  /// time), each of the MLIR type of its C parameter (checked here). A
  /// braced list, so that its values are built in the order written.
  template <typename Fn, size_t N>
  auto call(rtabi::Function<Fn> callee, const mlir::Value (&args)[N]) {
    static_assert(N == rtabi::Signature<Fn>::kNumArgs,
                  "abi.h declares a different number of arguments");
    return resultOf<Fn>(emitCall(callee.name, signatureOf(callee), args));
  }
  /// A call of a function that takes only the context.
  template <typename Fn>
  auto call(rtabi::Function<Fn> callee) {
    static_assert(rtabi::Signature<Fn>::kNumArgs == 0,
                  "abi.h declares arguments after the context");
    return resultOf<Fn>(emitCall(callee.name, signatureOf(callee), {}));
  }

  virtual mlir::ModuleOp module() = 0;

  /// What the emitted calls move, counted by the rules as they emit them.
  StepTraffic traffic;

  /// Whether only the buffers are placed (a buffer assignment, whose code
  /// is thrown away): calls and constants are then not built, and stand
  /// for their values is one placeholder per type. A rule sees no
  /// difference: it never reads a call's or a constant's value back.
  void setPlacementOnly(bool only) { placementOnly = only; }
  bool isPlacementOnly() const { return placementOnly; }
  /// Counts one emitted collective over `groupSize` ranks whose members'
  /// full tensors are `fulls`.
  void countCollective(cost::CollectiveKind kind, int64_t groupSize,
                       mlir::ValueRange fulls);
  /// Counts one emitted offload transfer (a train::TransferKind) of
  /// `bytes`.
  void countTransfer(int kind, int64_t bytes);

private:
  bool placementOnly = false;
  llvm::DenseMap<mlir::Type, mlir::Value> placeholders;
  /// In placement-only mode, the placeholder of `type`.
  mlir::Value placeholder(mlir::Type type);

  llvm::DenseMap<mlir::Attribute, mlir::LLVM::GlobalOp> constantGlobals;
  /// The index of the next constant's name, once the module's are known.
  std::optional<unsigned> nextConstant;

  /// The MLIR type of each runtime function called so far, by name (one
  /// name is one abi.h declaration): built once, not at every call, of
  /// which a step has tens of thousands.
  llvm::StringMap<mlir::FunctionType> signatures;
  template <typename Fn>
  mlir::FunctionType signatureOf(rtabi::Function<Fn> callee) {
    mlir::FunctionType &type = signatures[callee.name];
    if (!type)
      type = rtabi::Signature<Fn>::get(builder().getContext());
    return type;
  }

  mlir::func::FuncOp declare(llvm::StringRef callee, mlir::FunctionType type);
  /// The call of `callee`, of C type `type`, with the context and `args`;
  /// its result, or null.
  mlir::Value emitCall(llvm::StringRef callee, mlir::FunctionType type,
                       llvm::ArrayRef<mlir::Value> args);
  template <typename Fn>
  auto resultOf(mlir::Value result) {
    if constexpr (rtabi::Signature<Fn>::kReturnsValue)
      return result;
  }
};

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}
inline int64_t numElements(mlir::Value v) {
  return tensorType(v).getNumElements();
}
/// The asrt_dtype code of a tensor's element type, as an i32 operand.
mlir::Value dtypeOf(StepEmitter &e, mlir::Value tensor);

/// Emits the runtime call of one op (a fused op of autoshard-fuse is one
/// call too) by its kind's rule. Fails, with a diagnostic on `op`, for an op
/// the runtime cannot run.
mlir::LogicalResult emitRuntimeCall(mlir::Operation *op, StepEmitter &emitter);

/// Emits the runtime call of a generic tensor op (TrainTensorOps.td);
/// fails, with a diagnostic on `op`, for any other op.
mlir::LogicalResult emitTensorOpCall(mlir::Operation *op,
                                     StepEmitter &emitter);

/// The packed bytes of a bucket over a group of `n` ranks whose members
/// have the full tensors `fulls`: each padded to n * ceil(numel / n)
/// elements (docs/RuntimeABI.md, "Buckets").
int64_t packedBucketBytes(int64_t n, mlir::ValueRange fulls);

/// The manifest text of the step (docs/RuntimeABI.md), or failure with a
/// diagnostic on `step`.
mlir::FailureOr<std::string>
buildManifest(mlir::FunctionOpInterface step);

} // namespace autoshard

#endif // AUTOSHARD_LIB_CONVERSION_TRAINTORUNTIME_STEPEMITTER_H
