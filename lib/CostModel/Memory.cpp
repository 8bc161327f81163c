//===- Memory.cpp - per-rank memory by category ---------------------------===//

#include "autoshard/CostModel/Memory.h"
#include "autoshard/CostModel/Traffic.h"

#include <algorithm>
#include <cstdio>

using namespace autoshard::cost;

int64_t autoshard::cost::activationBytesPerRank(const ModelDescription &model,
                                                const Plan &plan,
                                                int64_t worldSize,
                                                bool *estimated,
                                                bool *unknown) {
  *estimated = false;
  *unknown = false;
  for (const ActivationMeasurement &m : model.activationMeasurements)
    if (m.worldSize == worldSize && m.checkpointing == plan.checkpointing)
      return m.bytesPerRank;
  if (!model.transformer) {
    *unknown = true;
    return 0;
  }
  *estimated = true;
  // Every preset splits the batch over all ranks; each micro-batch holds a
  // K-th of a rank's rows.
  int64_t rows = std::max<int64_t>(
      model.batchRows / (worldSize * std::max<int64_t>(model.microBatches, 1)),
      1);
  return estimateTransformerActivationBytes(
      *model.transformer, rows, model.sequenceLength, model.precision,
      plan.checkpointing);
}

/// Elements of `k` this rank holds under `placement` over `n` ranks.
static int64_t localElements(int64_t k, Placement placement, int64_t n) {
  return placement == Placement::Sharded ? ceilDiv(k, std::max<int64_t>(n, 1))
                                         : k;
}

/// The largest sum of `window` consecutive values.
static int64_t largestWindow(const std::vector<int64_t> &values,
                             int64_t window) {
  window = std::max<int64_t>(window, 1);
  int64_t best = 0, sum = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    sum += values[i];
    if (int64_t(i) >= window)
      sum -= values[i - window];
    best = std::max(best, sum);
  }
  return best;
}

/// The `count` largest values, summed.
static int64_t largestValues(std::vector<int64_t> values, int64_t count) {
  std::sort(values.rbegin(), values.rend());
  int64_t sum = 0;
  for (int64_t i = 0; i < count && i < int64_t(values.size()); ++i)
    sum += values[i];
  return sum;
}

MemoryEstimate autoshard::cost::estimateMemory(const ModelDescription &model,
                                               const Plan &plan,
                                               const ClusterSpec &cluster) {
  return estimateMemory(model, plan, cluster,
                        planCollectives(model, plan, cluster.worldSize()));
}

