//===- shard-opt.cpp - mlir-opt with autoshard's dialects and strategies --===//

#include "../common/StrategyFlags.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "shard-opt") << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  autoshard::registerAutoshardDialects(registry);
  autoshard::registerAutoshardPasses();

  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "autoshard optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  using namespace autoshard::tools;
  bool strategyGiven = strategyFlag.getNumOccurrences() > 0;
  if (!strategyGiven &&
      (worldSizeFlag.getNumOccurrences() || shardGroupSizeFlag.getNumOccurrences() ||
       reshardAfterForwardFlag.getNumOccurrences() ||
       bucketCapMbFlag.getNumOccurrences()))
    return fail("--world-size, --shard-group-size, --reshard-after-forward "
                "and --bucket-cap-mb need --strategy");
  if (strategyGiven) {
    if (std::optional<std::string> error = validateStrategyFlags())
      return fail(*error);
    // The strategy runs first; passes named on the command line follow. A
    // textual --pass-pipeline replaces the whole pass manager, so the two
    // are joined as one textual pipeline.
    std::string strategyPipeline =
        strategyPipelineText(strategyOptionsFromFlags(false));
    MlirOptMainConfig cliConfig = config;
    config.setPassPipelineSetupFn([cliConfig, strategyPipeline](
                                      PassManager &pm) -> LogicalResult {
      if (failed(cliConfig.setupPassPipeline(pm)))
        return failure();
      std::string cli;
      llvm::raw_string_ostream os(cli);
      pm.printAsTextualPipeline(os);
      llvm::StringRef inner(cli);
      if (!inner.consume_front("builtin.module(") || !inner.consume_back(")"))
        return emitError(UnknownLoc::get(pm.getContext()))
               << "--strategy needs a pipeline on builtin.module, got " << cli;
      std::string joined = "builtin.module(" + strategyPipeline +
                           (inner.empty() ? "" : "," + inner.str()) + ")";
      FailureOr<OpPassManager> parsed = parsePassPipeline(joined);
      if (failed(parsed))
        return failure();
      static_cast<OpPassManager &>(pm) = *parsed;
      return success();
    });
  }

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &error);
  if (!input)
    return fail(error);
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &error);
  if (!output)
    return fail(error);
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
