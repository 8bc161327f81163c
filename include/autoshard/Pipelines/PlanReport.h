//===- PlanReport.h - a compiled step's plan, before launch -----*- C++ -*-===//
//
// What shard-compile --plan-report prints: for each step of the binary, its
// strategy and grid, each rank's device memory at the peak (persistent
// state, step arena, categories, largest tensors), host memory and NVMe
// under offload, the bytes every collective kind sends per step and the
// offload transfers, and the FLOPs; the binary's device memory per rank
// with the memory budget. Everything comes from the step's buffer
// assignment (assignStepBuffers), which the lowering emits, so the running
// binary's --stats-json reports the same bytes and peaks.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_PIPELINES_PLANREPORT_H
#define AUTOSHARD_PIPELINES_PLANREPORT_H

#include "autoshard/CostModel/Memory.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <utility>

namespace autoshard {

/// The report of a binary whose training step is `train` and, when given,
/// whose evaluation step is `eval` (both partitioned and cleaned up for the
/// lowering: addLoweringCleanupPasses), as text or as one
/// JSON object (schema "autoshard-plan-report/1"). `memoryBudget` (bytes or
/// a size such as 80GiB; empty: none) is the memory the binary is held to.
/// Fails with the lowering's diagnostic.
mlir::FailureOr<std::string> formatPlanReport(mlir::ModuleOp train,
                                              mlir::ModuleOp eval, bool json,
                                              llvm::StringRef memoryBudget);

/// A peak by category as both reports give it in JSON: `at_peak`
/// ({"parameters": bytes, ..., "buffers": bytes}) and `buffers_at_peak`
/// (the buffers' parts).
std::pair<llvm::json::Object, llvm::json::Object>
peakJson(const cost::PeakBreakdown &peak);

} // namespace autoshard

#endif // AUTOSHARD_PIPELINES_PLANREPORT_H
