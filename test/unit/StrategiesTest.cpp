// The strategy presets: lookup, listing, and the placements each preset means.
#include "autoshard/Dialect/Train/Transforms/Strategies.h"

#include <gtest/gtest.h>

using namespace autoshard::train;

TEST(Strategies, DdpReplicatesEverything) {
  std::optional<StrategyPreset> ddp = lookupStrategy("ddp");
  ASSERT_TRUE(ddp);
  EXPECT_EQ(ddp->name, "ddp");
  EXPECT_EQ(ddp->optimizerStates, Placement::Replicated);
  EXPECT_EQ(ddp->gradients, Placement::Replicated);
  EXPECT_EQ(ddp->parameters, Placement::Replicated);
}

TEST(Strategies, UnknownNamesAreNotFound) {
  EXPECT_FALSE(lookupStrategy(""));
  EXPECT_FALSE(lookupStrategy("DDP"));
  EXPECT_FALSE(lookupStrategy("ddp "));
}

TEST(Strategies, ListNamesEveryPresetOnce) {
  std::string names = listStrategyNames();
  for (const StrategyPreset &preset : getStrategyPresets()) {
    size_t at = names.find(preset.name.str());
    ASSERT_NE(at, std::string::npos) << preset.name.str();
    EXPECT_EQ(names.find(preset.name.str(), at + 1), std::string::npos);
    EXPECT_FALSE(preset.summary.empty());
  }
}
