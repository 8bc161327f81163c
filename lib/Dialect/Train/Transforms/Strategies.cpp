//===- Strategies.cpp - named strategies as presets of one plan -----------===//

#include "autoshard/Dialect/Train/Transforms/Strategies.h"

using namespace autoshard::train;

static constexpr Placement R = Placement::Replicated;
static constexpr Placement S = Placement::Sharded;

static const StrategyPreset kPresets[] = {
    {"ddp", R, R, R, Unit::Param, false,
     "data parallel: everything replicated, gradients all-reduced"},
    {"zero1", S, R, R, Unit::Param, false,
     "optimizer states sharded; gradients reduce-scattered before the "
     "update, parameters all-gathered after it"},
    {"zero2", S, S, R, Unit::Param, false,
     "optimizer states and gradients sharded; gradients reduce-scattered "
     "as soon as they are computed"},
    {"zero3", S, S, S, Unit::Param, false,
     "everything sharded; each parameter gathered for its uses"},
    {"fsdp", S, S, S, Unit::Block, false,
     "everything sharded; each transformer block's parameters gathered "
     "together before its forward and again before its backward"},
    {"hybrid", S, S, S, Unit::Block, true,
     "fsdp within groups of --shard-group-size ranks, replicated across "
     "the groups"},
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
