// The cost model's transformer description against the IR shard-gen builds:
// the same parameters, the same backward readers, FLOPs and activations.
#include "autoshard/CostModel/Model.h"
#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"
#include "autoshard/Models/ModelConfig.h"
#include "ModelShapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace autoshard;
using namespace autoshard::cost;
using models::ModelConfig;
using mlir::isa;
using autoshard::testing::named;
using autoshard::testing::shapeOf;

namespace {

/// A parameter argument of the differentiated step: its name, elements and
/// whether an op after the loss (the backward pass) reads it.
struct IRParameter {
  std::string name;
  int64_t elements;
  bool readByBackward;
};

/// The parameters of the step shard-gen builds for `config`, after
/// autoshard-autodiff: the partitioner gathers a sharded parameter again
/// for the readers after the loss op, and so does the cost model.
std::vector<IRParameter> irParameters(const ModelConfig &config) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  auto module = models::buildTrainingStep(&context, config);
  EXPECT_TRUE(succeeded(module));
  if (failed(module))
    return {};
  mlir::PassManager pm(&context);
  pm.addPass(train::createAutodiffPass());
  EXPECT_TRUE(succeeded(pm.run(module->get())));
  mlir::FunctionOpInterface step = *train::findStepFunction(module->get());
  llvm::DenseMap<mlir::Operation *, int64_t> position;
  int64_t loss = -1, next = 0;
  step->walk([&](mlir::Operation *op) {
    position[op] = next++;
    if (loss < 0 && llvm::isa<train::SoftmaxCrossEntropyOp>(op))
      loss = position[op];
  });
  EXPECT_GE(loss, 0);
  std::vector<IRParameter> params;
  train::StepSignature signature(step);
  for (const train::StepValue &arg : signature.getArgs()) {
    if (arg.role != train::Role::Param)
      continue;
    bool backward = false;
    for (mlir::Operation *user : step.getArgument(arg.index).getUsers())
      if (!llvm::isa<train::OptimizerOpInterface>(user) &&
          position[user] > loss)
        backward = true;
    params.push_back({arg.name.str(), arg.type.getNumElements(), backward});
  }
  return params;
}

void expectSameParameters(const ModelConfig &config) {
  SCOPED_TRACE(config.name);
  std::vector<IRParameter> ir = irParameters(config);
  std::vector<ParameterTensor> described =
      transformerParameters(shapeOf(config));
  ASSERT_EQ(ir.size(), described.size());
  for (size_t i = 0; i < ir.size(); ++i) {
    EXPECT_EQ(ir[i].name, described[i].name) << i;
    EXPECT_EQ(ir[i].elements, described[i].elements) << ir[i].name;
    EXPECT_EQ(ir[i].readByBackward, described[i].readByBackward) << ir[i].name;
  }
}

TEST(CostModelTransformer, Gpt2ParametersAndBackwardReadersMatchTheIR) {
  expectSameParameters(named("gpt2-tiny"));
  ModelConfig untied = named("gpt2-tiny");
  untied.tieEmbeddings = false;
  untied.name = "gpt2-tiny-untied";
  expectSameParameters(untied);
}

TEST(CostModelTransformer, LlamaParametersAndBackwardReadersMatchTheIR) {
  // Grouped-query attention: 4 heads, 2 key/value heads.
  expectSameParameters(named("llama-tiny"));
  ModelConfig tied = named("llama-tiny");
  tied.tieEmbeddings = true;
  tied.name = "llama-tiny-tied";
  expectSameParameters(tied);
}

TEST(CostModelTransformer, CountsMatchThePublishedModels) {
  for (llvm::StringRef name :
       {"gpt2-small", "gpt2-xl", "gpt3-175b", "llama2-7b", "llama2-70b"}) {
    ModelConfig config = named(name);
    ModelDescription model =
        describeTransformer(name.str(), shapeOf(config), 1, config.seq, 1,
                            Optimizer::AdamW, Precision::BF16, true);
    EXPECT_EQ(model.parameterCount(), models::countParameters(config))
        << name.str();
  }
}

