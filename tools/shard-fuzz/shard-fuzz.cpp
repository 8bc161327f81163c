//===- shard-fuzz.cpp - libFuzzer target: parse, verify, plan, lower ------===//
//
// Each input is an MLIR file as shard-opt would read it. It is parsed with
// the tools' dialects and verified; a valid module is then compiled as
// shard-compile would compile it, under a few fixed plans (the strategy
// pipeline, the memory plan, the lowering to the LLVM dialect), and each of
// the project's passes also runs alone on it, as `shard-opt --PASS` would
// (the tests' inputs are planned, partitioned or grouped steps, so their
// mutants reach each pass directly). The verifier runs after every pass.
// Diagnostics are the expected outcome of bad input and are dropped; only
// a crash, a hang or a sanitizer report is a finding. SHARD_FUZZ_VERBOSE=1
// prints them and each pipeline's outcome, to see how far an input gets.
//
//===----------------------------------------------------------------------===//

#include "../common/NestingDepth.h"

#include "autoshard/Conversion/Passes.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"
#include "autoshard/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mlir;
namespace strategy = autoshard::strategy;

namespace {

/// The plans every valid input is compiled for: replicated state with
/// blocking collectives; fully sharded state with prefetched gathers,
/// selective recomputation, offload and a memory plan; a 2x2 hybrid grid
/// with a parameter group and recomputed blocks; and a ZeRO-2 evaluation
/// step with offloaded masters (shard-compile --with-eval's second step,
/// lowered as autoshard_eval_step).
std::vector<autoshard::StrategyOptions> fuzzedPlans() {
  autoshard::StrategyOptions ddp;
  ddp.strategy = "ddp";
  ddp.worldSize = 2;
  ddp.overlap = false;

  autoshard::StrategyOptions zero3;
  zero3.strategy = "zero3";
  zero3.worldSize = 2;
  // A budget no step reaches: the memory plan runs and must not fail.
  zero3.memoryBudget = "1000T";
  zero3.activationCheckpointing = strategy::ActivationCheckpointing::Selective;
  zero3.offload = strategy::Offload::Nvme;
  zero3.offloadParams = strategy::Offload::Cpu;

  autoshard::StrategyOptions hybrid;
  hybrid.strategy = "hybrid";
  hybrid.worldSize = 4;
  hybrid.shardGroupSize = 2;
  hybrid.reshardAfterForward = false;
  hybrid.paramGroups = {"ddp=.*bias"};
  hybrid.prefetchDepth = 2;
  hybrid.activationCheckpointing = strategy::ActivationCheckpointing::Blocks;

  autoshard::StrategyOptions evaluation;
  evaluation.strategy = "zero2";
  evaluation.worldSize = 2;
  evaluation.forwardOnly = true;
  evaluation.offload = strategy::Offload::Cpu;
  return {ddp, zero3, hybrid, evaluation};
}

bool verbose() {
  static const bool verbose = [] {
    const char *value = std::getenv("SHARD_FUZZ_VERBOSE");
    return value && *value && llvm::StringRef(value) != "0";
  }();
  return verbose;
}

const DialectRegistry &registry() {
  static DialectRegistry *registry = [] {
    auto *r = new DialectRegistry();
    autoshard::registerAutoshardDialects(*r);
    return r;
  }();
  return *registry;
}

/// Runs the passes `build` adds on a copy of `module`.
void runOnCopy(ModuleOp module, const char *what,
               llvm::function_ref<void(OpPassManager &)> build) {
  OwningOpRef<ModuleOp> copy = module.clone();
  PassManager pm(module.getContext());
  build(pm);
  LogicalResult result = pm.run(*copy);
  if (verbose())
    llvm::errs() << "shard-fuzz: " << what << ": "
                 << (succeeded(result) ? "succeeded" : "failed") << "\n";
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A context per input: nothing an earlier input uniqued or loaded can
  // change how this one behaves, so every finding replays from its file.
  MLIRContext context(registry(), MLIRContext::Threading::DISABLED);
  // As shard-opt -allow-unregistered-dialect, which the pass tests use.
  context.allowUnregisteredDialects(true);
  ScopedDiagnosticHandler dropDiagnostics(&context, [](Diagnostic &diag) {
    if (verbose())
      llvm::errs() << diag.getLocation() << ": " << diag << "\n";
    return success();
  });

  // The lexer reads the terminating NUL that a MemoryBuffer guarantees and
  // the fuzzer's bytes lack: parse a copy.
  std::unique_ptr<llvm::MemoryBuffer> input =
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz-input.mlir");
  // Refused by the tools before they parse (NestingDepth.h): the parser
  // would overflow its stack.
  if (std::optional<std::string> tooDeep =
          autoshard::tools::describeTooDeepNesting(*input)) {
    if (verbose())
      llvm::errs() << *tooDeep;
    return 0;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  // Parsing verifies the module.
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module) {
    if (verbose())
      llvm::errs() << "shard-fuzz: not a valid module\n";
    return 0;
  }

  for (const autoshard::StrategyOptions &options : fuzzedPlans())
    runOnCopy(*module,
              (options.strategy + " on " + std::to_string(options.worldSize) +
               " ranks, lowered")
                  .c_str(),
              [&](OpPassManager &pm) {
                autoshard::buildStrategyPipeline(pm, options);
                autoshard::buildLowerToLLVMPipeline(pm, options.forwardOnly);
              });

  // Each pass alone, on the input as it is.
  namespace train = autoshard::train;
  runOnCopy(*module, "raise", [](OpPassManager &pm) {
    pm.addPass(train::createRaisePass());
  });
  runOnCopy(*module, "autodiff", [](OpPassManager &pm) {
    pm.addPass(train::createAutodiffPass());
  });
  runOnCopy(*module, "partition", [](OpPassManager &pm) {
    pm.addPass(train::createPartitionPass());
  });
  runOnCopy(*module, "checkpoint-activations", [](OpPassManager &pm) {
    pm.addPass(train::createCheckpointActivationsPass());
  });
  runOnCopy(*module, "offload", [](OpPassManager &pm) {
    train::OffloadPassOptions offload;
    offload.optimizer = strategy::Offload::Cpu;
    pm.addPass(train::createOffloadPass(offload));
  });
  runOnCopy(*module, "group-collectives", [](OpPassManager &pm) {
    pm.addPass(train::createGroupCollectivesPass());
  });
  runOnCopy(*module, "schedule-collectives", [](OpPassManager &pm) {
    train::ScheduleCollectivesPassOptions schedule;
    schedule.prefetchDepth = 2;
    pm.addPass(train::createScheduleCollectivesPass(schedule));
  });
  runOnCopy(*module, "plan-memory", [](OpPassManager &pm) {
    pm.addPass(autoshard::createPlanMemoryPass());
  });
  runOnCopy(*module, "lower-to-runtime", [](OpPassManager &pm) {
    pm.addPass(autoshard::createLowerToRuntimePass());
  });
  return 0;
}
