//===- shard-opt.cpp - mlir-opt with autoshard's dialects and strategies --===//

#include "../common/LongLineDiagnostics.h"
#include "../common/NestingDepth.h"
#include "../common/OutputFile.h"
#include "../common/StrategyFlags.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <vector>

using namespace mlir;

/// The input whose long lines diagnostics excerpt (a dialect extension,
/// which registers the handler, cannot capture it).
static struct { llvm::StringRef name, text; } longLines;

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "shard-opt") << message << "\n";
  return 1;
}

/// Hides, from --help (not --help-hidden), the options that LLVM's
/// libraries register as they load: the code generators' (AMDGPU's, the
/// register allocators', ...), hundreds of lines that shard-opt never
/// reads, as mlir-opt, which does not link them, never shows. Called before
/// MLIR registers its own options, so everything registered by then is
/// LLVM's, except the strategy flags and the generic --help family.
static void hideLinkedLibraryOptions() {
  // HideUnrelatedOptions alone knows the generic category, but makes the
  // rest ReallyHidden; they stay listed under --help-hidden instead.
  auto &options = llvm::cl::getRegisteredOptions();
  llvm::DenseMap<llvm::cl::Option *, llvm::cl::OptionHidden> before;
  for (auto &entry : options)
    before[entry.second] = entry.second->getOptionHiddenFlag();
  llvm::cl::HideUnrelatedOptions(autoshard::tools::strategyCategory());
  for (auto &entry : options)
    if (entry.second->getOptionHiddenFlag() == llvm::cl::ReallyHidden &&
        before[entry.second] == llvm::cl::NotHidden)
      entry.second->setHiddenFlag(llvm::cl::Hidden);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  hideLinkedLibraryOptions();
  DialectRegistry registry;
  autoshard::registerAutoshardDialects(registry);
  autoshard::registerAutoshardPasses();

  // A training step of a real model is tens of thousands of lines; a
  // diagnostic prints its location and message, not the whole step, unless
  // asked with --mlir-print-op-on-diagnostic.
  std::vector<char *> args(argv, argv + argc);
  bool printOpGiven = llvm::any_of(args, [](llvm::StringRef arg) {
    return arg.ltrim('-').starts_with("mlir-print-op-on-diagnostic");
  });
  static char quietDiagnostics[] = "--mlir-print-op-on-diagnostic=false";
  if (!printOpGiven)
    args.insert(args.begin() + 1, quietDiagnostics);
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      static_cast<int>(args.size()), args.data(),
      "autoshard optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  using namespace autoshard::tools;
  bool strategyGiven = strategyFlag.getNumOccurrences() > 0;
  if (std::vector<std::string> given = givenStrategyFlags({"--strategy"});
      !strategyGiven && !given.empty())
    return fail(joinFlags(given) + (given.size() == 1 ? " needs" : " need") +
                " --strategy");
  if (strategyGiven) {
    if (std::optional<std::string> error = validateStrategyFlags())
      return fail(*error);
    // The strategy runs first; passes named on the command line follow. A
    // textual --pass-pipeline replaces the whole pass manager, so the two
    // are joined as one textual pipeline.
    std::string strategyPipeline =
        autoshard::strategyPipelineText(strategyOptionsFromFlags());
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

  // -o is opened (truncated) before the input is parsed, which may still
  // be mapped from the file (SIGBUS), and a failing pass removes -o: in
  // place, the input was lost either way.
  if (autoshard::tools::isSameFile(outputFilename, inputFilename))
    return fail("-o '" + outputFilename + "' and the input '" +
                inputFilename +
                "' are the same file: writing -o would destroy the input "
                "(a failing pass removes -o); give -o another path");
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &error);
  if (!input)
    return fail(error);
  // Before MlirOptMain's parser recurses into it.
  if (std::optional<std::string> tooDeep =
          autoshard::tools::describeTooDeepNesting(*input)) {
    llvm::errs() << *tooDeep;
    return 1;
  }
  // Diagnostics on a long line show an excerpt. MlirOptMain makes the
  // context and its SourceMgr handler; the excerpts' handler follows it
  // when the parser loads the func dialect (parse errors), and again when
  // the pipeline is set up (the passes' diagnostics), in case the dialect
  // was loaded before. The input stays here; MlirOptMain reads a view of
  // it.
  if (!config.shouldVerifyDiagnostics() && config.inputSplitMarker().empty()) {
    longLines = {input->getBufferIdentifier(), input->getBuffer()};
    registry.addExtension(+[](MLIRContext *context, func::FuncDialect *) {
      autoshard::tools::registerLongLineDiagnostics(context, longLines.name,
                                                    longLines.text);
    });
    MlirOptMainConfig inner = config;
    config.setPassPipelineSetupFn([inner](PassManager &pm) -> LogicalResult {
      autoshard::tools::registerLongLineDiagnostics(
          pm.getContext(), longLines.name, longLines.text);
      return inner.setupPassPipeline(pm);
    });
  }
  std::unique_ptr<llvm::MemoryBuffer> view =
      llvm::MemoryBuffer::getMemBuffer(input->getMemBufferRef());
  std::unique_ptr<llvm::ToolOutputFile> output =
      autoshard::tools::openOutput(outputFilename, error);
  if (!output)
    return fail(error);
  if (failed(MlirOptMain(output->os(), std::move(view), registry, config)))
    return 1;
  if (std::optional<std::string> writeError =
          autoshard::tools::keepOutput(*output, outputFilename))
    return fail(*writeError);
  return 0;
}
