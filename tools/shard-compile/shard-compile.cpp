//===- shard-compile.cpp - training step IR to a training binary ----------===//

#include "RuntimeLink.h"

#include "../common/LongLineDiagnostics.h"
#include "../common/NestingDepth.h"
#include "../common/OutputFile.h"
#include "../common/StrategyFlags.h"
#include "autoshard/Pipelines/EvaluationStep.h"
#include "autoshard/Pipelines/PlanReport.h"
#include "autoshard/Support/InstallTree.h"
#include "autoshard/Target/ObjectFile.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;
namespace cl = llvm::cl;

/// shard-compile's own options; --help shows these and the strategy
/// options, not the LLVM code generator's hundreds that linking it
/// registers (--help-hidden lists everything).
static cl::OptionCategory compileCategory("shard-compile options");

static cl::opt<std::string> inputFilename(cl::Positional,
                                          cl::desc("<training step .mlir>"),
                                          cl::Required,
                                          cl::cat(compileCategory));
static cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                           cl::value_desc("file"), cl::Required,
                                           cl::cat(compileCategory));
static cl::opt<bool> withEval(
    "with-eval",
    cl::desc("Also link the model's evaluation step (the forward pass and "
             "the loss, as --forward-only compiles it) into the training "
             "binary, reading the training step's parameters: the binary's "
             "--eval-every N evaluates held-out batches every N steps"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<std::string> backend(
    "backend",
    cl::desc("Runtime backend the binary links: cpu (OpenBLAS), cuda "
             "(NVIDIA GPUs, one per rank) or cuda-emu (the CUDA backend on "
             "the CUDA emulator, on the host: slow, for testing the CUDA "
             "code without a GPU); the step's code is the same"),
    cl::init("cpu"), cl::cat(compileCategory));
static cl::opt<std::string> planReport(
    "plan-report",
    cl::desc("Print each rank's plan of the compiled step before launch: "
             "device memory at the peak by category, host memory and NVMe "
             "under offload, the bytes each collective kind sends per step, "
             "offload transfers and FLOPs (text, or json for tools); the "
             "binary's --stats-json measures the same"),
    cl::ValueOptional, cl::cat(compileCategory));
static cl::opt<std::string> planReportFile(
    "plan-report-file",
    cl::desc("Write the plan report here instead of stderr (with "
             "--plan-report; alone, implies the text form)"),
    cl::value_desc("file"), cl::cat(compileCategory));
enum class Emit { Exe, Obj, LLVMIR, MLIR };
static cl::opt<Emit> emit(
    "emit", cl::desc("What to write to -o (default exe)"),
    cl::values(clEnumValN(Emit::Exe, "exe", "a linked training binary"),
               clEnumValN(Emit::Obj, "obj",
                          "the step's object file, to link with the runtime "
                          "elsewhere"),
               clEnumValN(Emit::LLVMIR, "llvm", "LLVM IR text"),
               clEnumValN(Emit::MLIR, "mlir", "the lowered MLIR")),
    cl::init(Emit::Exe), cl::cat(compileCategory));

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "shard-compile") << message << "\n";
  return 1;
}

/// The runtime libraries of --backend, or an error saying why there are
/// none.
static std::optional<std::string> checkBackend() {
  if (backend == "cpu")
    return std::nullopt;
  if (backend == "cuda") {
    if (emit != Emit::Exe || AUTOSHARD_HAVE_CUDA_RUNTIME)
      return std::nullopt;
    return std::string(
        "--backend=cuda: this shard-compile was built without the CUDA "
        "runtime (no CUDA toolkit was found when it was configured); "
        "reconfigure with the toolkit installed, or use --emit=obj and link "
        "the object with a runtime built with AUTOSHARD_ENABLE_CUDA=ON");
  }
  if (backend == "cuda-emu") {
    if (emit != Emit::Exe || AUTOSHARD_HAVE_CUDA_EMU_RUNTIME)
      return std::nullopt;
    return std::string(
        "--backend=cuda-emu: this shard-compile was built without the CUDA "
        "emulator (it needs the CUDA toolkit's headers, Python 3 and "
        "AUTOSHARD_CUDA_EMU=ON when the runtime is configured)");
  }
  return "unknown backend '" + backend.getValue() +
         "'; valid backends: cpu, cuda, cuda-emu";
}

