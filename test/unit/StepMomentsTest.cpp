// The moments of a compiled step that the cost model derives other plans'
// peaks from: the parameters in use by parameter and by block, and each
// moment's buffers by category.
#include "autoshard/Conversion/MemoryPlan.h"

#include "autoshard/Conversion/Passes.h"
#include "autoshard/Models/ModelConfig.h"
#include "autoshard/Pipelines/Pipelines.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include "ModelShapes.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace autoshard;

namespace {

TEST(StepMoments, BlocksInUseAndBuffersByCategory) {
  DialectRegistry registry;
  registerAutoshardDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  models::ModelConfig config = autoshard::testing::named("gpt2-tiny");
  config.microBatch = 2;
  auto built = models::buildTrainingStep(&context, config);
  ASSERT_TRUE(succeeded(built));
  OwningOpRef<ModuleOp> module = std::move(*built);
  PassManager pm(&context);
  StrategyOptions ddp;
  ddp.strategy = "ddp";
  ddp.worldSize = 2;
  buildStrategyPipeline(pm, ddp);
  ASSERT_TRUE(succeeded(pm.run(*module)));
  FailureOr<MemoryPlan> plan = planStepMemory(*module);
  ASSERT_TRUE(succeeded(plan));
  ASSERT_FALSE(plan->stepMoments.empty());

  // A GPT-2 block in f32: two norms, the attention's projections and the
  // MLP's, with their biases.
  const int64_t h = config.hidden;
  const int64_t block = 4 * (12 * h * h + 13 * h);
  int64_t mostUnits = 0;
  for (const cost::StepMoment &m : plan->stepMoments) {
    // A block's parameters are held from the first read of one to the
    // last: never fewer than those in use one by one.
    EXPECT_GE(m.unitBytesInUse, m.paramBytesInUse);
    mostUnits = std::max(mostUnits, m.unitBytesInUse);
    // A parameter an op reads is in use at that op.
    EXPECT_LE(m.paramBytesRead, m.paramBytesInUse);
    // The buffers by category are a part of the moment's other bytes.
    EXPECT_GE(m.activations, 0);
    EXPECT_GE(m.summingGradients, 0);
    EXPECT_LE(m.activations + m.parameterBuffers + m.summingGradients +
                  m.communication + m.batch,
              m.others);
  }
  // Some moment holds a whole block (and the parameters outside the
  // blocks in use then), more than any one parameter.
  EXPECT_GE(mostUnits, block);
  int64_t mostParams = 0, mostRead = 0, mostNext = 0;
  for (const cost::StepMoment &m : plan->stepMoments) {
    mostParams = std::max(mostParams, m.paramBytesInUse);
    mostRead = std::max(mostRead, m.paramBytesRead);
    mostNext = std::max(mostNext, m.nextParamBytesRead);
  }
  EXPECT_GT(mostUnits, mostParams);
  // An op reads at most its own parameters, fewer than are in use across
  // a block (the output head's matrix, the largest, is read alone); some
  // moment has the next op's read ahead of it.
  const int64_t head = 4 * config.vocab * h;
  EXPECT_GE(mostRead, head);
  EXPECT_LT(mostRead, mostParams);
  EXPECT_GT(mostNext, 0);
}

} // namespace