TEST(CostModelTransformer, BlocksAreTheLayerIndex) {
  std::vector<ParameterTensor> params =
      transformerParameters(shapeOf(named("llama-tiny")));
  for (const ParameterTensor &p : params) {
    if (p.name.rfind("model.layers.1.", 0) == 0)
      EXPECT_EQ(p.block, 1) << p.name;
    else if (p.name.rfind("model.layers.0.", 0) == 0)
      EXPECT_EQ(p.block, 0) << p.name;
    else
      EXPECT_EQ(p.block, -1) << p.name;
  }
}

TEST(CostModelTransformer, StepFlopsFollowPaLMsFormula) {
  // GPT-2 small: 12 layers of 4*768^2 + 2*3072*768 matmul weights, plus the
  // 50257 x 768 output projection (the tied wte).
  TransformerShape shape = shapeOf(named("gpt2-small"));
  int64_t blocks = 12 * (4 * 768 * 768 + 2 * 3072 * 768);
  EXPECT_EQ(transformerMatmulParameters(shape, true), blocks);
  EXPECT_EQ(transformerMatmulParameters(shape, false), blocks + 50257 * 768);
  // One 1024-token sequence: 6 N T + 12 L s h T.
  double expected =
      1024.0 * (6.0 * double(blocks + 50257 * 768) + 12.0 * 12 * 1024 * 768);
  EXPECT_DOUBLE_EQ(transformerStepFlops(shape, 1024, 1024), expected);
  EXPECT_DOUBLE_EQ(transformerBlockForwardFlops(shape, 1024, 1024),
                   1024.0 * (2.0 * double(blocks) + 4.0 * 12 * 1024 * 768));
  // Llama 2 70B: grouped-query attention narrows k and v, not q.
  TransformerShape llama = shapeOf(named("llama2-70b"));
  int64_t perLayer = 2 * 8192 * 8192 + 2 * 1024 * 8192 + 3 * 28672 * 8192;
  EXPECT_EQ(transformerMatmulParameters(llama, true), 80 * perLayer);
}

TEST(CostModelTransformer, ActivationEstimateTerms) {
  TransformerShape shape = shapeOf(named("gpt2-small"));
  const int64_t h = 768, v = 50257, tokens = 2 * 1024;
  // Per layer and token without checkpointing: 16 h elements (Korthikanti's
  // 34 bytes of 16-bit activations less the 2 bytes of dropout masks) and
  // an f32 log-sum-exp per head; the head keeps 2 h + 2 v.
  int64_t none = tokens * (12 * (16 * h * 2 + 12 * 4) + (2 * h + 2 * v) * 2);
  EXPECT_EQ(estimateTransformerActivationBytes(shape, 2, 1024, Precision::BF16,
                                               ActivationCheckpointing::None),
            none);
  // f32 doubles the tensors, not the log-sum-exp.
  EXPECT_EQ(estimateTransformerActivationBytes(shape, 2, 1024, Precision::F32,
                                               ActivationCheckpointing::None),
            tokens * (12 * (16 * h * 4 + 12 * 4) + (2 * h + 2 * v) * 4));
  // Selective keeps 7 h + ffn = 11 h per layer; blocks keeps each block's
  // input and one block's activations.
  EXPECT_EQ(
      estimateTransformerActivationBytes(shape, 2, 1024, Precision::BF16,
                                         ActivationCheckpointing::Selective),
      tokens * (12 * (11 * h * 2 + 12 * 4) + (2 * h + 2 * v) * 2));
  EXPECT_EQ(estimateTransformerActivationBytes(shape, 2, 1024, Precision::BF16,
                                               ActivationCheckpointing::Blocks),
            tokens *
                (12 * h * 2 + (16 * h * 2 + 12 * 4) + (2 * h + 2 * v) * 2));
}

} // namespace
