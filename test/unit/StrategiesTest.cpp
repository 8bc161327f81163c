// The strategy presets and the plan's enums (autoshard/Strategy/Strategy.h):
// lookup, listing, the placements each preset means, the spellings, and
// their typed command-line options.
#include "autoshard/Strategy/CommandLine.h"
#include "autoshard/Strategy/Strategy.h"

#include <gtest/gtest.h>

using namespace autoshard::strategy;

TEST(Strategies, DdpReplicatesEverything) {
  const StrategyPreset *ddp = lookupStrategy("ddp");
  ASSERT_TRUE(ddp);
  EXPECT_STREQ(ddp->name, "ddp");
  EXPECT_EQ(ddp->optimizerStates, Placement::Replicated);
  EXPECT_EQ(ddp->gradients, Placement::Replicated);
  EXPECT_EQ(ddp->parameters, Placement::Replicated);
  EXPECT_EQ(ddp->shardingRank, 0);
}

TEST(Strategies, UnknownNamesAreNotFound) {
  EXPECT_FALSE(lookupStrategy(""));
  EXPECT_FALSE(lookupStrategy("DDP"));
  EXPECT_FALSE(lookupStrategy("ddp "));
  EXPECT_FALSE(lookupStrategy(kAutoStrategy));
}

TEST(Strategies, ListNamesEveryPresetOnce) {
  std::string names = listStrategyNames();
  EXPECT_EQ(names, "ddp, zero1, zero2, zero3, fsdp, hybrid");
  for (const StrategyPreset &preset : kStrategyPresets) {
    size_t at = names.find(preset.name);
    ASSERT_NE(at, std::string::npos) << preset.name;
    EXPECT_EQ(names.find(preset.name, at + 1), std::string::npos);
    EXPECT_NE(std::string(preset.summary), "");
  }
}

// ZeRO's stages shard one more class of state each; only DDP shards none,
// and sharding more never ranks as less sharded.
TEST(Strategies, ShardingRankFollowsWhatIsSharded) {
  for (const StrategyPreset &a : kStrategyPresets)
    for (const StrategyPreset &b : kStrategyPresets) {
      auto sharded = [](const StrategyPreset &p) {
        return (p.optimizerStates == Placement::Sharded) +
               (p.gradients == Placement::Sharded) +
               (p.parameters == Placement::Sharded);
      };
      if (sharded(a) < sharded(b))
        EXPECT_LT(a.shardingRank, b.shardingRank) << a.name << " " << b.name;
      EXPECT_EQ(a.shardingRank == 0, sharded(a) == 0) << a.name;
    }
  EXPECT_LT(lookupStrategy("hybrid")->shardingRank,
            lookupStrategy("fsdp")->shardingRank);
}

TEST(Strategies, SpellingsRoundTrip) {
  EXPECT_EQ(parseEnum<Offload>("nvme"), Offload::Nvme);
  EXPECT_EQ(parseEnum<Offload>("disk"), std::nullopt);
  EXPECT_EQ(parseEnum<ActivationCheckpointing>("blocks"),
            ActivationCheckpointing::Blocks);
  EXPECT_EQ(parseEnum<ActivationCheckpointing>("all"), std::nullopt);
  EXPECT_EQ(parseEnum<ReduceEvery>("micro-batch"), ReduceEvery::MicroBatch);
  EXPECT_EQ(parseEnum<ReduceEvery>("micro_batch"), std::nullopt);
  EXPECT_STREQ(stringify(ReduceDtype::F32), "f32");
  EXPECT_STREQ(stringify(Reshard::AfterBackward), "after_backward");
  EXPECT_EQ(listSpellings<Offload>(), "none, cpu, nvme");
  EXPECT_EQ(listSpellings<ActivationCheckpointing>(),
            "none, blocks, selective");
  for (const Spelling<Offload> &s : EnumSpellings<Offload>::all)
    EXPECT_EQ(parseEnum<Offload>(stringify(s.value)), s.value);
}

// A typed flag takes the spellings and refuses another with every valid one.
TEST(Strategies, TypedOptionsParseSpellings) {
  llvm::cl::opt<Offload> flag("strategies-test-offload",
                              llvm::cl::init(Offload::None));
  llvm::cl::parser<Offload> &parser = flag.getParser();
  Offload value = Offload::None;
  EXPECT_FALSE(parser.parse(flag, "strategies-test-offload", "cpu", value));
  EXPECT_EQ(value, Offload::Cpu);
  EXPECT_TRUE(parser.parse(flag, "strategies-test-offload", "disk", value));
  EXPECT_EQ(value, Offload::Cpu);
  EXPECT_EQ(parser.getValueName(), "none|cpu|nvme");
}
