//===- PlanReport.cpp - a compiled step's plan, before launch -------------===//

#include "autoshard/Pipelines/PlanReport.h"

#include "autoshard/Conversion/MemoryPlan.h"
#include "autoshard/Conversion/StepBufferAssignment.h"
#include "autoshard/Dialect/Train/IR/Flops.h"
#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "autoshard/Pipelines/EvaluationStep.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace autoshard;
using namespace autoshard::train;

namespace {

/// One step of the binary and what lowering it settled.
struct StepReport {
  std::string entry; // "step" or "eval"
  std::string name;
  StepPlacement placement;
  StepPlan plan;
  double flops = 0;
};

FailureOr<StepReport> reportStep(ModuleOp module, StringRef entry) {
  FailureOr<FunctionOpInterface> step = findStepFunction(module);
  if (failed(step))
    return failure();
  StepReport report;
  report.entry = entry.str();
  report.name = step->getName().str();
  FailureOr<StepPlacement> placement = getStepPlacement(*step);
  if (failed(placement))
    return failure();
  report.placement = std::move(*placement);
  report.flops = blockFlops(step->getFunctionBody().front());
  FailureOr<StepBufferAssignment> assigned = assignStepBuffers(module);
  if (failed(assigned))
    return failure();
  report.plan = StepPlan{std::move(assigned->memory), assigned->traffic};
  return report;
}

/// "all_reduce", "all_gather", "reduce_scatter" by index, as the runtime
/// names them.
const char *collectiveName(size_t kind) {
  return cost::stringify(static_cast<cost::CollectiveKind>(kind));
}

std::string plural(int64_t count, StringRef word) {
  return std::to_string(count) + " " + word.str() + (count == 1 ? "" : "s");
}

void printStep(llvm::raw_ostream &os, const StepReport &step) {
  const MemoryPlan &memory = step.plan.memory;
  const StepTraffic &traffic = step.plan.traffic;
  os << (step.entry == "eval" ? "evaluation step " : "training step ")
     << step.name << ": " << step.placement.strategy << " over "
     << plural(step.placement.worldSize(), "rank") << " (grid ";
  llvm::interleave(step.placement.grid, os, "x");
  os << ")\n";
  os << "  device memory per rank: " << formatBytes(memory.peak())
     << " at the peak: persistent " << formatBytes(memory.persistent)
     << ", step arena " << formatBytes(memory.stepPeak) << "\n";
  os << "    at the peak: " << peakBreakdown(memory).str() << "\n";
  if (!memory.largestAtPeak.empty()) {
    os << "    largest tensors then:";
    llvm::interleave(
        ArrayRef(memory.largestAtPeak).take_front(3), os,
        [&](const auto &t) {
          os << " " << t.first << " " << formatBytes(t.second);
        },
        ",");
    os << "\n";
  }
  if (memory.hostPeak())
    os << "  host memory per rank: " << formatBytes(memory.hostPeak())
       << " (offloaded state " << formatBytes(memory.hostPersistent)
       << ", host arena " << formatBytes(memory.hostArena) << ")\n";
  if (memory.nvme)
    os << "  NVMe per rank: " << formatBytes(memory.nvme) << "\n";
  int64_t calls = 0;
  for (const StepTraffic::Count &c : traffic.collectives)
    calls += c.calls;
  os << "  collectives per step per rank: "
     << formatBytes(traffic.collectiveBytes()) << " sent in "
     << plural(calls, "call") << "\n";
  for (auto [kind, count] : llvm::enumerate(traffic.collectives))
    if (count.calls)
      os << llvm::formatv("    {0,-15} {1,14} bytes in {2}\n",
                          collectiveName(kind), count.bytes,
                          plural(count.calls, "call"));
  if (llvm::any_of(traffic.transfers,
                   [](const StepTraffic::Count &c) { return c.calls; })) {
    os << "  offload transfers per step per rank:\n";
    for (auto [kind, count] : llvm::enumerate(traffic.transfers))
      if (count.calls)
        os << llvm::formatv("    {0,-15} {1,14} bytes in {2}\n",
                            transferKindName(kind), count.bytes,
                            plural(count.calls, "call"));
  }
  os << llvm::formatv("  compute per step per rank: {0} FLOP ({1:f4} GFLOP: "
                      "matrix products and attention)\n",
                      static_cast<int64_t>(step.flops), step.flops / 1e9);
}

llvm::json::Object stepJson(const StepReport &step) {
  const MemoryPlan &memory = step.plan.memory;
  const StepTraffic &traffic = step.plan.traffic;
  auto [atPeak, buffersAtPeak] = peakJson(peakBreakdown(memory));
  llvm::json::Object collectives;
  for (auto [kind, count] : llvm::enumerate(traffic.collectives))
    collectives[collectiveName(kind)] =
        llvm::json::Object{{"calls", count.calls}, {"bytes", count.bytes}};
  llvm::json::Object transfers;
  for (auto [kind, count] : llvm::enumerate(traffic.transfers))
    transfers[transferKindName(kind)] =
        llvm::json::Object{{"calls", count.calls}, {"bytes", count.bytes}};
  llvm::json::Array grid;
  for (int64_t dim : step.placement.grid)
    grid.push_back(dim);
  return llvm::json::Object{
      {"entry", step.entry},
      {"step", step.name},
      {"strategy", step.placement.strategy},
      {"grid", std::move(grid)},
      {"world_size", step.placement.worldSize()},
      {"memory",
       llvm::json::Object{{"peak", memory.peak()},
                          {"persistent", memory.persistent},
                          {"arena", memory.stepPeak},
                          {"live", memory.stepLive},
                          {"at_peak", std::move(atPeak)},
                          {"buffers_at_peak", std::move(buffersAtPeak)},
                          {"host_persistent", memory.hostPersistent},
                          {"host_arena", memory.hostArena},
                          {"host_peak", memory.hostPeak()},
                          {"nvme", memory.nvme}}},
      {"collectives", std::move(collectives)},
      {"collective_bytes", traffic.collectiveBytes()},
      {"transfers", std::move(transfers)},
      {"flops", static_cast<int64_t>(step.flops)}};
}

} // namespace

