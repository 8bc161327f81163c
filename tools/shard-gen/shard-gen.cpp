//===- shard-gen.cpp - training-step IR of GPT-2 and Llama configurations -===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "autoshard/Models/ModelConfig.h"

#include "../common/OutputFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;
using namespace autoshard::models;
namespace cl = llvm::cl;

static cl::OptionCategory genCategory("shard-gen options");

static cl::opt<std::string>
    modelName(cl::Positional,
              cl::desc("<model> (omit it and give --family and every size "
                       "for a custom config)"),
              cl::init(""), cl::cat(genCategory));
static cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                           cl::value_desc("file"),
                                           cl::init("-"), cl::cat(genCategory));
static cl::opt<bool> listFlag("list",
                              cl::desc("List the named configs and their "
                                       "parameter counts"),
                              cl::cat(genCategory));
static cl::opt<bool> countFlag("count",
                               cl::desc("Print the parameter count instead of "
                                        "the IR"),
                               cl::cat(genCategory));

static cl::OptionCategory
    configCategory("config overrides (they replace the named config's fields)");

static cl::opt<std::string> familyFlag("family",
                                       cl::desc("Model family of a custom "
                                                "config (gpt2, llama)"),
                                       cl::cat(configCategory));

// Integer sizes. For gpt2, ffn and kv-heads follow hidden and heads
// (4 * hidden, heads) unless given.
static cl::opt<int64_t> layersFlag("layers", cl::desc("Transformer blocks"),
                                   cl::cat(configCategory));
static cl::opt<int64_t> hiddenFlag("hidden", cl::desc("Model width"),
                                   cl::cat(configCategory));
static cl::opt<int64_t> headsFlag("heads", cl::desc("Query heads"),
                                  cl::cat(configCategory));
static cl::opt<int64_t>
    kvHeadsFlag("kv-heads",
                cl::desc("Key/value heads (grouped-query attention; "
                         "gpt2: equal to --heads)"),
                cl::cat(configCategory));
static cl::opt<int64_t>
    ffnFlag("ffn", cl::desc("Feed-forward inner size (gpt2: 4 * hidden)"),
            cl::cat(configCategory));
static cl::opt<int64_t> vocabFlag("vocab", cl::desc("Vocabulary size"),
                                  cl::cat(configCategory));
static cl::opt<int64_t>
    maxPositionsFlag("max-positions",
                     cl::desc("Rows of the learned position table (gpt2)"),
                     cl::cat(configCategory));
static cl::opt<int64_t> seqFlag("seq", cl::desc("Tokens per sequence"),
                                cl::cat(configCategory));
static cl::opt<int64_t>
    microBatchFlag("micro-batch",
                   cl::desc("Sequences per step (the global batch that a "
                            "strategy splits over ranks)"),
                   cl::cat(configCategory));
static cl::opt<int64_t> gradAccumFlag(
    "grad-accum",
    cl::desc("Micro-batches per optimizer step; the step's batch holds "
             "grad-accum * micro-batch sequences (default 1)"),
    cl::cat(configCategory));
static cl::opt<bool>
    tieEmbeddingsFlag("tie-embeddings",
                      cl::desc("Reuse the token embedding as the output "
                               "projection (true|false)"),
                      cl::cat(configCategory));
static cl::opt<bool> genericFlag(
    "generic",
    cl::desc("Write the forward pass with the generic tensor ops, as a "
             "PyTorch front end emits it (matmul, softmax attention with a "
             "causal mask, the elementwise GELU/RMSNorm/RoPE chains): the "
             "same model and initialisation"),
    cl::cat(configCategory));
static cl::opt<double> normEpsFlag("norm-eps",
                                   cl::desc("Epsilon of layer/RMS norm"),
                                   cl::cat(configCategory));
static cl::opt<double> ropeThetaFlag("rope-theta",
                                     cl::desc("Rotary embedding base (llama)"),
                                     cl::cat(configCategory));
static cl::opt<std::string> optimizerFlag("optimizer", cl::desc("adamw or sgd"),
                                          cl::cat(configCategory));
static cl::opt<double> lrFlag("lr", cl::desc("Learning rate"),
                              cl::cat(configCategory));
static cl::opt<double> beta1Flag("beta1", cl::desc("AdamW beta1"),
                                 cl::cat(configCategory));
static cl::opt<double> beta2Flag("beta2", cl::desc("AdamW beta2"),
                                 cl::cat(configCategory));
static cl::opt<double> epsFlag("eps", cl::desc("AdamW epsilon"),
                               cl::cat(configCategory));
static cl::opt<double> weightDecayFlag("weight-decay",
                                       cl::desc("Weight decay of matrices"),
                                       cl::cat(configCategory));
static cl::opt<double> momentumFlag("momentum", cl::desc("SGD momentum"),
                                    cl::cat(configCategory));
