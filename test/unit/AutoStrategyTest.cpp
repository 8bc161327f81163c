// --strategy=auto's choice over a table of models, world sizes and devices:
// DDP whenever DDP fits on the device without offload; never ZeRO-3 or
// FSDP when ZeRO-1/2 fits at a lower estimated time; offload offered, and
// chosen only when no plan fits without it. The
// models are shard-gen's, in bf16 with AdamW and clipping, one sequence per
// rank.
#include "autoshard/CostModel/DeviceCatalog.h"
#include "autoshard/Pipelines/AutoStrategy.h"
#include "ModelShapes.h"

#include <gtest/gtest.h>

using namespace autoshard;
using autoshard::testing::named;
using autoshard::testing::shapeOf;

namespace {

bool sharded(const std::string &strategy) {
  return strategy == "zero3" || strategy == "fsdp";
}

bool offloads(const Candidate &c) {
  return c.estimate.plan.optimizerOffload != cost::Offload::None ||
         c.estimate.plan.parameterOffload != cost::Offload::None;
}

TEST(AutoStrategy, ChoicesFollowTheRules) {
  int choices = 0, ddp = 0, offloaded = 0, noFit = 0, offered = 0;
  for (const char *name : {"gpt2-small", "gpt2-xl", "llama2-7b", "llama2-13b",
                           "llama2-70b", "gpt3-175b"}) {
    models::ModelConfig config = named(name);
    for (const char *device :
         {"a100-80gb", "h100-80gb", "h200-141gb", "cpu-node"}) {
      llvm::Expected<cost::DeviceSpec> spec = cost::lookupDevice(device);
      ASSERT_TRUE(bool(spec)) << llvm::toString(spec.takeError());
      for (int64_t world : {1, 8, 64, 1024}) {
        SCOPED_TRACE(std::string(name) + " on " + std::to_string(world) +
                     " " + device);
        cost::ModelDescription model = cost::describeTransformer(
            name, shapeOf(config), world, config.seq, 1,
            cost::Optimizer::AdamW, cost::Precision::BF16, true);
        cost::ClusterSpec cluster = cost::makeCluster(*spec, world);
        // The choice rules over presets, offload and checkpointing; the
        // schedule's settings are searched in strategy-auto.mlir (searching
        // them here too makes this table 8 times slower).
        StrategyOptions base;
        base.searchSchedule = false;
        Choice choice = chooseStrategy(model, cluster, base);
        ASSERT_FALSE(choice.candidates.empty());
        offered += llvm::count_if(choice.candidates, offloads);
        if (choice.chosen < 0) {
          ++noFit;
          for (const Candidate &c : choice.candidates)
            EXPECT_FALSE(c.fits);
          continue;
        }
        ++choices;
        const Candidate &chosen = choice.candidates[choice.chosen];
        EXPECT_TRUE(chosen.fits);
        bool ddpFits = llvm::any_of(choice.candidates, [](const Candidate &c) {
          return c.fits && c.options.strategy == "ddp" && !offloads(c);
        });
        if (offloads(chosen)) {
          ++offloaded;
          for (const Candidate &c : choice.candidates)
            EXPECT_FALSE(c.fits && !offloads(c))
                << cost::describePlan(chosen.estimate.plan)
                << " offloads while " << cost::describePlan(c.estimate.plan)
                << " fits without";
        }
        if (ddpFits) {
          ++ddp;
          EXPECT_EQ(chosen.options.strategy, "ddp");
        }
        if (sharded(chosen.options.strategy))
          for (const Candidate &c : choice.candidates)
            if (c.fits && (c.options.strategy == "zero1" ||
                           c.options.strategy == "zero2"))
              EXPECT_GT(c.estimate.time.total(),
                        chosen.estimate.time.total())
                  << cost::describePlan(c.estimate.plan) << " fits and is "
                  << "not slower than "
                  << cost::describePlan(chosen.estimate.plan);
      }
    }
  }
  // The table covers each outcome: DDP, a sharded plan, an offloaded plan
  // (where nothing fits on the device alone), and nothing fitting (CPU
  // nodes have no host link to offload over).
  EXPECT_GT(ddp, 0);
  EXPECT_GT(choices, ddp + offloaded);
  EXPECT_GT(offered, 0);
  EXPECT_GT(offloaded, 0);
  EXPECT_GT(noFit, 0);
}

TEST(AutoStrategy, ReportNamesEveryCandidateAndTheChoice) {
  models::ModelConfig config = named("gpt2-small");
  llvm::Expected<cost::DeviceSpec> spec = cost::lookupDevice("h100-80gb");
  ASSERT_TRUE(bool(spec));
  cost::ModelDescription model = cost::describeTransformer(
      "gpt2-small", shapeOf(config), 8, config.seq, 1, cost::Optimizer::AdamW,
      cost::Precision::BF16, true);
  Choice choice = chooseStrategy(model, cost::makeCluster(*spec, 8),
                                 StrategyOptions());
  ASSERT_GE(choice.chosen, 0);
  std::string text = formatCostReport(choice, CostReportForm::Summary);
  EXPECT_NE(text.find("cost report: gpt2-small on 1 x 8 h100-80gb (8 ranks)"),
            std::string::npos);
  EXPECT_NE(text.find("chosen: ddp"), std::string::npos);
  // The summary: the chosen row (estimated: no exact plan here) and at most
  // three of each strategy; all: every candidate.
  auto rows = [](const std::string &report) {
    size_t count = 0;
    for (size_t at = 0; (at = report.find("\n", at)) != std::string::npos;
         ++at)
      count += report.compare(at + 1, 2, "  ") == 0 ||
               report.compare(at + 1, 2, "* ") == 0;
    return count;
  };
  std::string all = formatCostReport(choice, CostReportForm::All);
  size_t strategies = 0;
  for (const std::string &name : cost::presetNames())
    strategies += llvm::any_of(choice.candidates, [&](const Candidate &c) {
      return c.options.strategy == name;
    });
  EXPECT_LE(rows(text), 3 + kReportedPerStrategy * strategies);
  EXPECT_EQ(rows(all), 1 + choice.candidates.size());
  EXPECT_NE(text.find("estimated\n"), std::string::npos);
  EXPECT_NE(text.find("--cost-report=all lists every one"),
            std::string::npos);
  std::string json = formatCostReport(choice, CostReportForm::Json);
  EXPECT_NE(json.find("\"chosen\": " + std::to_string(choice.chosen)),
            std::string::npos);
  EXPECT_NE(json.find("\"exposed_communication\""), std::string::npos);
}

} // namespace
