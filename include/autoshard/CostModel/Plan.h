//===- Plan.h - the plans the cost model scores -----------------*- C++ -*-===//
//
// A candidate plan as the cost model scores it: the placements of
// `#train.plan` (docs/Strategies.md) in the vocabulary of
// autoshard/Strategy/Strategy.h, plus the axes that live in other passes
// (offload, prefetch depth, overlap, activation checkpointing), so that one
// struct names everything a candidate plan decides.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_COSTMODEL_PLAN_H
#define AUTOSHARD_COSTMODEL_PLAN_H

#include "autoshard/CostModel/Hardware.h"
#include "autoshard/CostModel/Model.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autoshard::cost {

using strategy::GatherUnit;
using strategy::Offload;
using strategy::Placement;
using strategy::ReduceDtype;
using strategy::ReduceEvery;
using strategy::Reshard;
using strategy::stringify;

/// How one parameter, its gradient and its optimizer states are placed.
struct Layout {
  Placement optimizerStates = Placement::Replicated;
  Placement gradients = Placement::Replicated;
  Placement parameters = Placement::Replicated;
  /// Ranks one shard group spans (`n`); the replicas are worldSize / n.
  /// Ignored when everything is replicated.
  int64_t shardGroupSize = 1;
  GatherUnit unit = GatherUnit::Parameter;
};

struct Plan {
  /// The preset it came from ("ddp", "zero3", "hybrid", ...) or "custom".
  std::string name = "custom";
  Layout layout;
  /// Parameters placed otherwise than `layout` (`#train.param_group`s after
  /// the compiler resolved their regular expressions), by name.
  std::map<std::string, Layout> parameterLayouts;
  /// `--persistence-threshold`: when `layout` shards parameters, those of
  /// at most this many elements that `parameterLayouts` does not name keep
  /// their parameters whole, the rest of `layout` unchanged (0: none). A
  /// rule, not entries of `parameterLayouts`: the search scores thousands
  /// of such plans.
  int64_t persistenceThreshold = 0;

  Reshard reshard = Reshard::AfterForward;
  ReduceDtype reduceDtype = ReduceDtype::Gradient;
  ReduceEvery reduceEvery = ReduceEvery::Step;
  /// Grouping closes a bucket once it holds this many bytes.
  int64_t bucketCapBytes = int64_t(25) << 20;
  /// Gathers in flight ahead of the one in use, reductions in flight at once
  /// (`autoshard-schedule-collectives`); 0 runs collectives where they are.
  int64_t prefetchDepth = 1;
  /// Whether collectives overlap compute at all (`--overlap`).
  bool overlap = true;

  Offload optimizerOffload = Offload::None;
  Offload parameterOffload = Offload::None;
  ActivationCheckpointing checkpointing = ActivationCheckpointing::None;

  /// Where `parameter` lives: its entry of `parameterLayouts`, else
  /// `layout` with the persistence rule applied.
  Layout layoutOf(const ParameterTensor &parameter) const;
};

/// The named strategies of `shard-opt --strategy`, in help order
/// (strategy::kStrategyPresets).
const std::vector<std::string> &presetNames();

/// The plan a preset means on `worldSize` ranks, with the compiler's
/// defaults for every other field. `hybrid` shards within groups of
/// `shardGroupSize` ranks; the other presets ignore it. Empty for an unknown
/// name.
std::optional<Plan> presetPlan(const std::string &name, int64_t worldSize,
                               int64_t shardGroupSize = 0);

/// "" when `plan` is valid for `model` on `cluster`, else every rule it
/// breaks, naming what would be valid: group sizes that divide the world,
/// sharded gradients only with sharded states, sharded parameters only with
/// sharded gradients, reduction every micro-batch only with sharded
/// gradients, parameter offload only of sharded parameters and with the
/// optimizer offloaded, offload only on a device with a host link.
std::string verifyPlan(const Plan &plan, const ModelDescription &model,
                       const ClusterSpec &cluster);

/// The axes candidate plans vary along.
struct CandidateSpace {
  std::vector<std::string> presets = presetNames();
  /// Shard group sizes of `hybrid`; empty: the ranks of one node, when that
  /// is more than one rank and fewer than the world.
  std::vector<int64_t> hybridGroupSizes;
  std::vector<Reshard> reshards = {Reshard::AfterForward,
                                   Reshard::AfterBackward};
  std::vector<int64_t> bucketCapsBytes = {int64_t(25) << 20};
  std::vector<int64_t> prefetchDepths = {1};
  /// Per-layer mixes for plans that shard parameters: thresholds at or
  /// below which a parameter stays whole (gradients and states still
  /// sharded), as DeepSpeed's stage3_param_persistence_threshold; 0 adds
  /// the plain plan.
  std::vector<int64_t> persistenceThresholds = {0};
  std::vector<ActivationCheckpointing> checkpointing = {
      ActivationCheckpointing::None, ActivationCheckpointing::Selective,
      ActivationCheckpointing::Blocks};
  /// Add offload variants: optimizer states to CPU or NVMe, and with them
  /// the sharded parameters to the same tier.
  bool offload = true;
  /// The tiers tried for the optimizer states and for sharded parameters
  /// (a user's --offload or --offload-params pins one).
  std::vector<Offload> optimizerOffloads = {Offload::None, Offload::Cpu,
                                            Offload::Nvme};
  std::vector<Offload> parameterOffloads = {Offload::None, Offload::Cpu,
                                            Offload::Nvme};
  ReduceDtype reduceDtype = ReduceDtype::Gradient;
  /// When sharded gradients are reduced; MicroBatch is tried only for
  /// plans that shard gradients, and only with more than one micro-batch.
  std::vector<ReduceEvery> reduceEvery = {ReduceEvery::Step};
};

/// Every valid plan of the space, presets in order, then the variants.
/// Reshard varies only where parameters are sharded.
std::vector<Plan> enumerateCandidatePlans(const ModelDescription &model,
                                          const ClusterSpec &cluster,
                                          const CandidateSpace &space = {});

/// Whether the plan shards some gradient (its own layout or a group's).
bool shardsGradients(const Plan &plan);

/// One line naming the plan's choices: "fsdp reshard=after_forward
/// bucket=25MiB prefetch=1 offload=none/none checkpoint=none".
std::string describePlan(const Plan &plan);

} // namespace autoshard::cost

#endif // AUTOSHARD_COSTMODEL_PLAN_H