static cl::opt<double>
    maxGradNormFlag("max-grad-norm",
                    cl::desc("Clip the global gradient norm (0: no clipping)"),
                    cl::cat(configCategory));
static cl::opt<std::string> precisionFlag("precision",
                                          cl::desc("Compute precision (f32, "
                                                   "bf16 with f32 master "
                                                   "weights)"),
                                          cl::cat(configCategory));

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "shard-gen") << message << "\n";
  return 1;
}

static bool given(const cl::Option &flag) {
  return flag.getNumOccurrences() > 0;
}

static std::string namedConfigList() {
  std::string names;
  for (llvm::StringRef name : getModelConfigNames())
    names += (names.empty() ? "" : ", ") + name.str();
  return names;
}

/// SEQ is the step's sequence length; MAX-POS the rows of GPT-2's learned
/// position table (`wpe`), which may be longer (gpt2-tiny trains on 64 of
/// its 128), and "-" for rotary positions, which have no table.
static void printList(llvm::raw_ostream &os) {
  os << llvm::format("%-12s %-6s %6s %6s %6s %6s %6s %6s %6s %7s %16s\n",
                     "NAME", "FAMILY", "LAYERS", "HIDDEN", "HEADS", "KV", "FFN",
                     "VOCAB", "SEQ", "MAX-POS", "PARAMETERS");
  for (llvm::StringRef name : getModelConfigNames()) {
    ModelConfig c = *lookupModelConfig(name);
    std::string maxPositions =
        c.maxPositions > 0 ? std::to_string(c.maxPositions) : "-";
    os << llvm::format("%-12s %-6s %6lld %6lld %6lld %6lld %6lld %6lld %6lld "
                       "%7s %16lld\n",
                       c.name.c_str(), stringifyModelFamily(c.family).data(),
                       (long long)c.layers, (long long)c.hidden,
                       (long long)c.heads, (long long)c.kvHeads,
                       (long long)c.ffn, (long long)c.vocab, (long long)c.seq,
                       maxPositions.c_str(), (long long)countParameters(c));
  }
}

