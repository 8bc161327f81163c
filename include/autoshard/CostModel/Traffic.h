//===- Traffic.h - bytes on the wire and the collectives of a step -*- C++
//-*-===//
//
// The bytes each rank sends per step, per collective kind, exactly as
// docs/Strategies.md states them and the runtime counts them (a ring's
// bytes, each tensor padded to n * ceil(k / n) elements), and the list of
// collective calls a plan makes, which the time model prices.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_COSTMODEL_TRAFFIC_H
#define AUTOSHARD_COSTMODEL_TRAFFIC_H

#include "autoshard/CostModel/Model.h"
#include "autoshard/CostModel/Plan.h"

#include <cstdint>
#include <vector>

namespace autoshard::cost {

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter };
const char *stringify(CollectiveKind kind);

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Bytes one rank sends in a ring over `groupSize` ranks for a tensor of
/// `elements` elements of `elementBytes` bytes:
///   all_reduce      2 (n-1) ceil(k/n) b
///   all_gather        (n-1) ceil(k/n) b
///   reduce_scatter    (n-1) ceil(k/n) b
int64_t ringBytesPerRank(CollectiveKind kind, int64_t elements,
                         int64_t groupSize, int64_t elementBytes);

/// Bytes per rank per step, by collective kind.
struct Traffic {
  int64_t allReduce = 0;
  int64_t allGather = 0;
  int64_t reduceScatter = 0;

  int64_t total() const { return allReduce + allGather + reduceScatter; }
  int64_t &operator[](CollectiveKind kind);
  bool operator==(const Traffic &other) const {
    return allReduce == other.allReduce && allGather == other.allGather &&
           reduceScatter == other.reduceScatter;
  }
};

/// The element sizes of docs/Strategies.md for a step and plan.
struct ElementSizes {
  /// b_g: a reduced gradient (the compute type, or 4 with reduce_dtype f32).
  int64_t gradient = 4;
  /// b_c: the compute copy a sharded parameter is gathered in, and what
  /// ZeRO-1/2 gather of an updated parameter: the f32 parameter in an f32
  /// step, the bf16 compute copy under mixed precision (the f32 master
  /// stays sharded with the optimizer states, as in ZeRO).
  int64_t compute = 4;
};
ElementSizes elementSizes(const ModelDescription &model, const Plan &plan);

/// The exact bytes each rank sends per step (docs/Strategies.md, "Bytes on
/// the wire"): per parameter the terms of its layout, the loss average over
/// the world, one clipping all-reduce per distinct shard group size of the
/// sharded gradients, the ZeRO-3/FSDP gathers once per micro-batch.
Traffic stepTraffic(const ModelDescription &model, const Plan &plan,
                    int64_t worldSize);

/// When a collective runs, for the overlap model.
enum class Phase {
  /// Gathers of sharded parameters before their forward readers.
  Forward,
  /// Gathers of the bf16 compute copies of ZeRO-1/2's replicated
  /// parameters under mixed precision: once per step, all of them in
  /// bucket-sized groups before the first forward reader of any, kept to
  /// their last backward reader.
  FirstForward,
  /// Gathers before backward readers, and every gradient reduction (they
  /// start as soon as their last input exists), including the loss.
  Backward,
  /// The clipping norm's all-reduce: it needs every gradient.
  AfterBackward,
  /// ZeRO-1/2's gathers of the updated f32 shards (f32 steps).
  Optimizer,
};

/// One collective call: a bucket of members reduced or gathered together.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::AllReduce;
  Phase phase = Phase::Backward;
  /// The group: `groupSize` ranks `groupStride` apart (a shard group or the
  /// world: 1; the replicas of a hybrid shard: n).
  int64_t groupSize = 1;
  int64_t groupStride = 1;
  int64_t elementBytes = 4;
  /// Each member's elements: whole tensors, or for a replica all-reduce the
  /// shards being averaged.
  std::vector<int64_t> memberElements;
  /// How many times the call runs per step: the micro-batches for gathers of
  /// sharded parameters, and for reduce-scatters of sharded gradients
  /// reduced every micro-batch; 1 otherwise.
  int64_t repeat = 1;
  /// A reduce-scatter of sharded gradients (ZeRO-2/3, FSDP): its members'
  /// full gradients live only until it completes. ZeRO-1's reduce-scatters
  /// of whole gradients, placed before the optimizer, bucket apart.
  bool releasesFullGradients = false;

  /// The ring bytes one rank sends for one run: the sum over the members.
  int64_t wireBytes() const;
  /// The packed buffer: every member padded to n * ceil(k / n) elements.
  int64_t packedBytes() const;
  /// The unpadded tensor bytes (nccl-tests' S).
  int64_t payloadBytes() const;
};

/// The calls a plan makes in one step, in the order they run, bucketed as
/// `autoshard-group-collectives` does: reductions in backward order (the
/// reverse of the parameters'), closing a bucket once it holds
/// `bucketCapBytes`; one gather per unit and phase; ZeRO-1/2's gathers of
/// updated shards bucketed in parameter order. The sum of their wireBytes
/// times repeat is stepTraffic.
std::vector<CollectiveCall> planCollectives(const ModelDescription &model,
                                            const Plan &plan,
                                            int64_t worldSize);

/// `plan` with the fields planCollectives does not read (prefetch depth,
/// overlap, the offload tiers, the checkpointing mode) at their defaults:
/// plans equal under it make the same collectives, so a search over those
/// fields plans them once. Keep in step with planCollectives.
Plan collectivesOnly(const Plan &plan);

} // namespace autoshard::cost

#endif // AUTOSHARD_COSTMODEL_TRAFFIC_H
