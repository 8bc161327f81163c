//===- Traffic.cpp - exact bytes per step and the collective calls --------===//

#include "autoshard/CostModel/Traffic.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

using namespace autoshard::cost;

const char *autoshard::cost::stringify(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  }
  return "all_reduce";
}

int64_t autoshard::cost::ringBytesPerRank(CollectiveKind kind, int64_t elements,
                                          int64_t groupSize,
                                          int64_t elementBytes) {
  if (groupSize <= 1 || elements <= 0)
    return 0;
  int64_t perStep = ceilDiv(elements, groupSize) * elementBytes;
  int64_t steps = groupSize - 1;
  return kind == CollectiveKind::AllReduce ? 2 * steps * perStep
                                           : steps * perStep;
}

int64_t &Traffic::operator[](CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return allReduce;
  case CollectiveKind::AllGather:
    return allGather;
  case CollectiveKind::ReduceScatter:
    return reduceScatter;
  }
  return allReduce;
}

ElementSizes autoshard::cost::elementSizes(const ModelDescription &model,
                                           const Plan &plan) {
  ElementSizes sizes;
  sizes.compute = computeElementBytes(model.precision);
  sizes.gradient = plan.reduceDtype == ReduceDtype::F32 ? 4 : sizes.compute;
  return sizes;
}

/// The all-reduce of one f32 over `groupSize` ranks: the loss's average
/// and the clipping norm's partial sums.
static CollectiveCall scalarAllReduce(Phase phase, int64_t groupSize) {
  CollectiveCall call;
  call.kind = CollectiveKind::AllReduce;
  call.phase = phase;
  call.groupSize = groupSize;
  call.elementBytes = 4;
  call.memberElements = {1};
  return call;
}

/// How many times a sharded parameter is gathered per micro-batch: for the
/// forward pass, and again for the backward pass if it reads the parameter
/// and the forward's copy was released.
static int64_t gathersPerMicroBatch(const ParameterTensor &p,
                                    const Plan &plan) {
  bool again = plan.reshard == Reshard::AfterForward && p.readByBackward;
  return again ? 2 : 1;
}

Traffic autoshard::cost::stepTraffic(const ModelDescription &model,
                                     const Plan &plan, int64_t worldSize) {
  const int64_t N = worldSize;
  ElementSizes b = elementSizes(model, plan);
  Traffic traffic;
  // L: the loss, one f32 averaged over the world.
  traffic.allReduce += ringBytesPerRank(CollectiveKind::AllReduce, 1, N, 4);
  std::set<int64_t> clipGroups;
  for (const ParameterTensor &p : model.parameters) {
    const Layout layout = plan.layoutOf(p);
    const int64_t k = p.elements;
    if (layout.optimizerStates == Placement::Replicated) {
      traffic.allReduce +=
          ringBytesPerRank(CollectiveKind::AllReduce, k, N, b.gradient);
      continue;
    }
    const int64_t n = layout.shardGroupSize, R = N / n;
    clipGroups.insert(n);
    // Sharded gradients reduced every micro-batch are scattered K times.
    const int64_t scatters = layout.gradients == Placement::Sharded &&
                                     plan.reduceEvery == ReduceEvery::MicroBatch
                                 ? model.microBatches
                                 : 1;
    traffic.reduceScatter +=
        scatters *
        ringBytesPerRank(CollectiveKind::ReduceScatter, k, n, b.gradient);
    // The replicas of a hybrid shard average it across the shard groups.
    traffic.allReduce += ringBytesPerRank(CollectiveKind::AllReduce,
                                          ceilDiv(k, n), R, b.gradient);
    if (layout.parameters == Placement::Replicated) {
      traffic.allGather +=
          ringBytesPerRank(CollectiveKind::AllGather, k, n, b.compute);
      continue;
    }
    traffic.allGather +=
        model.microBatches * gathersPerMicroBatch(p, plan) *
        ringBytesPerRank(CollectiveKind::AllGather, k, n, b.compute);
  }
  // C: the clipping norm, one f32 summed over each shard group size.
  if (model.clipGradients)
    for (int64_t n : clipGroups)
      traffic.allReduce += ringBytesPerRank(CollectiveKind::AllReduce, 1, n, 4);
  return traffic;
}