/// Why the files shard-compile writes would destroy one it reads or each
/// other, or nullopt. An output is written after the inputs are read, so
/// `-o step.mlir` used to replace the step with the binary and exit 0.
static std::optional<std::string> checkOutputsAreNotInputs() {
  using autoshard::tools::isSameFile;
  std::vector<std::pair<std::string, std::string>> inputs = {
      {"the input", inputFilename}};
  // --device names a file of its own when lookupDevice reads it as a path.
  llvm::StringRef device = autoshard::tools::deviceFlag;
  if (autoshard::tools::strategyFlag == "auto" &&
      (device.ends_with(".json") ||
       device.contains(llvm::sys::path::get_separator())))
    inputs.push_back({"--device", device.str()});
  std::vector<std::pair<std::string, std::string>> outputs = {
      {"-o", outputFilename},
      {"--plan-report-file", planReportFile},
      {"--cost-report-file", autoshard::tools::costReportFileFlag}};
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[flag, path] = outputs[i];
    for (const auto &[what, input] : inputs)
      if (isSameFile(path, input))
        return flag + " '" + path + "' and " + what + " '" + input +
               "' are the same file: writing " + flag + " would destroy " +
               what + "; give " + flag + " another path";
    for (size_t j = 0; j < i; ++j)
      if (isSameFile(path, outputs[j].second))
        return outputs[j].first + " '" + outputs[j].second + "' and " + flag +
               " '" + path +
               "' are the same file: the second write would "
               "replace the first; give each its own path";
  }
  return std::nullopt;
}

/// Where an installed tree keeps the runtime's libraries, relative to its
/// prefix (runtime/CMakeLists.txt installs them there).
static constexpr const char *kInstalledRuntimeDir = "lib/autoshard";

