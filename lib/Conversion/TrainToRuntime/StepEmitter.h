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
#include "llvm/ADT/SmallPtrSet.h"

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
  /// (an optimizer's parameter), or -1.
  virtual mlir::Value output(mlir::Value result, int mayAliasOperand = -1) = 0;
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
    return resultOf<Fn>(emitCall(
        callee.name, rtabi::Signature<Fn>::get(builder().getContext()), args));
  }
  /// A call of a function that takes only the context.
  template <typename Fn>
  auto call(rtabi::Function<Fn> callee) {
    static_assert(rtabi::Signature<Fn>::kNumArgs == 0,
                  "abi.h declares arguments after the context");
    return resultOf<Fn>(emitCall(
        callee.name, rtabi::Signature<Fn>::get(builder().getContext()), {}));
  }

  virtual mlir::ModuleOp module() = 0;

  /// What the emitted calls move, counted by the rules as they emit them.
  StepTraffic traffic;
  /// Counts one emitted collective over `groupSize` ranks whose members'
  /// full tensors are `fulls`.
  void countCollective(cost::CollectiveKind kind, int64_t groupSize,
                       mlir::ValueRange fulls);
  /// Counts one emitted offload transfer (a train::TransferKind) of
  /// `bytes`.
  void countTransfer(int kind, int64_t bytes);

private:
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

/// Emits the runtime call of one op by its kind's rule. Fails, with a
/// diagnostic on `op`, for an op the runtime cannot run.
mlir::LogicalResult emitRuntimeCall(mlir::Operation *op, StepEmitter &emitter);

/// Linear layers with a bias whose result feeds a train.gelu, paired with
/// their first GELU, when nothing reads the layer's result before that GELU:
/// one asrt_linear_gelu_fwd call at the GELU carries out both (a GPU runs it
/// as one GEMM with a GELU epilogue). In program order.
llvm::SmallVector<std::pair<mlir::Operation *, mlir::Operation *>>
linearGeluPairs(mlir::Block &body);
/// The asrt_linear_gelu_fwd call of a pair of linearGeluPairs, emitted at
/// the GELU: both results' buffers are placed there.
void emitLinearGelu(mlir::Operation *linear, mlir::Operation *gelu,
                    StepEmitter &emitter);

/// A train.gelu_grad whose gradient operand is a train.linear_grad_input
/// read by nothing else, and the first train.bias_grad of its result, if
/// any: one asrt_linear_grad_gelu call at the GELU gradient carries out all
/// of them (a GPU runs it as one GEMM whose epilogue applies GELU's
/// derivative and reduces the bias gradient). The linear layer's operands
/// are read there, and the bias gradient is produced there.
struct LinearGradGelu {
  mlir::Operation *gradInput = nullptr;
  mlir::Operation *geluGrad = nullptr;
  mlir::Operation *biasGrad = nullptr; // or null
};
llvm::SmallVector<LinearGradGelu> linearGradGeluGroups(mlir::Block &body);
void emitLinearGradGelu(const LinearGradGelu &group, StepEmitter &emitter);

/// A train.linear_grad_weight and a train.bias_grad of the same output
/// gradient, when neither result is read before the later of the two and
/// the bias gradient is not taken by linearGradGeluGroups (`taken`): one
/// asrt_linear_grad_weight_bias call at the later op carries out both (a
/// GPU runs it as one GEMM whose epilogue reduces the bias gradient). The
/// weight gradient's operands are read there, and both results are produced
/// there. Each op is in at most one pair; in program order of `later`.
struct LinearGradWeightBias {
  mlir::Operation *weightGrad = nullptr;
  mlir::Operation *biasGrad = nullptr;
  mlir::Operation *later = nullptr; // one of the two
};
llvm::SmallVector<LinearGradWeightBias> linearGradWeightBiasPairs(
    mlir::Block &body, const llvm::SmallPtrSetImpl<mlir::Operation *> &taken);
void emitLinearGradWeightBias(const LinearGradWeightBias &pair,
                              StepEmitter &emitter);

/// Runs of two or more neighbouring train.adamw ops that one
/// asrt_adamw_update_multi call carries out: the same gradient dtype,
/// learning rate, step, clipping scale, betas and eps, none reading what
/// another updates. In program order.
llvm::SmallVector<llvm::SmallVector<mlir::Operation *>>
adamwGroups(mlir::Block &body);

/// The asrt_adamw_tensor fields of the train.adamw `op`, in the struct's
/// order: its buffers, its outputs' (placed at the emitter's position), the
/// element count and the weight decay.
llvm::SmallVector<mlir::Value> adamwTensorFields(mlir::Operation *op,
                                                 StepEmitter &emitter);

/// One asrt_adamw_update_multi call over the train.adamw ops `ops` of a
/// group, `fields` being adamwTensorFields of each: the descriptors go into
/// a stack array of asrt_adamw_tensor.
void emitAdamwMulti(llvm::ArrayRef<mlir::Operation *> ops,
                    llvm::ArrayRef<llvm::SmallVector<mlir::Value>> fields,
                    StepEmitter &emitter);

/// The packed bytes of a bucket over a group of `n` ranks whose members
/// have the full tensors `fulls`: each padded to n * ceil(numel / n)
/// elements (docs/RuntimeABI.md, "Buckets").
int64_t packedBucketBytes(int64_t n, mlir::ValueRange fulls);

/// Whether a rule exists for `op`.
bool hasRuntimeCallRule(mlir::Operation *op);

/// The manifest text of the step (docs/RuntimeABI.md), or failure with a
/// diagnostic on `step`.
mlir::FailureOr<std::string>
buildManifest(mlir::FunctionOpInterface step);

} // namespace autoshard

#endif // AUTOSHARD_LIB_CONVERSION_TRAINTORUNTIME_STEPEMITTER_H
