//===- Strategies.cpp - named strategies as presets of one plan -----------===//

#include "autoshard/Dialect/Train/Transforms/Strategies.h"

using namespace autoshard::train;

// The partitioner applies replicated placements today; the ZeRO stages and
// FSDP join this table as the partitioner learns to shard each class of state.
static const StrategyPreset kPresets[] = {
    {"ddp", Placement::Replicated, Placement::Replicated,
     Placement::Replicated,
     "data parallel: everything replicated, gradients all-reduced"},
};

llvm::ArrayRef<StrategyPreset> autoshard::train::getStrategyPresets() {
  return kPresets;
}

std::optional<StrategyPreset>
autoshard::train::lookupStrategy(llvm::StringRef name) {
  for (const StrategyPreset &preset : kPresets)
    if (preset.name == name)
      return preset;
  return std::nullopt;
}

std::string autoshard::train::listStrategyNames() {
  std::string names;
  for (const StrategyPreset &preset : kPresets) {
    if (!names.empty())
      names += ", ";
    names += preset.name.str();
  }
  return names;
}
