//===- Strategies.h - named strategies as presets of one plan ---*- C++ -*-===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_STRATEGIES_H
#define AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_STRATEGIES_H

#include "autoshard/Dialect/Train/IR/TrainDialect.h"

#include <optional>
#include <string>

namespace autoshard::train {

/// Where each class of training state lives under a named strategy, and how
/// its collectives are grouped.
struct StrategyPreset {
  llvm::StringRef name;
  Placement optimizerStates;
  Placement gradients;
  Placement parameters;
  Unit unit;
  /// Shards within groups of --shard-group-size ranks on a 2-D grid and
  /// replicates across the groups (hybrid sharding).
  bool hybrid;
  llvm::StringRef summary;
};

/// Every strategy the partitioner can apply, in the order help lists them.
llvm::ArrayRef<StrategyPreset> getStrategyPresets();

/// The preset called `name`, if there is one.
std::optional<StrategyPreset> lookupStrategy(llvm::StringRef name);

/// "ddp, zero1, ..." for diagnostics and --help.
std::string listStrategyNames();

} // namespace autoshard::train

#endif // AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_STRATEGIES_H