int64_t CollectiveCall::wireBytes() const {
  int64_t bytes = 0;
  for (int64_t k : memberElements)
    bytes += ringBytesPerRank(kind, k, groupSize, elementBytes);
  return bytes;
}

int64_t CollectiveCall::packedBytes() const {
  int64_t bytes = 0;
  for (int64_t k : memberElements)
    bytes +=
        groupSize * ceilDiv(k, std::max<int64_t>(groupSize, 1)) * elementBytes;
  return bytes;
}

int64_t CollectiveCall::payloadBytes() const {
  int64_t bytes = 0;
  for (int64_t k : memberElements)
    bytes += k * elementBytes;
  return bytes;
}

namespace {

/// Merges collectives of one key into buckets the way
/// autoshard-group-collectives does: one open bucket per key, closed once it
/// holds the cap, placed where its last member was.
class Bucketer {
public:
  Bucketer(std::vector<CollectiveCall> &calls, int64_t capBytes)
      : calls(calls), capBytes(capBytes) {}

  void add(CollectiveKind kind, Phase phase, int64_t groupSize,
           int64_t groupStride, int64_t elementBytes, int64_t elements,
           bool releasesFullGradients = false) {
    if (groupSize <= 1)
      return;
    Key key{int(kind),   int(phase),   groupSize,
            groupStride, elementBytes, releasesFullGradients};
    // A step has a handful of kinds of bucket open at once.
    auto it = std::find_if(buckets.begin(), buckets.end(),
                           [&](const Open &open) { return open.key == key; });
    if (it == buckets.end()) {
      it = buckets.insert(buckets.end(), Open{key});
      it->call.kind = kind;
      it->call.phase = phase;
      it->call.groupSize = groupSize;
      it->call.groupStride = groupStride;
      it->call.elementBytes = elementBytes;
      it->call.releasesFullGradients = releasesFullGradients;
    }
    it->call.memberElements.push_back(elements);
    it->bytes += elements * elementBytes;
    it->lastMember = ++clock;
    if (it->bytes >= capBytes)
      close(it);
  }

  /// Closes every open bucket, in the order of their last members.
  void closeAll() {
    std::sort(buckets.begin(), buckets.end(),
              [](const Open &x, const Open &y) {
                return x.lastMember < y.lastMember;
              });
    for (Open &open : buckets)
      calls.push_back(std::move(open.call));
    buckets.clear();
  }

private:
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t, bool>;
  struct Open {
    Key key;
    CollectiveCall call;
    int64_t bytes = 0;
    int64_t lastMember = 0;
  };

  void close(std::vector<Open>::iterator it) {
    calls.push_back(std::move(it->call));
    buckets.erase(it);
  }

  std::vector<CollectiveCall> &calls;
  int64_t capBytes;
  std::vector<Open> buckets;
  int64_t clock = 0;
};

/// One gather per unit, members in the given order of parameters: under
/// `block` units a block's parameters together, otherwise each parameter
/// alone.
void addUnitGathers(const ModelDescription &model, const Plan &plan,
                    const std::vector<size_t> &order, Phase phase,
                    int64_t elementBytes, std::vector<CollectiveCall> &calls) {
  // The call of each block, by block and group size.
  std::map<std::pair<int64_t, int64_t>, size_t> blockCall;
  for (size_t i : order) {
    const ParameterTensor &p = model.parameters[i];
    const Layout layout = plan.layoutOf(p);
    if (layout.shardGroupSize <= 1)
      continue;
    size_t index = calls.size();
    if (layout.unit == GatherUnit::Block && p.block >= 0)
      index = blockCall.try_emplace({p.block, layout.shardGroupSize}, index)
                  .first->second;
    if (index == calls.size()) {
      CollectiveCall call;
      call.kind = CollectiveKind::AllGather;
      call.phase = phase;
      call.groupSize = layout.shardGroupSize;
      call.elementBytes = elementBytes;
      call.repeat = model.microBatches;
      calls.push_back(std::move(call));
    }
    calls[index].memberElements.push_back(p.elements);
  }
}

} // namespace

Plan autoshard::cost::collectivesOnly(const Plan &plan) {
  Plan only = plan;
  const Plan defaults;
  only.prefetchDepth = defaults.prefetchDepth;
  only.overlap = defaults.overlap;
  only.optimizerOffload = defaults.optimizerOffload;
  only.parameterOffload = defaults.parameterOffload;
  only.checkpointing = defaults.checkpointing;
  return only;
}

