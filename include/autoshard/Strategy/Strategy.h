//===- Strategy.h - the named strategies and the plan's vocabulary -*- C++ -*-===//
//
// The one definition of what a strategy preset means and of the enums that
// name a plan's choices (placement, gather unit, reshard point, reduction
// type and time, offload tier, activation checkpointing), with their
// spellings. Plain C++ without MLIR or LLVM, so that the cost model, the
// passes, the pipelines and the tools all derive from it: a new preset or a
// new spelling is one edit here.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_STRATEGY_STRATEGY_H
#define AUTOSHARD_STRATEGY_STRATEGY_H

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace autoshard::strategy {

/// Where one class of training state lives: whole on every rank, or split
/// into one flat shard per rank of the shard group.
enum class Placement { Replicated, Sharded };
/// What one gather fetches under sharded parameters: each parameter on its
/// own (ZeRO-3), or every parameter of a block together (FSDP units).
enum class GatherUnit { Parameter, Block };
/// When gathered parameters are released: after the forward pass (gathered
/// again for the backward pass), or after the backward pass.
enum class Reshard { AfterForward, AfterBackward };
/// The element type gradients are reduced in: their own, or f32.
enum class ReduceDtype { Gradient, F32 };
/// When sharded gradients are reduce-scattered under gradient accumulation:
/// once per step, after the last micro-batch (the full sum kept until
/// then), or every micro-batch (K times the bytes, no full gradient kept).
enum class ReduceEvery { Step, MicroBatch };
/// Where optimizer states or parameter shards live.
enum class Offload { None, Cpu, Nvme };
/// What the backward pass recomputes instead of keeping.
enum class ActivationCheckpointing { None, Selective, Blocks };

/// One spelling of an enum value, as flags, reports and plans write it.
template <typename E> struct Spelling {
  E value;
  const char *name;
};

/// The spellings of each enum, in the order help and diagnostics list them.
template <typename E> struct EnumSpellings;
template <> struct EnumSpellings<Placement> {
  static constexpr Spelling<Placement> all[] = {
      {Placement::Replicated, "replicated"}, {Placement::Sharded, "sharded"}};
};
template <> struct EnumSpellings<GatherUnit> {
  static constexpr Spelling<GatherUnit> all[] = {
      {GatherUnit::Parameter, "param"}, {GatherUnit::Block, "block"}};
};
template <> struct EnumSpellings<Reshard> {
  static constexpr Spelling<Reshard> all[] = {
      {Reshard::AfterForward, "after_forward"},
      {Reshard::AfterBackward, "after_backward"}};
};
template <> struct EnumSpellings<ReduceDtype> {
  static constexpr Spelling<ReduceDtype> all[] = {
      {ReduceDtype::Gradient, "gradient"}, {ReduceDtype::F32, "f32"}};
};
template <> struct EnumSpellings<ReduceEvery> {
  static constexpr Spelling<ReduceEvery> all[] = {
      {ReduceEvery::Step, "step"}, {ReduceEvery::MicroBatch, "micro-batch"}};
};
template <> struct EnumSpellings<Offload> {
  static constexpr Spelling<Offload> all[] = {{Offload::None, "none"},
                                              {Offload::Cpu, "cpu"},
                                              {Offload::Nvme, "nvme"}};
};
template <> struct EnumSpellings<ActivationCheckpointing> {
  static constexpr Spelling<ActivationCheckpointing> all[] = {
      {ActivationCheckpointing::None, "none"},
      {ActivationCheckpointing::Blocks, "blocks"},
      {ActivationCheckpointing::Selective, "selective"}};
};

/// The spelling of `value`.
template <typename E> const char *stringify(E value) {
  for (const Spelling<E> &spelling : EnumSpellings<E>::all)
    if (spelling.value == value)
      return spelling.name;
  return "?";
}

/// The value spelled `text`, or nothing for another spelling.
template <typename E> std::optional<E> parseEnum(std::string_view text) {
  for (const Spelling<E> &spelling : EnumSpellings<E>::all)
    if (text == spelling.name)
      return spelling.value;
  return std::nullopt;
}

/// "none, cpu, nvme": every spelling of E, for diagnostics.
template <typename E> std::string listSpellings() {
  std::string text;
  for (const Spelling<E> &spelling : EnumSpellings<E>::all)
    text += (text.empty() ? "" : ", ") + std::string(spelling.name);
  return text;
}

/// Where each class of training state lives under a named strategy, and how
/// its collectives are grouped.
struct StrategyPreset {
  const char *name;
  Placement optimizerStates;
  Placement gradients;
  Placement parameters;
  GatherUnit unit;
  /// Shards within groups of --shard-group-size ranks on a 2-D grid and
  /// replicates across the groups (hybrid sharding).
  bool hybrid;
  /// How much the preset shards, for `auto`'s preference of the least
  /// sharded among plans of a similar time: 0 for DDP; equal for presets
  /// that shard the same.
  int shardingRank;
  const char *summary;
};

namespace detail {
constexpr Placement R = Placement::Replicated, S = Placement::Sharded;
} // namespace detail

/// Every strategy the partitioner can apply, in the order help lists them.
inline constexpr StrategyPreset kStrategyPresets[] = {
    {"ddp", detail::R, detail::R, detail::R, GatherUnit::Parameter, false, 0,
     "data parallel: everything replicated, gradients all-reduced"},
    {"zero1", detail::S, detail::R, detail::R, GatherUnit::Parameter, false, 1,
     "optimizer states sharded; gradients reduce-scattered before the "
     "update, parameters all-gathered after it"},
    {"zero2", detail::S, detail::S, detail::R, GatherUnit::Parameter, false, 2,
     "optimizer states and gradients sharded; gradients reduce-scattered "
     "as soon as they are computed"},
    {"zero3", detail::S, detail::S, detail::S, GatherUnit::Parameter, false, 4,
     "everything sharded; each parameter gathered for its uses"},
    {"fsdp", detail::S, detail::S, detail::S, GatherUnit::Block, false, 4,
     "everything sharded; each transformer block's parameters gathered "
     "together before its forward and again before its backward"},
    // Sharded in a group, replicated across groups: between ZeRO-2 and
    // ZeRO-3 in what each rank holds.
    {"hybrid", detail::S, detail::S, detail::S, GatherUnit::Block, true, 3,
     "fsdp within groups of --shard-group-size ranks, replicated across "
     "the groups"},
};

/// The preset called `name`, or null.
inline const StrategyPreset *lookupStrategy(std::string_view name) {
  for (const StrategyPreset &preset : kStrategyPresets)
    if (name == preset.name)
      return &preset;
  return nullptr;
}

/// "ddp, zero1, ..." for diagnostics and --help.
inline std::string listStrategyNames() {
  std::string names;
  for (const StrategyPreset &preset : kStrategyPresets)
    names += (names.empty() ? "" : ", ") + std::string(preset.name);
  return names;
}

/// The strategy name that asks the cost model to choose a preset.
inline constexpr const char *kAutoStrategy = "auto";

/// "" when a plan of `preset` (null: any, as `auto` chooses) can be made
/// with these numbers, else what is wrong and what would be right, naming
/// each by its flag. The plan pass and the tools share it.
inline std::string verifyPlanNumbers(const StrategyPreset *preset,
                                     int64_t worldSize, int64_t shardGroupSize,
                                     int64_t bucketCapMb,
                                     int64_t persistenceThreshold) {
  if (worldSize < 1)
    return "--world-size must be at least 1, got " + std::to_string(worldSize);
  if (bucketCapMb < 1)
    return "--bucket-cap-mb must be at least 1, got " +
           std::to_string(bucketCapMb);
  // The passes count the cap in bytes, as an int64.
  constexpr int64_t maxCapMb = std::numeric_limits<int64_t>::max() >> 20;
  if (bucketCapMb > maxCapMb)
    return "--bucket-cap-mb must be at most " + std::to_string(maxCapMb) +
           " (8 EiB in bytes), got " + std::to_string(bucketCapMb);
  if (persistenceThreshold < 0)
    return "--persistence-threshold must be at least 0, got " +
           std::to_string(persistenceThreshold);
  if (preset && preset->hybrid &&
      (shardGroupSize < 1 || worldSize % shardGroupSize != 0))
    return std::string("--strategy=") + preset->name +
           " needs --shard-group-size dividing the world size " +
           std::to_string(worldSize) + ", got " +
           std::to_string(shardGroupSize);
  if (preset && !preset->hybrid && shardGroupSize != 0) {
    std::string hybrids;
    for (const StrategyPreset &other : kStrategyPresets)
      if (other.hybrid)
        hybrids += (hybrids.empty() ? "--strategy=" : " or --strategy=") +
                   std::string(other.name);
    return "--shard-group-size is for " + hybrids + "; '" + preset->name +
           "' shards over the whole world";
  }
  return "";
}

} // namespace autoshard::strategy

#endif // AUTOSHARD_STRATEGY_STRATEGY_H