/// Links `object` with --backend's runtime into the executable `output`.
static int link(llvm::StringRef object, llvm::StringRef output) {
  if (!AUTOSHARD_HAVE_RUNTIME)
    return fail("this shard-compile was built without the runtime, so it "
                "cannot link a binary; use --emit=obj and link the object "
                "with the runtime's libraries");
  std::vector<std::string> command = {kLinkerDriver, "-fuse-ld=lld",
                                      "-o", output.str(), object.str(),
                                      "-Wl,--start-group"};
  // An installed tree (cmake --install) links the runtime libraries it
  // holds in lib/autoshard beside its bin/, wherever it was moved; a build
  // tree links its own.
  std::optional<std::string> installed =
      autoshard::pathInInstallTree(kInstalledRuntimeDir);
  if (installed && !llvm::sys::fs::is_directory(*installed))
    installed.reset();
  const char *const *items =
      installed ? (backend == "cuda"       ? kCudaInstallItems
                   : backend == "cuda-emu" ? kCudaEmuInstallItems
                                           : kCpuInstallItems)
                : (backend == "cuda"       ? kCudaLinkItems
                   : backend == "cuda-emu" ? kCudaEmuLinkItems
                                           : kCpuLinkItems);
  for (const char *const *item = items; *item; ++item) {
    llvm::StringRef text(*item);
    if (installed && text.consume_front("@lib@/"))
      command.push_back(*installed + "/" + text.str());
    else
      command.push_back(text.str());
  }
  // libstdc++: the CUDA libraries' nvcc-built code needs it whole.
  command.insert(command.end(),
                 {"-Wl,--end-group", "-lstdc++", "-lpthread", "-lm"});
  std::vector<llvm::StringRef> args(command.begin(), command.end());
  std::string error;
  int status = llvm::sys::ExecuteAndWait(kLinkerDriver, args, std::nullopt,
                                         {}, 0, 0, &error);
  if (status != 0) {
    std::string line;
    for (const std::string &word : command)
      line += word + " ";
    return fail("linking the training binary failed" +
                (error.empty() ? "" : ": " + error) + "\n  command: " + line);
  }
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerAsmPrinterCLOptions();
  cl::HideUnrelatedOptions(
      {&compileCategory, &autoshard::tools::strategyCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "shard-compile: compile a training step into a distributed training "
      "binary\n\n  shard-compile --strategy=ddp --world-size=2 model.mlir "
      "-o train\n  mpirun -np 2 ./train --steps 100\n\n  --help-hidden "
      "also lists MLIR's debugging options (--mlir-print-ir-after-all, "
      "--mlir-timing, ...)\n");
  // The linker would write an empty -o to ./a.out.
  if (outputFilename.empty())
    return fail("-o needs a file name");

  using namespace autoshard::tools;
  if (std::optional<std::string> error = validateStrategyFlags())
    return fail(*error);
  if (exposeGradientsFlag && forwardOnlyFlag)
    return fail("--expose-gradients returns the step's gradients; a "
                "--forward-only step computes none");
  if (withEval && forwardOnlyFlag)
    return fail("--with-eval adds an evaluation step to a training binary; "
                "--forward-only compiles an evaluation binary already");
  if (std::optional<std::string> error = checkBackend())
    return fail(*error);
  const bool wantPlanReport =
      planReport.getNumOccurrences() || planReportFile.getNumOccurrences();
  if (planReport.getNumOccurrences() && !planReport.empty() &&
      planReport != "text" && planReport != "json")
    return fail("unknown plan report '" + planReport.getValue() +
                "'; valid: text, json");
  if (planReportFile.getNumOccurrences() && planReportFile.empty())
    return fail("--plan-report-file needs a file name");
  if (std::optional<std::string> error = checkOutputsAreNotInputs())
    return fail(*error);

  DialectRegistry registry;
  autoshard::registerAutoshardDialects(registry);
  autoshard::registerObjectFileTranslations(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Diagnostics name a location and a cause; printing the whole step (tens
  // of thousands of lines for a real model) needs the explicit flag.
  if (llvm::none_of(llvm::ArrayRef(argv, argc), [](llvm::StringRef arg) {
        return arg.ltrim('-').starts_with("mlir-print-op-on-diagnostic");
      }))
    context.printOpOnDiagnostic(false);

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &error);
  if (!input)
    return fail(error);
  // Before the parser recurses into it.
  if (std::optional<std::string> tooDeep =
          autoshard::tools::describeTooDeepNesting(*input)) {
    llvm::errs() << *tooDeep;
    return 1;
  }
  const llvm::MemoryBuffer *source = input.get();
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  autoshard::tools::registerLongLineDiagnostics(
      &context, source->getBufferIdentifier(), source->getBuffer());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  autoshard::StrategyOptions options =
      strategyOptionsFromFlags();
  // What the training step is built with: for --strategy=auto, the plan it
  // chose, which the evaluation step follows.
  autoshard::StrategyOptions built = options;
  // --with-eval: the evaluation step starts from the same IR and is
  // partitioned apart, then checked to hold the parameters as training does.
  OwningOpRef<ModuleOp> evalModule;
  auto runPipeline = [&](ModuleOp target,
                         llvm::function_ref<void(PassManager &)> build) {
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return failure();
    build(pm);
    return pm.run(target);
  };
  // Builds both steps from `source` (consumed) under `opts`, each cleaned
  // up for the lowering already: the memory checks and the plan report read
  // the buffer assignment of the step as it is lowered.
  auto buildSteps = [&](OwningOpRef<ModuleOp> source,
                        const autoshard::StrategyOptions &opts) {
    module = std::move(source);
    built = opts;
    if (withEval)
      evalModule = module->clone();
    if (failed(runPipeline(*module, [&](PassManager &pm) {
          autoshard::buildStrategyPipeline(pm, opts, &built);
          autoshard::addLoweringCleanupPasses(pm);
        })))
      return failure();
    if (!evalModule)
      return success();
    if (failed(runPipeline(*evalModule, [&](PassManager &pm) {
          autoshard::buildStrategyPipeline(
              pm, autoshard::evaluationStepOptions(built));
          autoshard::addLoweringCleanupPasses(pm);
        })))
      return failure();
    return autoshard::checkEvaluationStepShares(*module, *evalModule);
  };
  // Under --strategy=auto the choice has to leave room for the evaluation
  // step: one that does not is made again with that room taken off the
  // memory it fits.
  OwningOpRef<ModuleOp> pristine;
  if (withEval && options.strategy == autoshard::strategy::kAutoStrategy)
    pristine = module->clone();
  if (failed(buildSteps(std::move(module), options)))
    return 1;
  // The budget, or under --strategy=auto the memory the choice was made to
  // fit.
  const std::string budget = built.memoryBudget;
  // Set when the choice was made again and nothing left the room.
  int64_t roomNotFound = 0;
  if (pristine && !budget.empty()) {
    FailureOr<int64_t> capacity = autoshard::parseByteSize(budget);
    FailureOr<autoshard::EvaluationBinaryMemory> binary =
        autoshard::planEvaluationBinary(*module, *evalModule);
    if (failed(capacity) || failed(binary))
      return 1;
    int64_t room = binary->total() - binary->trainingAlone();
    if (binary->total() > *capacity && room < *capacity) {
      OwningOpRef<ModuleOp> firstModule = std::move(module);
      OwningOpRef<ModuleOp> firstEval = std::move(evalModule);
      autoshard::StrategyOptions retry = options;
      retry.memoryBudget = std::to_string(*capacity - room);
      // A retry that fits nothing leaves the first choice's error, which
      // names the memory as the user knows it.
      LogicalResult retried = failure();
      {
        ScopedDiagnosticHandler quiet(&context,
                                      [](Diagnostic &) { return success(); });
        retried = buildSteps(std::move(pristine), retry);
      }
      if (succeeded(retried)) {
        built.memoryBudget = budget;
      } else {
        module = std::move(firstModule);
        evalModule = std::move(firstEval);
        roomNotFound = room;
      }
    }
  }
  if (evalModule && !budget.empty() &&
      failed(autoshard::checkEvaluationMemoryBudget(
          *module, *evalModule, budget,
          options.memoryBudget.empty() ? "the memory per rank of --device"
                                       : ""))) {
    if (roomNotFound)
      llvm::WithColor::note(llvm::errs(), "shard-compile")
          << "--strategy=auto chose again, leaving "
          << autoshard::formatBytes(roomNotFound)
          << " for the evaluation step, and no plan fits that\n";
    return 1;
  }
  if (wantPlanReport) {
    // From the partitioned steps, before lowering consumes them.
    FailureOr<std::string> report = autoshard::formatPlanReport(
        *module, evalModule ? *evalModule : ModuleOp(), planReport == "json",
        built.memoryBudget);
    if (failed(report))
      return 1;
    if (planReportFile.empty()) {
      llvm::errs() << *report;
    } else {
      std::string error;
      std::unique_ptr<llvm::ToolOutputFile> out =
          autoshard::tools::openOutput(planReportFile, error);
      if (out) {
        out->os() << *report;
        if (std::optional<std::string> kept =
                autoshard::tools::keepOutput(*out, planReportFile))
          error = *kept;
      }
      if (!error.empty())
        return fail("--plan-report-file: " + error);
    }
  }
  if (evalModule && failed(runPipeline(*evalModule, [&](PassManager &pm) {
        autoshard::buildLowerToLLVMPipeline(pm, /*evaluationEntry=*/true,
                                            /*cleanedUp=*/true);
      })))
    return 1;
  if (failed(runPipeline(*module, [&](PassManager &pm) {
        autoshard::buildLowerToLLVMPipeline(pm, /*evaluationEntry=*/false,
                                            /*cleanedUp=*/true);
      })))
    return 1;
  SmallVector<ModuleOp, 2> lowered = {*module};
  if (evalModule)
    lowered.push_back(*evalModule);

  if (emit == Emit::MLIR || emit == Emit::LLVMIR) {
    std::unique_ptr<llvm::ToolOutputFile> output =
        autoshard::tools::openOutput(outputFilename, error);
    if (!output)
      return fail(error);
    if (emit == Emit::MLIR) {
      // Two modules, in mlir-opt --split-input-file's form.
      for (ModuleOp step : lowered) {
        if (step != lowered.front())
          output->os() << "\n// -----\n\n";
        step.print(output->os());
      }
    } else if (failed(autoshard::emitLLVMIR(lowered, output->os()))) {
      return 1;
    }
    if (std::optional<std::string> writeError =
            autoshard::tools::keepOutput(*output, outputFilename))
      return fail(*writeError);
    return 0;
  }

  // The object goes to -o itself, or to a temporary next to it for linking.
  std::string objectPath = outputFilename;
  if (emit == Emit::Exe) {
    llvm::SmallString<128> temp;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
            llvm::sys::path::filename(outputFilename), "o", temp))
      return fail("cannot create a temporary object file: " + ec.message());
    objectPath = temp.str().str();
  }
  {
    std::unique_ptr<llvm::ToolOutputFile> object =
        autoshard::tools::openOutput(objectPath, error);
    if (!object)
      return fail(error);
    if (failed(autoshard::emitObjectFile(lowered, object->os())))
      return 1;
    if (std::optional<std::string> writeError =
            autoshard::tools::keepOutput(*object, objectPath))
      return fail(*writeError);
  }
  if (emit == Emit::Obj)
    return 0;
  int status = link(objectPath, outputFilename);
  llvm::sys::fs::remove(objectPath);
  return status;
}
