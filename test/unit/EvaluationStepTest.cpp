// shard-compile --with-eval: the evaluation step's options and the check
// that it reads the training step's parameters as they are.
#include "autoshard/Pipelines/EvaluationStep.h"

#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace autoshard;

TEST(EvaluationStep, OptionsKeepThePlacementAndDropTheBackwardPass) {
  StrategyOptions training;
  training.strategy = "zero2";
  training.worldSize = 4;
  training.exposeGradients = true;
  training.activationCheckpointing = strategy::ActivationCheckpointing::Blocks;
  training.reduceDtype = strategy::ReduceDtype::F32;
  training.reduceEvery = strategy::ReduceEvery::MicroBatch;
  training.offload = strategy::Offload::Cpu;
  training.paramGroups = {"ddp=.*norm.*"};
  training.memoryBudget = "1GiB";
  StrategyOptions eval = evaluationStepOptions(training);
  EXPECT_TRUE(eval.forwardOnly);
  EXPECT_EQ(eval.strategy, "zero2");
  EXPECT_EQ(eval.worldSize, 4);
  EXPECT_EQ(eval.offload, strategy::Offload::Cpu);
  EXPECT_EQ(eval.paramGroups, training.paramGroups);
  EXPECT_FALSE(eval.exposeGradients);
  EXPECT_EQ(eval.activationCheckpointing,
            strategy::ActivationCheckpointing::None);
  EXPECT_EQ(eval.reduceDtype, strategy::ReduceDtype::Gradient);
  EXPECT_EQ(eval.reduceEvery, strategy::ReduceEvery::Step);
  // Checked on the two steps together.
  EXPECT_TRUE(eval.memoryBudget.empty());
}

namespace {

std::string step(StringRef wType, StringRef wAttrs, StringRef name = "w") {
  return (R"mlir(
shard.grid @world(shape = 2)
func.func @step(
    %w: )mlir" +
          wType +
          R"mlir( {train.role = #train.role<param>, train.name = ")mlir" +
          name + R"mlir(", train.init = #train.init<zeros>)mlir" + wAttrs +
          R"mlir(},
    %x: tensor<2x4xf32> {train.role = #train.role<input>, train.name = "x"})
    -> (tensor<f32> {train.role = #train.role<loss>, train.name = "loss"})
    attributes {train.step, train.plan = #train.plan<strategy = "zero3", grid = @world, optimizer_states = sharded, gradients = sharded, parameters = sharded, shard_axes = [0], unit = param, reshard = after_forward, bucket_cap_mb = 25>} {
  %l = "test.loss"(%w, %x) : ()mlir" +
          wType + R"mlir(, tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
)mlir")
      .str();
}

} // namespace

TEST(EvaluationStep, ParametersMustBeHeldAlike) {
  MLIRContext context;
  context.allowUnregisteredDialects();
  context.loadDialect<train::TrainDialect, func::FuncDialect,
                      shard::ShardDialect>();
  std::string shard = ", train.shard = #train.flat_shard<shape = [4, 4], "
                      "grid_axes = [0]>";
  OwningOpRef<ModuleOp> sharded =
      parseSourceString<ModuleOp>(step("tensor<8xf32>", shard), &context);
  OwningOpRef<ModuleOp> same =
      parseSourceString<ModuleOp>(step("tensor<8xf32>", shard), &context);
  OwningOpRef<ModuleOp> whole =
      parseSourceString<ModuleOp>(step("tensor<4x4xf32>", ""), &context);
  ASSERT_TRUE(sharded && same && whole);

  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  EXPECT_TRUE(succeeded(checkEvaluationStepShares(*sharded, *same)));
  EXPECT_TRUE(message.empty());
  EXPECT_TRUE(failed(checkEvaluationStepShares(*sharded, *whole)));
  EXPECT_EQ(message,
            "'func.func' op cannot read the training step's parameter 'w': "
            "the training step holds tensor<8xf32> "
            "#train.flat_shard<shape = [4, 4], grid_axes = [0]> in device "
            "memory, the evaluation step tensor<4x4xf32> (whole) in device "
            "memory; compile a separate evaluation binary with --forward-only "
            "(it loads the parameters the training run saves)");

  OwningOpRef<ModuleOp> other =
      parseSourceString<ModuleOp>(step("tensor<8xf32>", shard, "v"), &context);
  ASSERT_TRUE(other);
  EXPECT_TRUE(failed(checkEvaluationStepShares(*sharded, *other)));
  EXPECT_EQ(message, "'func.func' op evaluates parameter 'v', which the "
                     "training step does not have");

  EXPECT_TRUE(failed(checkEvaluationMemoryBudget(*sharded, *same, "lots")));
  EXPECT_EQ(message, "memory budget 'lots' is not a positive size; write "
                     "bytes or a size with a unit, such as 80GiB or 1.5GB");
}