std::pair<llvm::json::Object, llvm::json::Object>
autoshard::peakJson(const cost::PeakBreakdown &peak) {
  llvm::json::Object categories, buffers;
  for (auto [name, bytes] : peak.categories())
    categories[name] = bytes;
  for (auto [name, bytes] : peak.bufferParts())
    buffers[name] = bytes;
  return {std::move(categories), std::move(buffers)};
}

FailureOr<std::string> autoshard::formatPlanReport(ModuleOp train,
                                                   ModuleOp eval, bool json,
                                                   StringRef memoryBudget) {
  SmallVector<StepReport, 2> steps;
  FailureOr<StepReport> trainReport = reportStep(train, "step");
  if (failed(trainReport))
    return failure();
  steps.push_back(std::move(*trainReport));
  // The device bytes per rank the driver allocates: one step's plan, or
  // both steps' as the driver shares them.
  int64_t devicePeak = steps.front().plan.memory.peak();
  if (eval) {
    FailureOr<StepReport> evalReport = reportStep(eval, "eval");
    if (failed(evalReport))
      return failure();
    steps.push_back(std::move(*evalReport));
    FailureOr<EvaluationBinaryMemory> binary = combineStepMemory(
        steps.front().plan.memory, eval, steps.back().plan.memory);
    if (failed(binary))
      return failure();
    devicePeak = binary->total();
  }
  std::optional<int64_t> budget;
  if (!memoryBudget.empty()) {
    FailureOr<int64_t> bytes = parseMemoryBudget(train, memoryBudget);
    if (failed(bytes))
      return failure();
    budget = *bytes;
  }

  std::string text;
  llvm::raw_string_ostream os(text);
  if (json) {
    llvm::json::Array stepArray;
    for (const StepReport &step : steps)
      stepArray.push_back(stepJson(step));
    llvm::json::Object report{{"schema", "autoshard-plan-report/1"},
                              {"steps", std::move(stepArray)},
                              {"device_peak", devicePeak}};
    if (budget)
      report["memory_budget"] = *budget;
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
    return text;
  }
  os << "plan report (per rank, from the compiled step; the binary's "
        "--stats-json measures the same)\n";
  for (const StepReport &step : steps)
    printStep(os, step);
  os << "the binary's device memory per rank: " << formatBytes(devicePeak);
  if (eval)
    os << " (the training step's state, the evaluation step's batch and "
          "loss, one arena for both)";
  if (budget)
    os << llvm::formatv(", {0:f1}% of the memory budget of {1}",
                        100.0 * double(devicePeak) / double(*budget),
                        formatBytes(*budget));
  os << "\n";
  return text;
}
