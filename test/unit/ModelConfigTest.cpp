// Named transformer configs: published parameter counts, config checks, IR.
#include "autoshard/Models/ModelConfig.h"
#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/IR/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace mlir;
using namespace autoshard::models;
namespace train = autoshard::train;

namespace {

ModelConfig named(llvm::StringRef name) {
  std::optional<ModelConfig> config = lookupModelConfig(name);
  EXPECT_TRUE(config.has_value()) << name.str();
  return config.value_or(ModelConfig());
}

/// The step built for `config`, with its parameter count read from the IR.
struct BuiltStep {
  MLIRContext context{MLIRContext::Threading::DISABLED};
  OwningOpRef<ModuleOp> module;
  func::FuncOp step;
};

std::unique_ptr<BuiltStep> build(const ModelConfig &config) {
  auto built = std::make_unique<BuiltStep>();
  FailureOr<OwningOpRef<ModuleOp>> module =
      buildTrainingStep(&built->context, config);
  if (failed(module))
    return nullptr;
  built->module = std::move(*module);
  FunctionOpInterface step = *train::findStepFunction(built->module.get());
  built->step = cast<func::FuncOp>(step.getOperation());
  return built;
}

/// The error verifyModelConfig reports, or "" when it accepts the config.
std::string verifyError(const ModelConfig &config) {
  if (llvm::Error error = verifyModelConfig(config))
    return llvm::toString(std::move(error));
  return "";
}

// Hugging Face's model.num_parameters() for GPT-2 (with separate q/k/v, the
// same count as its fused c_attn) and Llama 2 (untied lm_head).
struct PublishedCount {
  const char *name;
  int64_t parameters;
};
const PublishedCount kPublished[] = {
    {"gpt2-small", 124439808},   {"gpt2-medium", 354823168},
    {"gpt2-large", 774030080},   {"gpt2-xl", 1557611200},
    {"llama2-7b", 6738415616},   {"llama2-13b", 13015864320},
    {"llama2-70b", 68976648192},
};

TEST(ModelConfig, PublishedCountsFromFormula) {
  for (const PublishedCount &p : kPublished)
    EXPECT_EQ(countParameters(named(p.name)), p.parameters) << p.name;
}

TEST(ModelConfig, PublishedCountsFromIR) {
  for (const PublishedCount &p : kPublished) {
    std::unique_ptr<BuiltStep> built = build(named(p.name));
    ASSERT_TRUE(built) << p.name;
    EXPECT_EQ(countParameterArguments(built->step), p.parameters) << p.name;
  }
}

TEST(ModelConfig, EveryNamedConfigIsValidAndItsIRMatchesTheFormula) {
  for (llvm::StringRef name : getModelConfigNames()) {
    ModelConfig config = named(name);
    EXPECT_EQ(config.name, name.str());
    EXPECT_EQ(verifyError(config), "") << name.str();
    std::unique_ptr<BuiltStep> built = build(config);
    ASSERT_TRUE(built) << name.str();
    EXPECT_EQ(countParameterArguments(built->step), countParameters(config))
        << name.str();
  }
  EXPECT_FALSE(lookupModelConfig("gpt2"));
  EXPECT_FALSE(lookupModelConfig("llama2-7B"));
}

TEST(ModelConfig, PublishedArchitectures) {
  ModelConfig gpt3 = named("gpt3-175b");
  EXPECT_EQ(gpt3.family, ModelFamily::GPT2);
  EXPECT_EQ(gpt3.layers, 96);
  EXPECT_EQ(gpt3.hidden, 12288);
  EXPECT_EQ(gpt3.headDim(), 128);
  EXPECT_EQ(gpt3.ffn, 4 * 12288);
  EXPECT_EQ(gpt3.seq, 2048);
  // About 175 billion, as published.
  EXPECT_GT(countParameters(gpt3), 174'000'000'000);
  EXPECT_LT(countParameters(gpt3), 176'000'000'000);

  // Megatron-LM's 1T model: 1008 billion, as published.
  ModelConfig t1 = named("megatron-1t");
  EXPECT_EQ(t1.layers, 128);
  EXPECT_EQ(t1.hidden, 25600);
  EXPECT_EQ(t1.heads, 160);
  EXPECT_EQ(t1.vocab, 51200);
  EXPECT_GT(countParameters(t1), 1'007'500'000'000);
  EXPECT_LT(countParameters(t1), 1'008'500'000'000);

  ModelConfig l70 = named("llama2-70b");
  EXPECT_EQ(l70.kvHeads, 8);
  EXPECT_EQ(l70.headDim(), 128);
  EXPECT_FALSE(l70.tieEmbeddings);
  EXPECT_EQ(l70.seq, 4096);
  EXPECT_DOUBLE_EQ(l70.lr, 3e-4);
  EXPECT_DOUBLE_EQ(l70.ropeTheta, 10000.0);

  ModelConfig small = named("gpt2-small");
  EXPECT_TRUE(small.tieEmbeddings);
  EXPECT_EQ(small.seq, 1024);
  EXPECT_EQ(small.microBatch, 1);
  EXPECT_DOUBLE_EQ(small.lr, 6e-4);
  EXPECT_DOUBLE_EQ(small.beta2, 0.95);
  EXPECT_DOUBLE_EQ(small.maxGradNorm, 1.0);

  ModelConfig tiny = named("llama-tiny");
  EXPECT_EQ(tiny.vocab, 256);
  EXPECT_EQ(tiny.kvHeads, 2);
  EXPECT_EQ(tiny.microBatch, 8);
  EXPECT_DOUBLE_EQ(tiny.lr, 1e-3);
}

TEST(ModelConfig, TyingRemovesTheOutputProjection) {
  for (llvm::StringRef name : {"gpt2-tiny", "llama-tiny"}) {
    ModelConfig tied = named(name), untied = named(name);
    tied.tieEmbeddings = true;
    untied.tieEmbeddings = false;
    EXPECT_EQ(countParameters(untied) - countParameters(tied),
              tied.vocab * tied.hidden);
    std::unique_ptr<BuiltStep> t = build(tied), u = build(untied);
    ASSERT_TRUE(t && u);
    train::StepSignature tiedSig(t->step), untiedSig(u->step);
    EXPECT_FALSE(tiedSig.getArgIndex("lm_head.weight")) << name.str();
    EXPECT_TRUE(untiedSig.getArgIndex("lm_head.weight")) << name.str();
    EXPECT_EQ(countParameterArguments(u->step), countParameters(untied));
  }
}

TEST(TrainingStep, SignatureOfGpt2) {
  ModelConfig config = named("gpt2-tiny");
  std::unique_ptr<BuiltStep> built = build(config);
  ASSERT_TRUE(built);
  train::StepSignature sig(built->step);
  llvm::ArrayRef<train::StepValue> args = sig.getArgs();
  ASSERT_GE(args.size(), 4u);
  EXPECT_EQ(args[0].name, "wte");
  EXPECT_EQ(args[1].name, "wpe");
  EXPECT_EQ(args[1].type.getShape(), llvm::ArrayRef<int64_t>({128, 64}));
  // Parameters first, then the batch.
  const train::StepValue &ids = args[args.size() - 2];
  const train::StepValue &labels = args.back();
  EXPECT_EQ(ids.name, "input_ids");
  EXPECT_EQ(ids.role, train::Role::Input);
  EXPECT_EQ(labels.role, train::Role::Label);
  EXPECT_EQ(labels.type.getShape(), llvm::ArrayRef<int64_t>({8, 64}));
  EXPECT_TRUE(labels.type.getElementType().isInteger(32));
  for (const train::StepValue &arg : args.drop_back(2)) {
    EXPECT_EQ(arg.role, train::Role::Param) << arg.name.str();
    EXPECT_TRUE(arg.type.getElementType().isF32()) << arg.name.str();
  }
  ASSERT_EQ(sig.getResults().size(), 1u);
  EXPECT_EQ(sig.getResults()[0].role, train::Role::Loss);

  // GPT-2's init: residual projections scaled by 1/sqrt(2 * layers).
  auto initOf = [&](llvm::StringRef name) {
    return args[*sig.getArgIndex(name)].init;
  };
  EXPECT_EQ(initOf("h.1.attn.q_proj.weight").getKind(),
            train::InitKind::Normal);
  EXPECT_DOUBLE_EQ(initOf("h.1.attn.q_proj.weight").getValueAsDouble(), 0.02);
  EXPECT_DOUBLE_EQ(initOf("h.1.attn.c_proj.weight").getValueAsDouble(),
                   0.02 / std::sqrt(4.0));
  EXPECT_DOUBLE_EQ(initOf("h.0.mlp.c_proj.weight").getValueAsDouble(),
                   0.02 / std::sqrt(4.0));
  EXPECT_EQ(initOf("h.0.ln_2.weight").getKind(), train::InitKind::Ones);
  EXPECT_EQ(initOf("h.0.mlp.c_fc.bias").getKind(), train::InitKind::Zeros);
  EXPECT_EQ(args[*sig.getArgIndex("h.0.mlp.c_fc.weight")].type.getShape(),
            llvm::ArrayRef<int64_t>({256, 64}));

  auto adamw = built->step->getAttrOfType<train::AdamwConfigAttr>(
      train::TrainDialect::kOptimizerAttrName);
  ASSERT_TRUE(adamw);
  EXPECT_DOUBLE_EQ(adamw.getLr().getValueAsDouble(), 1e-3);
  EXPECT_TRUE(built->step->hasAttr(train::TrainDialect::kMaxGradNormAttrName));
}

TEST(TrainingStep, LlamaGroupedQueryShapes) {
  ModelConfig config = named("llama2-70b");
  config.layers = 1;
  std::unique_ptr<BuiltStep> built = build(config);
  ASSERT_TRUE(built);
  train::StepSignature sig(built->step);
  auto shapeOf = [&](llvm::StringRef name) {
    std::optional<unsigned> index = sig.getArgIndex(name);
    EXPECT_TRUE(index) << name.str();
    return index ? sig.getArgs()[*index].type.getShape()
                 : llvm::ArrayRef<int64_t>();
  };
  EXPECT_EQ(shapeOf("model.layers.0.self_attn.q_proj.weight"),
            llvm::ArrayRef<int64_t>({8192, 8192}));
  EXPECT_EQ(shapeOf("model.layers.0.self_attn.k_proj.weight"),
            llvm::ArrayRef<int64_t>({1024, 8192}));
  EXPECT_EQ(shapeOf("model.layers.0.mlp.down_proj.weight"),
            llvm::ArrayRef<int64_t>({8192, 28672}));
  EXPECT_EQ(shapeOf("lm_head.weight"), llvm::ArrayRef<int64_t>({32000, 8192}));

  int attentions = 0;
  built->step.walk([&](train::CausalAttentionOp op) {
    ++attentions;
    EXPECT_EQ(op.getKey().getType().getShape(),
              llvm::ArrayRef<int64_t>({1, 4096, 8, 128}));
    EXPECT_TRUE(op.getKey().getDefiningOp<train::RopeOp>());
    EXPECT_FALSE(op.getValue().getDefiningOp<train::RopeOp>());
  });
  EXPECT_EQ(attentions, 1);
}

TEST(TrainingStep, Bf16CastsEachMasterWeightOnce) {
  ModelConfig config = named("llama-tiny");
  config.precision = Precision::BF16;
  std::unique_ptr<BuiltStep> built = build(config);
  ASSERT_TRUE(built);
  Block &body = built->step.getBody().front();
  unsigned params = body.getNumArguments() - 2;
  for (BlockArgument arg : body.getArguments().drop_back(2)) {
    ASSERT_TRUE(arg.hasOneUse());
    auto cast = dyn_cast<train::CastOp>(*arg.getUsers().begin());
    ASSERT_TRUE(cast);
    EXPECT_TRUE(cast.getType().getElementType().isBF16());
  }
  // The casts come first, then compute in bf16; the loss stays f32.
  auto ops = body.without_terminator();
  unsigned leadingCasts = 0;
  for (Operation &op : ops) {
    if (!isa<train::CastOp>(op))
      break;
    ++leadingCasts;
  }
  EXPECT_EQ(leadingCasts, params);
  built->step.walk([](train::LinearOp op) {
    EXPECT_TRUE(op.getType().getElementType().isBF16());
  });
  EXPECT_TRUE(cast<RankedTensorType>(built->step.getResultTypes()[0])
                  .getElementType()
                  .isF32());
}

TEST(TrainingStep, OptimizerAndClipping) {
  ModelConfig config = named("gpt2-tiny");
  config.optimizer = OptimizerKind::SGD;
  config.momentum = 0.9;
  config.maxGradNorm = 0.0;
  std::unique_ptr<BuiltStep> built = build(config);
  ASSERT_TRUE(built);
  auto sgd = built->step->getAttrOfType<train::SgdConfigAttr>(
      train::TrainDialect::kOptimizerAttrName);
  ASSERT_TRUE(sgd);
  EXPECT_DOUBLE_EQ(sgd.getMomentum().getValueAsDouble(), 0.9);
  EXPECT_FALSE(built->step->hasAttr(train::TrainDialect::kMaxGradNormAttrName));
}

TEST(ModelConfig, VerificationErrors) {
  struct Case {
    const char *base;
    std::function<void(ModelConfig &)> change;
    const char *error;
  };
  const Case cases[] = {
      {"gpt2-tiny", [](ModelConfig &c) { c.layers = 0; },
       "layers must be positive, got 0"},
      {"gpt2-tiny", [](ModelConfig &c) { c.hidden = -64; },
       "hidden must be positive, got -64"},
      {"llama-tiny", [](ModelConfig &c) { c.kvHeads = 0; },
       "kv-heads must be positive, got 0"},
      {"gpt2-tiny", [](ModelConfig &c) { c.microBatch = 0; },
       "micro-batch must be positive, got 0"},
      {"gpt2-tiny", [](ModelConfig &c) { c.maxPositions = 0; },
       "max-positions must be positive, got 0"},
      {"gpt2-tiny", [](ModelConfig &c) { c.hidden = 66; },
       "hidden 66 is not a multiple of heads 4"},
      {"llama-tiny", [](ModelConfig &c) { c.kvHeads = 3; },
       "heads 4 is not a multiple of kv-heads 3"},
      {"gpt2-tiny", [](ModelConfig &c) { c.kvHeads = 2; },
       "gpt2 uses multi-head attention: kv-heads must equal heads 4, got 2"},
      {"llama-tiny", [](ModelConfig &c) { c.hidden = 60; },
       "head size 15 (hidden 60 / heads 4) is odd; rope rotates pairs"},
      {"gpt2-tiny", [](ModelConfig &c) { c.seq = 129; },
       "seq 129 exceeds max-positions 128"},
      {"llama-tiny", [](ModelConfig &c) { c.maxPositions = 4096; },
       "llama has no learned position table; max-positions must be 0, got "
       "4096"},
      {"gpt2-tiny", [](ModelConfig &c) { c.vocab = int64_t(1) << 32; },
       "vocab 4294967296 exceeds 2147483647"},
      {"gpt2-tiny", [](ModelConfig &c) { c.hidden = int64_t(1) << 40; },
       "parameters, more than the 2^62"},
      {"gpt2-tiny", [](ModelConfig &c) { c.microBatch = int64_t(1) << 60; },
       "makes activations of about"},
      {"gpt2-tiny", [](ModelConfig &c) { c.normEps = 0; },
       "norm-eps must be finite and > 0, got 0"},
      {"llama-tiny", [](ModelConfig &c) { c.ropeTheta = -1; },
       "rope-theta must be finite and > 0, got -1"},
      {"gpt2-tiny", [](ModelConfig &c) { c.lr = 0; },
       "lr must be finite and > 0, got 0"},
      {"gpt2-tiny", [](ModelConfig &c) { c.beta2 = 1.0; },
       "beta2 must lie in [0, 1), got 1"},
      {"gpt2-tiny", [](ModelConfig &c) { c.eps = 0; },
       "eps must be finite and > 0, got 0"},
      {"gpt2-tiny", [](ModelConfig &c) { c.weightDecay = -0.5; },
       "weight-decay must be finite and >= 0, got -0.5"},
      {"gpt2-tiny",
       [](ModelConfig &c) {
         c.optimizer = OptimizerKind::SGD;
         c.momentum = -1;
       },
       "momentum must be finite and >= 0, got -1"},
      {"gpt2-tiny", [](ModelConfig &c) { c.maxGradNorm = -1; },
       "max-grad-norm must be finite and >= 0 (0 disables clipping), got -1"},
  };
  for (const Case &test : cases) {
    ModelConfig config = named(test.base);
    test.change(config);
    std::string error = verifyError(config);
    EXPECT_NE(error.find(test.error), std::string::npos)
        << "expected '" << test.error << "', got '" << error << "'";
  }
}

TEST(TrainingStep, InvalidConfigIsADiagnostic) {
  ModelConfig config = named("llama-tiny");
  config.heads = 3;
  MLIRContext context;
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(buildTrainingStep(&context, config)));
  EXPECT_EQ(message, "invalid model config 'llama-tiny': hidden 64 is not a "
                     "multiple of heads 3; each head gets hidden / heads "
                     "channels");
}

TEST(ModelConfig, ParseNames) {
  EXPECT_EQ(parseModelFamily("llama"), ModelFamily::Llama);
  EXPECT_EQ(parseModelFamily("gpt3"), std::nullopt);
  EXPECT_EQ(parseOptimizerKind("sgd"), OptimizerKind::SGD);
  EXPECT_EQ(parsePrecision("bf16"), Precision::BF16);
  EXPECT_EQ(parsePrecision("fp16"), std::nullopt);
  EXPECT_EQ(stringifyPrecision(Precision::F32), "f32");
}

} // namespace
