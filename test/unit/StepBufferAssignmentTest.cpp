// The buffer assignment that the plan report, the memory checks and
// --strategy=auto read is the placement the lowering emits: the same arena
// offsets in the same order, the same arena sizes in the manifest; and
// assigning reads the step without changing it. The lowering takes the
// assignment from its analysis and places nothing itself: an assignment
// edited in the analysis manager is what it emits, or it refuses one that
// does not fit the step.
#include "autoshard/Conversion/StepBufferAssignment.h"

#include "autoshard/Conversion/Passes.h"
#include "autoshard/Conversion/RuntimeABI.h"
#include "autoshard/Models/ModelConfig.h"
#include "autoshard/Pipelines/Pipelines.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include "ModelShapes.h"

#include <gtest/gtest.h>

#include <functional>

using namespace mlir;
using namespace autoshard;

namespace {

std::string print(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

/// The arena offsets of the lowered entry point, in program order, with
/// whether each is in the host arena.
std::vector<std::pair<bool, int64_t>> emittedOffsets(ModuleOp module) {
  std::vector<std::pair<bool, int64_t>> offsets;
  auto entry = module.lookupSymbol<func::FuncOp>("autoshard_step");
  if (!entry)
    return offsets;
  entry.walk([&](LLVM::GEPOp gep) {
    auto base = gep.getBase().getDefiningOp<func::CallOp>();
    if (!base || (base.getCallee() != ABI_NAME(asrt_arena) &&
                  base.getCallee() != ABI_NAME(asrt_host_arena)))
      return;
    auto indices = gep.getDynamicIndices();
    ASSERT_EQ(indices.size(), 1u);
    auto offset = indices[0].getDefiningOp<arith::ConstantOp>();
    ASSERT_TRUE(offset);
    offsets.push_back({base.getCallee() == ABI_NAME(asrt_host_arena),
                       cast<IntegerAttr>(offset.getValue()).getInt()});
  });
  return offsets;
}

std::string manifestText(ModuleOp module) {
  auto manifest = module.lookupSymbol<LLVM::GlobalOp>("autoshard_manifest");
  if (!manifest || !manifest.getValue())
    return "";
  return cast<StringAttr>(*manifest.getValue()).getValue().str();
}

/// gpt2-tiny's step (bf16) under `options`, in the form the lowering
/// takes.
OwningOpRef<ModuleOp> buildStep(MLIRContext &context,
                                const StrategyOptions &options) {
  models::ModelConfig config = autoshard::testing::named("gpt2-tiny");
  config.precision = models::Precision::BF16;
  config.microBatch = 4;
  auto built = models::buildTrainingStep(&context, config);
  if (failed(built))
    return nullptr;
  OwningOpRef<ModuleOp> module = std::move(*built);
  PassManager strategy(&context);
  buildStrategyPipeline(strategy, options);
  addLoweringCleanupPasses(strategy);
  if (failed(strategy.run(*module)))
    return nullptr;
  return module;
}

std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registerAutoshardDialects(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  return context;
}

void checkAgreement(const StrategyOptions &options, bool expectHost) {
  std::unique_ptr<MLIRContext> owned = makeContext();
  MLIRContext &context = *owned;
  OwningOpRef<ModuleOp> module = buildStep(context, options);
  ASSERT_TRUE(module);

  std::string before = print(*module);
  FailureOr<StepBufferAssignment> assigned = assignStepBuffers(*module);
  ASSERT_TRUE(succeeded(assigned));
  EXPECT_EQ(print(*module), before) << "assigning the buffers changed the step";
  ASSERT_FALSE(assigned->buffers.empty());
  EXPECT_FALSE(assigned->inPlaceResults.empty());
  bool host = llvm::any_of(assigned->buffers,
                           [](const StepArenaBuffer &b) { return b.host; });
  EXPECT_EQ(host, expectHost);

  PassManager lower(&context);
  lower.addPass(createLowerToRuntimePass());
  ASSERT_TRUE(succeeded(lower.run(*module)));

  std::vector<std::pair<bool, int64_t>> planned;
  for (const StepArenaBuffer &buffer : assigned->buffers)
    planned.push_back({buffer.host, buffer.offset});
  EXPECT_EQ(emittedOffsets(*module), planned);
  std::string manifest = manifestText(*module);
  EXPECT_NE(manifest.find("memory peak=" +
                          std::to_string(assigned->memory.peak()) +
                          " persistent=" +
                          std::to_string(assigned->memory.persistent) +
                          " arena=" + std::to_string(assigned->arenaBytes) +
                          " live=" +
                          std::to_string(assigned->memory.stepLive) + " "),
            std::string::npos)
      << manifest;
  EXPECT_EQ(assigned->memory.stepPeak, assigned->arenaBytes);
  EXPECT_EQ(assigned->memory.hostArena, assigned->hostArenaBytes);
}

TEST(StepBufferAssignment, IsWhatTheLoweringEmits) {
  StrategyOptions ddp;
  ddp.strategy = "ddp";
  ddp.worldSize = 2;
  checkAgreement(ddp, /*expectHost=*/false);

  StrategyOptions zero3;
  zero3.strategy = "zero3";
  zero3.worldSize = 4;
  zero3.activationCheckpointing = strategy::ActivationCheckpointing::Blocks;
  checkAgreement(zero3, /*expectHost=*/false);

  StrategyOptions offload;
  offload.strategy = "fsdp";
  offload.worldSize = 2;
  offload.offload = strategy::Offload::Cpu;
  offload.offloadParams = strategy::Offload::Cpu;
  checkAgreement(offload, /*expectHost=*/true);
}

} // namespace

namespace {

/// Edits the buffer assignment cached in the analysis manager and keeps it
/// cached, as the lowering after it then finds it.
struct EditAssignmentPass
    : PassWrapper<EditAssignmentPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(EditAssignmentPass)
  explicit EditAssignmentPass(std::function<void(StepBufferAssignment &)> edit)
      : edit(std::move(edit)) {}
  void runOnOperation() override {
    auto &analysis = getAnalysis<StepBufferAssignmentAnalysis>();
    if (!analysis.assignment)
      return signalPassFailure();
    edit(*analysis.assignment);
    markAllAnalysesPreserved();
  }
  std::function<void(StepBufferAssignment &)> edit;
};

StrategyOptions zero2() {
  StrategyOptions options;
  options.strategy = "zero2";
  options.worldSize = 2;
  return options;
}

TEST(StepBufferAssignment, TheLoweringEmitsTheAnalysisPlacement) {
  std::unique_ptr<MLIRContext> context = makeContext();
  OwningOpRef<ModuleOp> module = buildStep(*context, zero2());
  ASSERT_TRUE(module);
  // Every device buffer a kilobyte above where placing put it: only a
  // lowering that reads the assignment, and places nothing itself, emits
  // these offsets.
  std::vector<std::pair<bool, int64_t>> edited;
  auto moveUp = [&](StepBufferAssignment &assigned) {
    for (StepArenaBuffer &buffer : assigned.buffers) {
      if (!buffer.host)
        buffer.offset += 1024;
      edited.push_back({buffer.host, buffer.offset});
    }
  };
  PassManager lower(context.get());
  lower.addPass(std::make_unique<EditAssignmentPass>(moveUp));
  lower.addPass(createLowerToRuntimePass());
  ASSERT_TRUE(succeeded(lower.run(*module)));
  ASSERT_FALSE(edited.empty());
  EXPECT_EQ(emittedOffsets(*module), edited);
}

TEST(StepBufferAssignment, TheLoweringRefusesAnotherStepsAssignment) {
  std::unique_ptr<MLIRContext> context = makeContext();
  OwningOpRef<ModuleOp> module = buildStep(*context, zero2());
  ASSERT_TRUE(module);
  std::string diagnostics;
  ScopedDiagnosticHandler capture(context.get(), [&](Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return success();
  });
  // One buffer fewer, and one of a size the step never asks for.
  for (auto edit : std::initializer_list<void (*)(StepBufferAssignment &)>{
           [](StepBufferAssignment &a) { a.buffers.pop_back(); },
           [](StepBufferAssignment &a) { a.buffers.front().bytes += 1; }}) {
    OwningOpRef<ModuleOp> copy(module->clone());
    diagnostics.clear();
    PassManager lower(context.get());
    lower.addPass(std::make_unique<EditAssignmentPass>(edit));
    lower.addPass(createLowerToRuntimePass());
    EXPECT_TRUE(failed(lower.run(*copy)));
    EXPECT_NE(diagnostics.find("asks the lowering for other buffers than its "
                               "buffer assignment placed"),
              std::string::npos)
        << diagnostics;
  }
}

} // namespace
