//===- StepSignature.h - roles and names of a training step -----*- C++ -*-===//

#ifndef AUTOSHARD_DIALECT_TRAIN_IR_STEPSIGNATURE_H
#define AUTOSHARD_DIALECT_TRAIN_IR_STEPSIGNATURE_H

#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

namespace autoshard::train {

/// One argument or result of a training step, as its attributes describe it.
struct StepValue {
  unsigned index;
  Role role;
  llvm::StringRef name;
  mlir::RankedTensorType type;
  /// Null where the value has no `train.init` (batches, results).
  InitAttr init;
  /// The `train.unit` of a param argument (the module path of its
  /// transformer block); empty in the root unit.
  llvm::StringRef unit;
  /// The `train.aliases` of a param argument: further names its tensor is
  /// saved under; empty without.
  llvm::SmallVector<llvm::StringRef, 1> aliases;
  /// The `train.weight_decay` of a param argument: its own decay, which
  /// overrides the optimizer's rule; null when absent.
  mlir::FloatAttr weightDecay;
};

/// The arguments and results of a function marked `train.step`, decoded from
/// their `train.*` attributes. Built from IR that has passed the dialect's
/// verifier, which checks everything this view assumes.
class StepSignature {
public:
  explicit StepSignature(mlir::FunctionOpInterface func);

  llvm::ArrayRef<StepValue> getArgs() const { return args; }
  llvm::ArrayRef<StepValue> getResults() const { return results; }

  /// The argument a `param` or `opt_state` result is the new value of.
  std::optional<unsigned> getUpdatedArg(unsigned resultIndex) const;
  /// The param argument a `grad` result (named `<param>.grad`) is the
  /// gradient of.
  std::optional<unsigned> getGradientOf(unsigned resultIndex) const;
  /// The argument with this name.
  std::optional<unsigned> getArgIndex(llvm::StringRef name) const;

  /// The units of the step (the distinct `train.unit`s of its params) in
  /// their order: first appearance among the arguments. The root unit is
  /// not among them.
  llvm::ArrayRef<llvm::StringRef> getUnits() const { return units; }
  /// The position in getUnits() of argument `argIndex`'s unit, or -1 in the
  /// root unit (no `train.unit`).
  int64_t getUnitIndex(unsigned argIndex) const;

private:
  llvm::SmallVector<StepValue> args;
  llvm::SmallVector<StepValue> results;
  /// The first argument of each name: lookups stay O(1) for steps with tens
  /// of thousands of arguments.
  llvm::StringMap<unsigned> argIndexByName;
  llvm::SmallVector<llvm::StringRef> units;
  /// Each argument's position in `units`, -1 for the root unit.
  llvm::SmallVector<int64_t> unitIndexByArg;
};

/// Checks the signature rules of a `train.step` function (roles, names,
/// types, updates); emits a diagnostic on the function and fails otherwise.
llvm::LogicalResult verifyStepSignature(mlir::FunctionOpInterface func);

/// The single function marked `train.step` in `module`; emits an error naming
/// the problem when there is none or more than one.
llvm::FailureOr<mlir::FunctionOpInterface> findStepFunction(mlir::ModuleOp module);

/// The strategy and grid a step was planned for, as its manifest and the
/// plan report state them: "none" on a grid of one rank without a plan.
struct StepPlacement {
  std::string strategy = "none";
  llvm::SmallVector<int64_t> grid{1};
  int64_t worldSize() const;
};
/// Fails, with an error on `step`, when its plan names no shard.grid.
llvm::FailureOr<StepPlacement> getStepPlacement(mlir::FunctionOpInterface step);

/// Where argument or result `index` of a step lives: its train.memory, or
/// device memory.
MemorySpace getArgMemorySpace(mlir::FunctionOpInterface func, unsigned index);
MemorySpace getResultMemorySpace(mlir::FunctionOpInterface func,
                                 unsigned index);

/// Where a tensor of a step lives: an argument as its train.memory says;
/// the result of a transfer (to_host, to_device, nvme_read, nvme_write)
/// where the transfer puts it; the result of an op marked train.on_host in
/// host memory; anything else in device memory.
MemorySpace getMemorySpace(mlir::Value value);

/// The offload transfer an op makes: a synchronous transfer op (to_host,
/// to_device, nvme_read, nvme_write) or the start of an asynchronous one.
/// `input` is what is copied, the NVMe argument read, or the value written;
/// `target` the NVMe argument written (null for the other kinds).
struct Transfer {
  TransferKind kind;
  mlir::Value input;
  mlir::Value target;
};
std::optional<Transfer> getTransfer(mlir::Operation *op);

/// Whether `name` is a valid argument/result name: [A-Za-z0-9_.]+, not
/// starting with '.'.
bool isValidStepName(llvm::StringRef name);

} // namespace autoshard::train

#endif // AUTOSHARD_DIALECT_TRAIN_IR_STEPSIGNATURE_H
