//===- MemoryPlan.cpp - the memory plan pass, byte sizes ------------------===//

#include "autoshard/Conversion/MemoryPlan.h"
#include "autoshard/Conversion/Passes.h"
#include "autoshard/Dialect/Train/IR/StepSignature.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstdio>

namespace autoshard {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "autoshard/Conversion/Passes.h.inc"
} // namespace autoshard

using namespace mlir;
using namespace autoshard;

StringRef autoshard::memoryCategoryName(MemoryCategory category) {
  switch (category) {
  case MemoryCategory::Parameters:
    return "parameters";
  case MemoryCategory::MasterWeights:
    return "master_weights";
  case MemoryCategory::Gradients:
    return "gradients";
  case MemoryCategory::OptimizerStates:
    return "optimizer_states";
  case MemoryCategory::Activations:
    return "activations";
  case MemoryCategory::Gathered:
    return "gathered";
  case MemoryCategory::Batch:
    return "batch";
  case MemoryCategory::Other:
    return "other";
  case MemoryCategory::Communication:
    return "communication";
  case MemoryCategory::OffloadStaging:
    return "offload_staging";
  }
  llvm_unreachable("unknown memory category");
}

cost::PeakBreakdown autoshard::peakBreakdown(const MemoryPlan &plan) {
  auto at = [&](MemoryCategory c) { return plan.atPeak[static_cast<int>(c)]; };
  cost::PeakBreakdown peak;
  peak.parameters = at(MemoryCategory::Parameters);
  peak.masterWeights = at(MemoryCategory::MasterWeights);
  peak.gradients = at(MemoryCategory::Gradients);
  peak.optimizerStates = at(MemoryCategory::OptimizerStates);
  peak.activations = at(MemoryCategory::Activations);
  peak.gatheredParameters = at(MemoryCategory::Gathered);
  peak.communication = at(MemoryCategory::Communication);
  peak.offloadStaging = at(MemoryCategory::OffloadStaging);
  peak.batch = at(MemoryCategory::Batch);
  // `atPeak` holds the live bytes; the arena's alignment and
  // fragmentation are the rest of the peak.
  peak.other = at(MemoryCategory::Other) + plan.stepPeak - plan.stepLive;
  return peak;
}

void autoshard::StepTraffic::addCollective(cost::CollectiveKind kind,
                                           int64_t groupSize,
                                           ArrayRef<int64_t> fullElements,
                                           int64_t elementBytes) {
  Count &count = collectives[static_cast<int>(kind)];
  ++count.calls;
  for (int64_t elements : fullElements)
    count.bytes +=
        cost::ringBytesPerRank(kind, elements, groupSize, elementBytes);
}

int64_t autoshard::StepTraffic::collectiveBytes() const {
  int64_t bytes = 0;
  for (const Count &count : collectives)
    bytes += count.bytes;
  return bytes;
}

StringRef autoshard::transferKindName(int index) {
  return train::stringifyTransferKind(static_cast<train::TransferKind>(index));
}

FailureOr<int64_t> autoshard::parseByteSize(StringRef text) {
  StringRef rest = text.trim();
  size_t digits = 0;
  while (digits < rest.size() &&
         (llvm::isDigit(rest[digits]) || rest[digits] == '.'))
    ++digits;
  double number;
  if (digits == 0 || rest.take_front(digits).getAsDouble(number))
    return failure();
  std::string unit = rest.drop_front(digits).trim().lower();
  if (!unit.empty() && unit.back() == 'b')
    unit.pop_back();
  double scale;
  bool binary = !unit.empty() && unit.back() == 'i';
  if (binary)
    unit.pop_back();
  double base = binary ? 1024.0 : 1000.0;
  if (unit.empty() && !binary)
    scale = 1;
  else if (unit == "k")
    scale = base;
  else if (unit == "m")
    scale = base * base;
  else if (unit == "g")
    scale = base * base * base;
  else if (unit == "t")
    scale = base * base * base * base;
  else
    return failure();
  double bytes = number * scale;
  if (!(bytes >= 0) || bytes > 9.0e18)
    return failure();
  return static_cast<int64_t>(std::llround(bytes));
}

FailureOr<int64_t> autoshard::parseMemoryBudget(Operation *where,
                                                StringRef budget) {
  FailureOr<int64_t> bytes = parseByteSize(budget);
  if (failed(bytes) || *bytes <= 0)
    return where->emitError()
           << "memory budget '" << budget
           << "' is not a positive size; write bytes or a size with a unit, "
              "such as 80GiB or 1.5GB";
  return bytes;
}

namespace {

struct PlanMemoryPass
    : autoshard::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<int64_t> budgetBytes;
    if (!budget.empty()) {
      FailureOr<int64_t> parsed = parseMemoryBudget(module, budget);
      if (failed(parsed))
        return signalPassFailure();
      budgetBytes = *parsed;
    }
    FailureOr<FunctionOpInterface> step = train::findStepFunction(module);
    if (failed(step))
      return signalPassFailure();
    FailureOr<MemoryPlan> plan = planStepMemory(module);
    if (failed(plan))
      return signalPassFailure();

    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    SmallVector<NamedAttribute> fields{
        b.getNamedAttr("peak", b.getI64IntegerAttr(plan->peak())),
        b.getNamedAttr("persistent", b.getI64IntegerAttr(plan->persistent)),
        b.getNamedAttr("arena", b.getI64IntegerAttr(plan->stepPeak)),
        b.getNamedAttr("live", b.getI64IntegerAttr(plan->stepLive))};
    for (int c = 0; c < kNumMemoryCategories; ++c)
      fields.push_back(b.getNamedAttr(
          memoryCategoryName(static_cast<MemoryCategory>(c)),
          b.getI64IntegerAttr(plan->atPeak[c])));
    // Offloaded state: host memory and NVMe files, outside the device
    // peak above.
    if (plan->hostPeak() || plan->nvme) {
      fields.push_back(b.getNamedAttr(
          "host_persistent", b.getI64IntegerAttr(plan->hostPersistent)));
      fields.push_back(
          b.getNamedAttr("host_arena", b.getI64IntegerAttr(plan->hostArena)));
      fields.push_back(b.getNamedAttr("nvme", b.getI64IntegerAttr(plan->nvme)));
    }
    (*step)->setAttr(train::TrainDialect::kMemoryPlanAttrName,
                     b.getDictionaryAttr(fields));

    if (!budgetBytes || plan->peak() <= *budgetBytes)
      return;
    InFlightDiagnostic diag =
        step->emitOpError()
        << "needs " << formatBytes(plan->peak())
        << " per rank at its peak, over the memory budget of "
        << formatBytes(*budgetBytes);
    diag.attachNote() << "at the peak: " << peakBreakdown(*plan).str();
    std::string tensors;
    for (auto &[what, bytes] : plan->largestAtPeak)
      tensors += (tensors.empty() ? "" : ", ") + what + " " +
                 formatBytes(bytes);
    diag.attachNote() << "largest step tensors at the peak: " << tensors;
    diag.attachNote() << "to fit: shard more (a strategy that shards "
                         "parameters, more ranks), offload (--offload=cpu or "
                         "nvme, --offload-params), activation checkpointing, "
                         "a smaller micro-batch, or a larger budget";
    signalPassFailure();
  }
};

} // namespace