MemoryEstimate
autoshard::cost::estimateMemory(const ModelDescription &model, const Plan &plan,
                                const ClusterSpec &cluster,
                                const std::vector<CollectiveCall> &calls) {
  const int64_t N = cluster.worldSize();
  const ElementSizes b = elementSizes(model, plan);
  const int64_t states = optimizerStatesPerElement(model.optimizer);
  const bool bf16 = model.precision == Precision::BF16;
  const bool offloadOptimizer = plan.optimizerOffload != Offload::None;
  const bool offloadParameters = plan.parameterOffload != Offload::None;
  // Collectives that run at once: the in-use one and `depth` ahead, or one.
  const int64_t inFlight =
      plan.overlap && plan.prefetchDepth > 0 ? plan.prefetchDepth + 1 : 1;

  MemoryEstimate estimate;
  MemoryBreakdown &device = estimate.device;
  HostFootprint &host = estimate.host;
  auto tier = [&](Offload where) -> int64_t & {
    return where == Offload::Cpu ? host.hostBytes : host.nvmeBytes;
  };

  int64_t largestLocalState = 0;
  int64_t offloadedGradientBytes = 0, updatedBytes = 0;
  // The whole compute copies a replicated mixed-precision step casts into
  // its arena every step (the measured DDP plan's).
  int64_t wholeComputeCopies = 0;
  for (const ParameterTensor &p : model.parameters) {
    const Layout layout = plan.layoutOf(p);
    const int64_t n = layout.shardGroupSize, k = p.elements;
    const int64_t params = localElements(k, layout.parameters, n);
    const int64_t grads = localElements(k, layout.gradients, n);
    const int64_t optStates = localElements(k, layout.optimizerStates, n);
    if (bf16)
      wholeComputeCopies += b.compute * k;

    // Parameters: in f32 the parameter itself; under mixed precision the
    // bf16 compute copy, placed as the parameters are (the f32 master lives
    // with the optimizer states, placed as they are: ZeRO's layout, which
    // the partition pass builds).
    if (!offloadParameters) {
      if (!bf16)
        device.parameters += 4 * params;
      if (bf16)
        device.parameters += b.compute * params;
    } else if (bf16) {
      // The compute copy of the shard waits on the host or NVMe; the f32
      // master shard is with the offloaded optimizer states.
      tier(plan.parameterOffload) += b.compute * params;
    }

    // Optimizer states, with the f32 master weights of a bf16 step.
    int64_t stateBytes = 4 * states * optStates;
    if (bf16)
      stateBytes += 4 * optStates;
    if (!offloadOptimizer) {
      device.optimizerStates += stateBytes;
    } else {
      // ZeRO-Offload (arXiv:2101.06840, section 4.1): the host keeps the f32
      // states, an f32 master copy and the f32 gradient of its elements.
      int64_t onTier = 4 * states * optStates + 4 * optStates;
      tier(plan.optimizerOffload) += onTier;
      host.hostBytes += 4 * optStates;
      largestLocalState = std::max(largestLocalState, onTier);
    }

    // Gradients until the optimizer: whole, or the shard (which goes to the
    // host right away when the optimizer runs there). Accumulated over
    // micro-batches and reduced once per step, a sharded gradient is kept
    // whole until the last micro-batch, in the reduce type (a bf16 one is
    // accumulated in f32 when the reduction is); reduced every micro-batch,
    // its shard accumulates in f32.
    bool shardedGradients = layout.gradients == Placement::Sharded;
    bool accumulates = shardedGradients && model.microBatches > 1;
    if (accumulates && plan.reduceEvery == ReduceEvery::Step)
      device.gradients += b.gradient * k;
    else if (accumulates && !offloadOptimizer)
      device.gradients += 4 * grads;
    else if (!(shardedGradients && offloadOptimizer))
      device.gradients += b.gradient * grads;
    offloadedGradientBytes += b.gradient * optStates;
    updatedBytes += b.compute * optStates;
  }

  // Gathered parameters and the full gradients of open buckets, from the
  // collectives the plan makes.
  std::vector<int64_t> forwardUnits, backwardUnits, scatterBuckets;
  int64_t largestGather = 0, largestReduction = 0;
  for (const CollectiveCall &call : calls) {
    bool gather = call.kind == CollectiveKind::AllGather;
    if (gather && call.phase == Phase::Forward)
      forwardUnits.push_back(call.payloadBytes());
    if (gather && call.phase == Phase::Backward)
      backwardUnits.push_back(call.payloadBytes());
    if (call.releasesFullGradients)
      scatterBuckets.push_back(call.payloadBytes());
    int64_t &largest = gather ? largestGather : largestReduction;
    largest = std::max(largest, call.packedBytes());
  }
  if (plan.reshard == Reshard::AfterForward) {
    // The unit in use; a prefetched one is its gather's packed buffer until
    // it completes (prefetchedGatherBuffers).
    device.gatheredParameters = std::max(largestValues(forwardUnits, 1),
                                         largestValues(backwardUnits, 1));
  } else {
    // Kept from the forward gather to the last backward reader: every
    // parameter the backward pass reads, the unit in use among them.
    int64_t kept = 0;
    for (const ParameterTensor &p : model.parameters)
      if (plan.layoutOf(p).parameters == Placement::Sharded &&
          p.readByBackward && plan.layoutOf(p).shardGroupSize > 1)
        kept += b.compute * p.elements;
    device.gatheredParameters =
        std::max(kept, largestValues(forwardUnits, 1));
  }
  // A bucket's full gradients live until its reduce-scatter is waited: the
  // open bucket and those in flight.
  device.pendingGradients = largestWindow(scatterBuckets, inFlight);
  // Packed buffers: one per collective in flight. Gathers and reductions
  // run at once only where the backward pass gathers parameters (ZeRO-3,
  // FSDP); ZeRO-1/2 gather the updated shards after the last reduction.
  bool concurrent = !backwardUnits.empty();
  int64_t inFlightBuffers =
      concurrent ? largestGather + largestReduction
                 : std::max(largestGather, largestReduction);
  device.communicationBuffers =
      plan.overlap && plan.prefetchDepth > 0
          ? plan.prefetchDepth * inFlightBuffers
          : std::max(largestGather, largestReduction);
  // At the activations' peak, the end of the forward pass, the next
  // units' gathers are in flight; kept until the backward pass, every
  // unit is gathered by then.
  if (!forwardUnits.empty() && plan.overlap && plan.prefetchDepth > 0 &&
      plan.reshard == Reshard::AfterForward)
    device.prefetchedGatherBuffers = plan.prefetchDepth * largestGather;

  device.activations =
      activationBytesPerRank(model, plan, N, &estimate.activationsEstimated,
                             &estimate.activationsUnknown);
  for (const ActivationMeasurement &m : model.activationMeasurements)
    if (m.worldSize == N && m.checkpointing == plan.checkpointing &&
        m.stepBytesPerRank > 0)
      device.stepBuffers =
          std::max<int64_t>(m.stepBytesPerRank - wholeComputeCopies, 1);

  // Offload staging: a bucket of gradients down and of updated parameters
  // up; the shards of the units being fetched; pinned buffers for NVMe.
  if (offloadOptimizer) {
    device.offloadStaging +=
        std::min(plan.bucketCapBytes, offloadedGradientBytes);
    if (!offloadParameters)
      device.offloadStaging += std::min(plan.bucketCapBytes, updatedBytes);
    if (plan.optimizerOffload == Offload::Nvme)
      host.pinnedStagingBytes += 2 * largestLocalState;
  }
  if (offloadParameters) {
    std::vector<int64_t> unitShards;
    for (const CollectiveCall &call : calls)
      if (call.kind == CollectiveKind::AllGather &&
          call.phase == Phase::Forward)
        unitShards.push_back(call.packedBytes() / call.groupSize);
    int64_t fetching = largestValues(unitShards, inFlight);
    device.offloadStaging += fetching;
    if (plan.parameterOffload == Offload::Nvme)
      host.pinnedStagingBytes += 2 * largestValues(unitShards, 1);
  }
  return estimate;
}

std::string autoshard::cost::formatBytes(int64_t bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  char text[64];
  if (unit == 0)
    std::snprintf(text, sizeof(text), "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(text, sizeof(text), "%.2f %s (%lld bytes)", value,
                  units[unit], static_cast<long long>(bytes));
  return text;
}