std::vector<CollectiveCall>
autoshard::cost::planCollectives(const ModelDescription &model,
                                 const Plan &plan, int64_t worldSize) {
  const int64_t N = worldSize;
  ElementSizes b = elementSizes(model, plan);
  std::vector<CollectiveCall> calls;
  const size_t count = model.parameters.size();
  auto shardedParameters = [&](size_t i) {
    return plan.layoutOf(model.parameters[i]).parameters == Placement::Sharded;
  };
  // ZeRO-1/2 (replicated parameters, sharded states) gather each updated
  // parameter once per step, in bucket-sized groups: under mixed precision
  // the bf16 copies of the masters sharded with the states, first, before
  // the first forward reader of any; in f32 the updated shards, after the
  // optimizer.
  const Phase updatesPhase = model.precision == Precision::BF16
                                 ? Phase::FirstForward
                                 : Phase::Optimizer;
  auto gatherUpdates = [&](Phase phase) {
    if (phase != updatesPhase)
      return;
    Bucketer updates(calls, plan.bucketCapBytes);
    for (const ParameterTensor &p : model.parameters) {
      const Layout layout = plan.layoutOf(p);
      if (layout.optimizerStates == Placement::Sharded &&
          layout.parameters == Placement::Replicated)
        updates.add(CollectiveKind::AllGather, phase, layout.shardGroupSize, 1,
                    b.compute, p.elements);
    }
    updates.closeAll();
  };

  // Forward: each unit of sharded parameters before its first reader.
  gatherUpdates(Phase::FirstForward);
  std::vector<size_t> forward;
  for (size_t i = 0; i < count; ++i)
    if (shardedParameters(i))
      forward.push_back(i);
  addUnitGathers(model, plan, forward, Phase::Forward, b.compute, calls);

  // Backward: the loss, then in reverse parameter order the gathers of the
  // parameters the backward pass reads, and the gradient reductions.
  if (N > 1)
    calls.push_back(scalarAllReduce(Phase::Backward, N));
  std::vector<size_t> backwardGathers;
  if (plan.reshard == Reshard::AfterForward)
    for (size_t i = count; i-- > 0;)
      if (shardedParameters(i) && model.parameters[i].readByBackward)
        backwardGathers.push_back(i);
  addUnitGathers(model, plan, backwardGathers, Phase::Backward, b.compute,
                 calls);

  const size_t firstReduction = calls.size();
  Bucketer reductions(calls, plan.bucketCapBytes);
  for (size_t i = count; i-- > 0;) {
    const ParameterTensor &p = model.parameters[i];
    const Layout layout = plan.layoutOf(p);
    if (layout.optimizerStates == Placement::Replicated) {
      reductions.add(CollectiveKind::AllReduce, Phase::Backward, N, 1,
                     b.gradient, p.elements);
      continue;
    }
    const int64_t n = layout.shardGroupSize, R = N / n;
    reductions.add(CollectiveKind::ReduceScatter, Phase::Backward, n, 1,
                   b.gradient, p.elements,
                   layout.gradients == Placement::Sharded);
    reductions.add(CollectiveKind::AllReduce, Phase::Backward, R, n, b.gradient,
                   ceilDiv(p.elements, n));
  }
  reductions.closeAll();
  // Reduced every micro-batch, the sharded gradients' reduce-scatters run K
  // times (their buckets close at each micro-batch's end).
  if (plan.reduceEvery == ReduceEvery::MicroBatch)
    for (size_t i = firstReduction; i < calls.size(); ++i)
      if (calls[i].releasesFullGradients)
        calls[i].repeat = model.microBatches;

  // After the backward pass: the clipping norm over each shard group size.
  if (model.clipGradients) {
    std::set<int64_t> groups;
    for (const ParameterTensor &p : model.parameters) {
      const Layout layout = plan.layoutOf(p);
      if (layout.optimizerStates == Placement::Sharded &&
          layout.shardGroupSize > 1)
        groups.insert(layout.shardGroupSize);
    }
    for (int64_t n : groups)
      calls.push_back(scalarAllReduce(Phase::AfterBackward, n));
  }

  // The optimizer: ZeRO-1/2's gathers in f32.
  gatherUpdates(Phase::Optimizer);
  return calls;
}
