//===- StepBufferAssignment.h - where a step keeps each tensor -*- C++ -*-===//
//
// The buffer assignment of a training step: which results the step writes
// straight into the caller's result buffers, which reuse a dying input's
// buffer, and where in the step's arenas every other buffer lives and for
// how long. The memory plan, the plan report, --strategy=auto's exact plans
// and the lowering all take it from here; the lowering emits exactly this
// placement.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_CONVERSION_STEPBUFFERASSIGNMENT_H
#define AUTOSHARD_CONVERSION_STEPBUFFERASSIGNMENT_H

#include "autoshard/Conversion/MemoryPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <string>
#include <vector>

namespace autoshard {

/// One buffer of the step's arena (device) or host arena (offload).
struct StepArenaBuffer {
  /// The step value it is allocated for (a result copied to the caller
  /// through it when staged); null for a bucket's pack buffer.
  mlir::Value tensor;
  int64_t bytes = 0;
  MemoryCategory category = MemoryCategory::Other;
  /// What it holds ("gradient of h.0.attn.weight"), for the reports.
  std::string what;
  /// Program positions (ops of the step, in order) of its first write and
  /// its last read.
  int firstUse = 0, lastUse = 0;
  bool host = false;
  /// Its offset in its arena.
  int64_t offset = 0;
};

struct StepBufferAssignment {
  /// The arena buffers, in the order the lowering allocates them, which
  /// is the order in which it asks for them.
  std::vector<StepArenaBuffer> buffers;
  /// Step results written straight into the caller's result buffer (the
  /// first result slot that returns each).
  llvm::DenseSet<mlir::Value> inPlaceResults;
  /// Step values computed over the buffer of an input that dies at their
  /// op, and that input.
  llvm::DenseMap<mlir::Value, mlir::Value> reusedInputs;
  /// The arenas' sizes: the high-water marks of the packing.
  int64_t arenaBytes = 0, hostArenaBytes = 0;
  /// Summed: persistent state, the arena and the live peak by category.
  MemoryPlan memory;
  /// What the step's collectives and transfers move.
  StepTraffic traffic;
};

/// The buffer assignment of `module`'s training step as the lowering will
/// place it. The step must be in the form the lowering takes (after
/// autoshard-partition, cse, canonicalize and autoshard-fuse:
/// buildLowerToLLVMPipeline's cleanup, addLoweringCleanup). `module` is read
/// only: nothing is cloned or lowered in it. Fails with a diagnostic on a
/// step the lowering would reject.
mlir::FailureOr<StepBufferAssignment>
assignStepBuffers(mlir::ModuleOp module);

/// assignStepBuffers as an MLIR analysis of a module, for passes that share
/// one assignment through their AnalysisManager.
/// autoshard-lower-to-runtime takes it from there and emits that placement:
/// it places nothing itself, and fails if the step asks for a buffer the
/// assignment does not hold. The reports and auto call assignStepBuffers
/// directly.
struct StepBufferAssignmentAnalysis {
  explicit StepBufferAssignmentAnalysis(mlir::Operation *module);
  /// Empty when the step could not be assigned (its diagnostic was emitted).
  std::optional<StepBufferAssignment> assignment;
};

} // namespace autoshard

#endif // AUTOSHARD_CONVERSION_STEPBUFFERASSIGNMENT_H