/// The config the command line describes: a named one with overrides, or a
/// custom one; an error message otherwise.
static llvm::Expected<ModelConfig> configFromFlags() {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  ModelConfig config;
  if (!modelName.empty()) {
    std::optional<ModelConfig> named = lookupModelConfig(modelName);
    if (!named)
      return error("unknown model '" + modelName +
                   "'; valid models: " + namedConfigList());
    if (given(familyFlag))
      return error("--family is for custom configs; '" + modelName + "' is a " +
                   stringifyModelFamily(named->family) + " model");
    config = *named;
  } else {
    if (!given(familyFlag))
      return error("give a model name (" + namedConfigList() +
                   ") or --family=gpt2|llama with every size");
    std::optional<ModelFamily> family = parseModelFamily(familyFlag);
    if (!family)
      return error("unknown family '" + familyFlag +
                   "'; valid families: gpt2, llama");
    config = getFamilyDefaults(*family);
    // GPT-2 fixes ffn and kv-heads by hidden and heads; every other size is
    // the user's to give.
    llvm::SmallVector<std::pair<llvm::StringRef, bool>> required = {
        {"--layers", given(layersFlag)},
        {"--hidden", given(hiddenFlag)},
        {"--heads", given(headsFlag)},
        {"--vocab", given(vocabFlag)},
        {"--seq", given(seqFlag)},
        {"--micro-batch", given(microBatchFlag)}};
    if (*family == ModelFamily::GPT2)
      required.push_back({"--max-positions", given(maxPositionsFlag)});
    else
      required.append(
          {{"--kv-heads", given(kvHeadsFlag)}, {"--ffn", given(ffnFlag)}});
    std::string missing;
    for (auto [flag, present] : required)
      if (!present)
        missing += (missing.empty() ? "" : ", ") + flag.str();
    if (!missing.empty())
      return error("a custom " + familyFlag +
                   " config needs every size; missing " + missing);
  }

  bool gpt2 = config.family == ModelFamily::GPT2;
  if (given(layersFlag))
    config.layers = layersFlag;
  if (given(hiddenFlag)) {
    config.hidden = hiddenFlag;
    if (gpt2 && !given(ffnFlag))
      config.ffn = 4 * config.hidden;
  }
  if (given(headsFlag)) {
    config.heads = headsFlag;
    if (gpt2 && !given(kvHeadsFlag))
      config.kvHeads = config.heads;
  }
  if (given(kvHeadsFlag))
    config.kvHeads = kvHeadsFlag;
  if (given(ffnFlag))
    config.ffn = ffnFlag;
  if (given(vocabFlag))
    config.vocab = vocabFlag;
  if (given(maxPositionsFlag)) {
    if (!gpt2)
      return error("--max-positions is for gpt2; llama uses rope and has no "
                   "position table");
    config.maxPositions = maxPositionsFlag;
  }
  if (given(seqFlag))
    config.seq = seqFlag;
  if (given(microBatchFlag))
    config.microBatch = microBatchFlag;
  if (given(gradAccumFlag))
    config.gradAccum = gradAccumFlag;
  if (given(tieEmbeddingsFlag))
    config.tieEmbeddings = tieEmbeddingsFlag;
  config.generic = genericFlag;
  if (given(normEpsFlag))
    config.normEps = normEpsFlag;
  if (given(ropeThetaFlag)) {
    if (gpt2)
      return error("--rope-theta is for llama; gpt2 has learned positions");
    config.ropeTheta = ropeThetaFlag;
  }

  if (given(optimizerFlag)) {
    std::optional<OptimizerKind> kind = parseOptimizerKind(optimizerFlag);
    if (!kind)
      return error("unknown optimizer '" + optimizerFlag +
                   "'; valid optimizers: adamw, sgd");
    config.optimizer = *kind;
  }
  bool adamw = config.optimizer == OptimizerKind::AdamW;
  for (auto [flag, name] :
       {std::pair<const cl::opt<double> *, const char *>{&beta1Flag, "--beta1"},
        {&beta2Flag, "--beta2"},
        {&epsFlag, "--eps"}})
    if (!adamw && given(*flag))
      return error(llvm::Twine(name) + " is an AdamW setting; the optimizer "
                                       "is sgd");
  if (adamw && given(momentumFlag))
    return error("--momentum is an SGD setting; the optimizer is adamw (use "
                 "--optimizer=sgd)");
  if (given(lrFlag))
    config.lr = lrFlag;
  if (given(beta1Flag))
    config.beta1 = beta1Flag;
  if (given(beta2Flag))
    config.beta2 = beta2Flag;
  if (given(epsFlag))
    config.eps = epsFlag;
  if (given(weightDecayFlag))
    config.weightDecay = weightDecayFlag;
  if (given(momentumFlag))
    config.momentum = momentumFlag;
  if (given(maxGradNormFlag))
    config.maxGradNorm = maxGradNormFlag;
  if (given(precisionFlag)) {
    std::optional<Precision> precision = parsePrecision(precisionFlag);
    if (!precision)
      return error("unknown precision '" + precisionFlag +
                   "'; valid precisions: f32, bf16");
    config.precision = *precision;
  }
  if (llvm::Error invalid = verifyModelConfig(config))
    return error("invalid config '" + config.name +
                 "': " + llvm::toString(std::move(invalid)));
  return config;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&genCategory, &configCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "shard-gen: the training-step IR (forward pass, loss, optimizer "
      "config) of a transformer\n\n"
      "  shard-gen gpt2-small | shard-opt --strategy=ddp --world-size=2\n"
      "  shard-gen llama2-7b --layers=4 --precision=bf16 -o step.mlir\n"
      "  shard-gen --family=llama --layers=2 --hidden=64 --heads=4 "
      "--kv-heads=2 --ffn=128 --vocab=256 --seq=64 --micro-batch=8\n"
      "  shard-gen --list\n");

  if (listFlag) {
    if (!modelName.empty() || countFlag)
      return fail("--list takes no model and no --count");
    printList(llvm::outs());
    return 0;
  }

  llvm::Expected<ModelConfig> config = configFromFlags();
  if (!config)
    return fail(llvm::toString(config.takeError()));

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      autoshard::tools::openOutput(outputFilename, error);
  if (!output)
    return fail(error);

  // Only the IR is built, never the weights: memory and time grow with the
  // number of layers, not with the parameter count.
  MLIRContext context(MLIRContext::Threading::DISABLED);
  context.loadDialect<autoshard::train::TrainDialect, func::FuncDialect>();
  ScopedDiagnosticHandler diagnostics(&context, [](Diagnostic &diag) {
    llvm::WithColor::error(llvm::errs(), "shard-gen")
        << diag.getLocation() << ": " << diag << "\n";
    return success();
  });
  FailureOr<OwningOpRef<ModuleOp>> module =
      buildTrainingStep(&context, *config);
  if (failed(module))
    return 1;

  // The count reported is read back from the IR, so that it describes what
  // was generated; the closed formula must agree.
  FailureOr<FunctionOpInterface> step =
      autoshard::train::findStepFunction(**module);
  if (failed(step))
    return 1;
  int64_t parameters = countParameterArguments(*step);
  int64_t expected = countParameters(*config);
  if (parameters != expected)
    return fail("internal error: the IR of '" + config->name + "' has " +
                llvm::Twine(parameters) +
                " parameters but countParameters gives " +
                llvm::Twine(expected));
  llvm::errs() << "shard-gen: " << config->name << ": " << parameters
               << " parameters\n";

  if (countFlag)
    output->os() << parameters << "\n";
  else
    (*module)->print(output->os());
  if (std::optional<std::string> writeError =
          autoshard::tools::keepOutput(*output, outputFilename))
    return fail(*writeError);
  return 0;
}
