//===- Memory.cpp - per-rank memory by category ---------------------------===//

#include "autoshard/CostModel/Memory.h"
#include "autoshard/CostModel/Traffic.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>
#include <tuple>

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

/// The step's own buffers at `plan`'s peak, from the moments of the
/// measured DDP step (docs/CostModel.md, "Step buffers"). The measured step
/// overlaps its reductions as the plans do, so a moment's other bytes hold
/// the packed buffers in flight. A moment before any gradient is held (the
/// forward pass, the loss) holds, beside its other bytes, what the plan
/// gathers there: the parameters in use, or every parameter kept for the
/// backward pass, and the prefetched gathers' packed buffers. A later
/// moment holds the plan's share of the gradients held so far (all of
/// them, or its shards once their bucket is reduced), the open bucket's
/// full gradients and the parameters in use (parameters kept until the
/// backward pass are released as their gradients come, read here as in
/// proportion). Parameter fetches from the host run in both passes.
namespace {
/// What a plan adds to, or keeps of, the measured DDP step's buffers.
struct PlanHolds {
  /// Of the gradients the DDP step holds until the optimizer, the fraction
  /// this plan holds once their bucket is reduced (1: all of them).
  double keptGradients = 1;
  /// The full gradients of the open bucket, which a plan that reduces them
  /// away holds until the bucket is packed.
  int64_t pendingGradients = 0;
  /// Under DDP with the gradients streamed to the host: how many buckets'
  /// reduced gradients have their copies to the host in flight, beside
  /// those not reduced yet, every one of which the plan holds (-1: not
  /// streamed).
  int64_t bucketsCopying = -1;
  /// The largest unit the plan gathers (0: it gathers none).
  int64_t unitInUse = 0;
  /// The compute copies this plan casts whole into the step's buffers, as
  /// the measured step does (its `parameters` count them), and their
  /// fraction of the measured step's.
  int64_t residentCopies = 0;
  double residentFraction = 1;
  /// Parameters on their way from the host, in both passes, and how many
  /// fetches run at once.
  int64_t fetching = 0;
  int64_t fetchesInFlight = 1;
  /// Whether those are a copy of each parameter for each reader (nothing
  /// is gathered: DDP's compute copies kept on the host), each freed once
  /// its reader has run.
  bool fetchesPerReader = false;
  /// The gathers the backward pass has in flight beside the parameters in
  /// use: their packed buffers and the parameters they gather into.
  int64_t backwardPrefetch = 0;
  /// How much larger the plan's bucket cap is than the measured step's.
  int64_t largerCapBytes = 0;
  /// The compute copies of parameter shards (`parameters` counts them):
  /// cast at the top of the step, freed after their last gather, in the
  /// backward pass as its gradients come (in the forward pass, where the
  /// gathered parameters are kept until the backward pass).
  int64_t shardCopies = 0;
};
} // namespace

/// The step's own buffers at `plan`'s peak (what total() adds to the kept
/// states), with the peak's breakdown by category (`device`'s kept states
/// included) and the gradients held then.
static int64_t stepPeakOf(const ActivationMeasurement &m,
                          const MemoryBreakdown &device, const Plan &plan,
                          const PlanHolds &holds, PeakBreakdown &atPeak,
                          int64_t &gradientsAtPeak) {
  int64_t live = 0;
  for (const StepMoment &moment : m.stepMoments)
    live = std::max(live, moment.heldGradients + moment.others);
  // What the arena holds beyond its live bytes (alignment, fragmentation).
  const int64_t fragmentation = std::max<int64_t>(m.stepBytesPerRank - live, 0);
  int64_t allHeld = 0;
  for (const StepMoment &moment : m.stepMoments)
    allHeld = std::max(allHeld, moment.heldGradients);
  int64_t peak = 0;
  gradientsAtPeak = 0;
  atPeak = PeakBreakdown();
  for (const StepMoment &moment : m.stepMoments) {
    // The moment as this plan holds it, by category; the peak is the
    // moment with the most bytes.
    PeakBreakdown at;
    at.activations = moment.activations;
    at.gradients = moment.summingGradients;
    at.communication = moment.communication;
    at.batch = moment.batch;
    // The parameters' buffers, with the compute copies this plan casts as
    // the measured step does.
    at.parameters =
        moment.parameterBuffers - moment.computeCopies +
        int64_t(double(moment.computeCopies) * holds.residentFraction);
    at.other = moment.others - moment.activations - moment.parameterBuffers -
               moment.summingGradients - moment.communication - moment.batch;
    // The fetches in flight: for the parameters in use and those
    // prefetched, at most that many times the bytes in use. A copy made
    // for each reader is on the device while that reader runs, beside the
    // next ones in flight. A parameter read across the loss from NVMe is
    // read again for the backward pass: in flight at the loss when
    // fetches are prefetched (more than one in flight), not read yet when
    // each waits for its use.
    if (holds.fetchesPerReader)
      at.offloadStaging = std::min(
          holds.fetching, moment.paramBytesRead + (holds.fetchesInFlight - 1) *
                                                      moment.nextParamBytesRead);
    else if (moment.paramBytesInUse > 0 &&
             !(moment.onlyAcrossLoss &&
               plan.parameterOffload == Offload::Nvme &&
               holds.fetchesInFlight == 1))
      at.offloadStaging = std::min(holds.fetching, moment.paramBytesInUse *
                                                       holds.fetchesInFlight);
    // A plan that gathers parameters for their use holds those in use:
    // whole blocks where it gathers by block.
    const int64_t gatheredInUse = holds.unitInUse == 0 ? 0
                                  : plan.layout.unit == GatherUnit::Block
                                      ? moment.unitBytesInUse
                                      : moment.paramBytesInUse;
    int64_t kept = 0;
    if (moment.heldGradients == 0) {
      // Kept until the backward pass, every gathered parameter is held at
      // the forward pass's end, and the shards' copies are freed by then.
      if (plan.reshard == Reshard::AfterForward) {
        at.gatheredParameters = gatheredInUse;
      } else {
        at.gatheredParameters = device.gatheredParameters;
        at.parameters -= holds.shardCopies;
      }
      at.communication += device.prefetchedGatherBuffers;
    } else {
      int64_t gathered = gatheredInUse;
      if (plan.reshard == Reshard::AfterBackward && allHeld > 0)
        gathered = std::max<int64_t>(
            gathered, int64_t(double(device.gatheredParameters) *
                              (1.0 - double(moment.heldGradients) /
                                         double(allHeld))));
      kept = int64_t(double(moment.heldGradients) * holds.keptGradients);
      // The full gradients not reduced yet: those of the measured step's
      // buckets (as many, of the same cap), and what a larger cap adds.
      int64_t pending = std::min(moment.heldGradients, holds.pendingGradients);
      if (moment.unreducedGradients >= 0)
        pending =
            std::min(pending, moment.unreducedGradients + holds.largerCapBytes);
      // Streamed under DDP, the measured step's buckets are this plan's:
      // it holds each gradient until its reduction and its copy are done.
      if (moment.unreducedGradients >= 0 && holds.bucketsCopying >= 0)
        pending = std::min(
            moment.heldGradients,
            moment.unreducedGradients + holds.largerCapBytes +
                holds.bucketsCopying *
                    std::max<int64_t>(moment.lastReducedGradients, 0));
      at.gradients += kept + pending;
      at.gatheredParameters = gathered;
      // The next gathers in flight: their packed buffers and what they
      // gather into, counted with the gathered parameters. A plan that
      // gathers whole blocks gathers one in pieces of the cap: the block
      // in use, or the piece in use and the next one in flight, whichever
      // is more (measured on megatron-1t's FSDP, with and without the
      // parameters' copies on the host).
      if (moment.paramBytesInUse > 0) {
        if (plan.layout.unit == GatherUnit::Block && holds.unitInUse > 0)
          at.gatheredParameters = std::max(
              gathered, moment.paramBytesInUse + holds.backwardPrefetch);
        else
          at.gatheredParameters += holds.backwardPrefetch;
      }
      // The shards' compute copies already freed.
      if (holds.shardCopies > 0 && allHeld > 0)
        at.parameters -=
            plan.reshard == Reshard::AfterBackward
                ? holds.shardCopies
                : int64_t(double(holds.shardCopies) *
                          double(moment.heldGradients) / double(allHeld));
    }
    if (at.total() > peak) {
      peak = at.total();
      gradientsAtPeak = kept;
      atPeak = at;
    }
  }
  // The kept states beside them; the compute copies cast whole are among
  // the parameters of both.
  atPeak.parameters += device.parameters - holds.residentCopies;
  atPeak.masterWeights = device.masterWeights;
  atPeak.optimizerStates = device.optimizerStates;
  atPeak.other += fragmentation;
  const int64_t unclamped = peak + fragmentation - holds.residentCopies;
  // Clamped to one byte (nothing measured), the step's buffers are that
  // byte, which no category names.
  if (unclamped < 1)
    atPeak.other += 1 - unclamped;
  return std::max<int64_t>(unclamped, 1);
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
  // The compiled step copies an offloaded optimizer's gradients to the
  // host as soon as they are reduced, and sums the clipping norm's squares
  // of each there: none waits on the device for the optimizer (the
  // measured rule is for one micro-batch). Hybrid's shards are not
  // reduced then: their average over the replicas is issued before their
  // first reader, after the backward pass, and they wait for it.
  const bool averagesShardsOverReplicas =
      plan.layout.gradients == Placement::Sharded &&
      plan.layout.shardGroupSize < N;
  const bool streamsGradients = offloadOptimizer &&
                                model.microBatches == 1 &&
                                !averagesShardsOverReplicas;
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
  // Every gradient whole, as the measured DDP step holds them until the
  // optimizer, and what this plan holds of them once reduced.
  int64_t fullGradientBytes = 0, heldGradientBytes = 0;
  // The compute copies, each copied to the device whole for its use.
  std::vector<int64_t> computeCopies;
  // The whole compute copies a replicated mixed-precision step casts into
  // its arena every step (the measured DDP plan's), and those this plan
  // casts so.
  int64_t wholeComputeCopies = 0, residentCopies = 0;
  // The compute copies of parameter shards, cast into the step's buffers.
  int64_t shardCopies = 0;
  // Whether parameters wait on the host or NVMe and come to the device for
  // each use.
  bool parametersOnHost = false;
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
    // Under mixed precision with the optimizer offloaded, the compute
    // copies are cast on the host beside the f32 masters and copied to the
    // device for each use, as offloaded parameters are; ZeRO-1/2 instead
    // gather whole copies on the device from the shards the host updated.
    const bool onHost =
        offloadParameters ||
        (bf16 && offloadOptimizer &&
         (layout.parameters == Placement::Sharded ||
          layout.optimizerStates == Placement::Replicated));
    parametersOnHost |= onHost;
    // Replicated, or sharded over a group of one rank: cast whole into the
    // step's buffers as the measured DDP step does.
    if (bf16 && !onHost &&
        (layout.parameters == Placement::Replicated || n == 1))
      residentCopies += b.compute * k;
    if (!onHost) {
      if (!bf16)
        device.parameters += 4 * params;
      if (bf16)
        device.parameters += b.compute * params;
      if (bf16 && layout.parameters == Placement::Sharded && n > 1)
        shardCopies += b.compute * params;
    } else if (bf16) {
      // The compute copy of the shard waits on the host or NVMe; the f32
      // master shard is with the offloaded optimizer states.
      tier(offloadParameters ? plan.parameterOffload : Offload::Cpu) +=
          b.compute * params;
      computeCopies.push_back(b.compute * params);
    } else {
      // An f32 parameter on the host comes to the device itself.
      computeCopies.push_back(4 * params);
    }

    // Optimizer states, and the f32 master weights of a bf16 step with them.
    if (!offloadOptimizer) {
      device.optimizerStates += 4 * states * optStates;
      if (bf16)
        device.masterWeights += 4 * optStates;
    } else {
      // ZeRO-Offload (arXiv:2101.06840, section 4.1): the host keeps the f32
      // states, an f32 master copy and the f32 gradient of its elements.
      int64_t onTier = 4 * states * optStates + 4 * optStates;
      tier(plan.optimizerOffload) += onTier;
      host.hostBytes += 4 * optStates;
      largestLocalState = std::max(largestLocalState, onTier);
    }

    // Gradients until the optimizer, as the compiled step's arena holds
    // them: whole, or the shard. Accumulated over micro-batches and reduced
    // once per step, a sharded gradient is kept whole until the last
    // micro-batch, in the reduce type (a bf16 one is accumulated in f32
    // when the reduction is); reduced every micro-batch, its shard
    // accumulates in f32. Over one micro-batch ZeRO-1 reduce-scatters each
    // bucket as it closes, as ZeRO-2 does, and keeps the shard. An
    // offloaded optimizer's gradients are copied to the host as soon as
    // they are reduced over one micro-batch (the clipping norm's squares
    // summed beside the copies); accumulated over several, they wait there
    // until it runs.
    bool shardedGradients = layout.gradients == Placement::Sharded;
    bool accumulates = shardedGradients && model.microBatches > 1;
    bool keptWhole = accumulates && plan.reduceEvery == ReduceEvery::Step;
    bool zero1OneMicroBatch = !shardedGradients &&
                              layout.optimizerStates == Placement::Sharded &&
                              model.microBatches == 1;
    int64_t gradientBytes = b.gradient * grads;
    if (keptWhole)
      gradientBytes = b.gradient * k;
    else if (accumulates)
      gradientBytes = 4 * grads;
    else if (zero1OneMicroBatch)
      gradientBytes = b.gradient * optStates;
    // The ZeRO paper's category: ZeRO-1's gradients whole; a sharded one
    // counted with the offloaded optimizer's states, on the host (unless
    // kept whole for accumulation).
    if (zero1OneMicroBatch)
      device.gradients += b.gradient * grads;
    else if (!(offloadOptimizer && shardedGradients && !keptWhole) &&
             !streamsGradients)
      device.gradients += gradientBytes;
    if (!streamsGradients)
      heldGradientBytes += gradientBytes;
    fullGradientBytes += b.gradient * k;
  }

  // Gathered parameters and the full gradients of open buckets, from the
  // collectives the plan makes.
  std::vector<int64_t> forwardUnits, backwardUnits, scatterBuckets,
      releasingBuckets;
  int64_t largestGather = 0, largestReduction = 0;
  // Each gather of the backward pass as the compiled step has it in
  // flight: its largest piece, packed and gathered.
  std::vector<int64_t> backwardPieces;
  for (const CollectiveCall &call : calls) {
    bool gather = call.kind == CollectiveKind::AllGather;
    if (gather && call.phase == Phase::Forward)
      forwardUnits.push_back(call.payloadBytes());
    if (gather && call.phase == Phase::Backward) {
      backwardUnits.push_back(call.payloadBytes());
      // The compiled step gathers a unit in buckets of the cap (a tensor
      // larger than it alone): the largest piece it has in flight, with
      // its packed buffer.
      int64_t largestMember = 0;
      for (int64_t elements : call.memberElements)
        largestMember = std::max(largestMember, elements * call.elementBytes);
      const int64_t payload = call.payloadBytes();
      const int64_t piece =
          std::min(payload, std::max(largestMember, plan.bucketCapBytes));
      if (payload > 0)
        backwardPieces.push_back(
            piece + int64_t(double(piece) * double(call.packedBytes()) /
                            double(payload)));
    }
    if (call.releasesFullGradients)
      scatterBuckets.push_back(call.payloadBytes());
    // Streamed to the host, a replicated gradient too is held until its
    // bucket is reduced.
    if (call.releasesFullGradients ||
        (call.kind == CollectiveKind::ReduceScatter &&
         call.phase == Phase::Backward && model.microBatches == 1) ||
        (streamsGradients && call.kind == CollectiveKind::AllReduce &&
         call.phase == Phase::Backward))
      releasingBuckets.push_back(call.payloadBytes());
    int64_t &largest = gather ? largestGather : largestReduction;
    largest = std::max(largest, call.packedBytes());
  }
  const int64_t unitInUse = std::max(largestValues(forwardUnits, 1),
                                     largestValues(backwardUnits, 1));
  if (plan.reshard == Reshard::AfterForward) {
    // The unit in use; a prefetched one is its gather's packed buffer until
    // it completes (prefetchedGatherBuffers).
    device.gatheredParameters = unitInUse;
  } else {
    // Kept from the forward gather to the last backward reader: every
    // parameter the backward pass reads, the unit in use among them.
    int64_t kept = 0;
    for (const ParameterTensor &p : model.parameters)
      if (plan.layoutOf(p).parameters == Placement::Sharded &&
          p.readByBackward &&
          (plan.layoutOf(p).shardGroupSize > 1 || parametersOnHost))
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
  // units' gathers are in flight (from shards copied from the host too:
  // the copies run further ahead); kept until the backward pass, every
  // unit is gathered by then.
  if (!forwardUnits.empty() && plan.overlap && plan.prefetchDepth > 0 &&
      plan.reshard == Reshard::AfterForward)
    device.prefetchedGatherBuffers = plan.prefetchDepth * largestGather;

  device.activations =
      activationBytesPerRank(model, plan, N, &estimate.activationsEstimated,
                             &estimate.activationsUnknown);
  const ActivationMeasurement *measured = nullptr;
  for (const ActivationMeasurement &m : model.activationMeasurements)
    if (m.worldSize == N && m.checkpointing == plan.checkpointing &&
        m.stepBytesPerRank > 0)
      measured = &m;
  if (measured)
    device.stepBuffers =
        std::max<int64_t>(measured->stepBytesPerRank - wholeComputeCopies, 1);

  // Offload staging: the shards of the units being fetched; pinned host
  // buffers for NVMe. The offloaded optimizer needs no device buffer of its
  // own: the compiled step copies each gradient down from its buffer and
  // the updated parameters up into theirs.
  int64_t fetching = 0;
  bool fetchesPerReader = false;
  if (offloadOptimizer && plan.optimizerOffload == Offload::Nvme)
    host.pinnedStagingBytes += 2 * largestLocalState;
  if (parametersOnHost) {
    // A unit's shards before its gather, or a whole compute copy.
    std::vector<int64_t> unitShards;
    for (const CollectiveCall &call : calls)
      if (call.kind == CollectiveKind::AllGather &&
          call.phase == Phase::Forward)
        unitShards.push_back(call.packedBytes() / call.groupSize);
    if (unitShards.empty()) {
      unitShards = computeCopies;
      // A plan that shards parameters gathers them even on one rank.
      fetchesPerReader = plan.layout.parameters == Placement::Replicated;
    }
    fetching = largestValues(unitShards, inFlight);
    device.offloadStaging += fetching;
    if (plan.parameterOffload == Offload::Nvme)
      host.pinnedStagingBytes += 2 * largestValues(unitShards, 1);
  }
  if (measured && !measured->stepMoments.empty()) {
    PlanHolds holds;
    if (fullGradientBytes > 0)
      holds.keptGradients =
          double(heldGradientBytes) / double(fullGradientBytes);
    // The open bucket's full gradients; those of the buckets in flight are
    // in their packed buffers, which the measured step holds as this plan
    // does (its collectives overlap the backward pass too).
    holds.pendingGradients = largestValues(releasingBuckets, 1);
    // The copies of `depth` groups (a bucket's gradients) are in flight
    // after their reductions (limitCopiesToHostInFlight). On one rank every
    // preset reduces as DDP does.
    if (streamsGradients && scatterBuckets.empty() &&
        (plan.layout.optimizerStates == Placement::Replicated || N == 1))
      holds.bucketsCopying = plan.overlap ? plan.prefetchDepth : 0;
    holds.unitInUse = unitInUse;
    holds.residentCopies = residentCopies;
    if (wholeComputeCopies > 0)
      holds.residentFraction =
          double(residentCopies) / double(wholeComputeCopies);
    // Kept until the backward pass with no gather between, a parameter
    // fetched from the host is the copy the plan keeps (gathered above).
    holds.fetchesInFlight = inFlight;
    holds.fetchesPerReader = fetchesPerReader;
    holds.shardCopies = shardCopies;
    holds.largerCapBytes =
        std::max<int64_t>(plan.bucketCapBytes - Plan().bucketCapBytes, 0);
    // The backward pass prefetches as the forward pass does: while the
    // parameters in use compute, the next gathers are in flight. The
    // largest gather of a language model's backward pass is its output
    // head's, the first, issued at the loss beside the forward pass's
    // prefetched gathers; what is in flight beside a unit in use is at
    // most the largest of the others.
    if (backwardPieces.size() > 1 && plan.overlap && plan.prefetchDepth > 0 &&
        plan.reshard == Reshard::AfterForward) {
      std::sort(backwardPieces.rbegin(), backwardPieces.rend());
      holds.backwardPrefetch = plan.prefetchDepth * backwardPieces[1];
    }
    holds.fetching =
        plan.reshard == Reshard::AfterBackward && forwardUnits.empty()
            ? 0
            : fetching;
    device.stepPeak = stepPeakOf(*measured, device, plan, holds, device.atPeak,
                                 device.stepGradients);
    return estimate;
  }
  // No measured moments: total()'s sum, by category.
  PeakBreakdown &at = device.atPeak;
  at.parameters = device.parameters;
  at.masterWeights = device.masterWeights;
  at.optimizerStates = device.optimizerStates;
  at.gatheredParameters = device.gatheredParameters;
  at.offloadStaging = device.offloadStaging;
  if (device.stepBuffers > 0) {
    // The measured arena, of which the activations are a part.
    at.activations = std::min(device.activations, device.stepBuffers);
    at.other = device.stepBuffers - at.activations;
    at.communication = device.prefetchedGatherBuffers;
  } else {
    at.activations = device.activations;
    at.gradients = device.gradients + device.pendingGradients;
    at.communication = device.communicationBuffers;
  }
  return estimate;
}

std::vector<std::pair<const char *, int64_t>>
autoshard::cost::PeakBreakdown::categories() const {
  return {
      {"parameters", parameters},   {"master_weights", masterWeights},
      {"gradients", gradients},     {"optimizer_states", optimizerStates},
      {"activations", activations}, {"gathered_parameters", gatheredParameters},
      {"buffers", buffers()}};
}

std::vector<std::pair<const char *, int64_t>>
autoshard::cost::PeakBreakdown::bufferParts() const {
  return {{"communication", communication},
          {"offload_staging", offloadStaging},
          {"batch", batch},
          {"other", other}};
}

/// The moments no other holds as many held gradients and as many bytes by
/// `bytes` (one of them more), by ascending held gradients.
template <typename Bytes>
static std::vector<StepMoment> frontier(std::vector<StepMoment> moments,
                                        Bytes bytes) {
  // From the most held gradients down, a moment is kept when it holds more
  // bytes than every moment with more gradients.
  std::sort(moments.begin(), moments.end(),
            [&](const StepMoment &a, const StepMoment &b) {
              return a.heldGradients != b.heldGradients
                         ? a.heldGradients > b.heldGradients
                         : bytes(a) > bytes(b);
            });
  std::vector<StepMoment> kept;
  for (const StepMoment &m : moments)
    if (kept.empty() || bytes(m) > bytes(kept.back()))
      kept.push_back(m);
  std::reverse(kept.begin(), kept.end());
  return kept;
}

std::vector<StepMoment>
autoshard::cost::peakCandidates(std::vector<StepMoment> moments) {
  // A plan keeps the compute copies as the measured step does, or not at
  // all, and adds what it gathers or fetches for the parameters in use:
  // the candidates of each.
  // The parameters in use, and those read at a moment and next, take few
  // values (a block repeats the same ones): one group each.
  std::map<std::tuple<int64_t, int64_t, bool, int64_t, int64_t>,
           std::vector<StepMoment>>
      byUnits;
  for (const StepMoment &m : moments)
    byUnits[{m.paramBytesInUse, m.unitBytesInUse, m.onlyAcrossLoss,
             m.paramBytesRead, m.nextParamBytesRead}]
        .push_back(m);
  std::vector<StepMoment> kept;
  for (auto &[units, group] : byUnits) {
    for (const StepMoment &m :
         frontier(group, [](const StepMoment &m) { return m.others; }))
      kept.push_back(m);
    // A plan that reduces the gradients away holds the unreduced ones
    // beside the rest.
    for (const StepMoment &m : frontier(group, [](const StepMoment &m) {
           return m.others + std::max<int64_t>(m.unreducedGradients, 0);
         }))
      kept.push_back(m);
    for (const StepMoment &m : frontier(group, [](const StepMoment &m) {
           return m.others - m.computeCopies;
         }))
      kept.push_back(m);
    for (const StepMoment &m : frontier(group, [](const StepMoment &m) {
           return m.others - m.computeCopies +
                  std::max<int64_t>(m.unreducedGradients, 0);
         }))
      kept.push_back(m);
    // And beside them the bucket whose copy to the host is in flight.
    for (const StepMoment &m : frontier(group, [](const StepMoment &m) {
           return m.others - m.computeCopies +
                  std::max<int64_t>(m.unreducedGradients, 0) +
                  std::max<int64_t>(m.lastReducedGradients, 0);
         }))
      kept.push_back(m);
  }
  // Each moment once.
  auto key = [](const StepMoment &m) {
    return std::tie(m.heldGradients, m.others, m.computeCopies,
                    m.paramBytesInUse, m.unitBytesInUse, m.onlyAcrossLoss,
                    m.paramBytesRead, m.nextParamBytesRead,
                    m.lastReducedGradients, m.unreducedGradients,
                    m.activations, m.parameterBuffers, m.summingGradients,
                    m.communication, m.batch);
  };
  std::sort(kept.begin(), kept.end(),
            [&](const StepMoment &a, const StepMoment &b) {
              return key(a) < key(b);
            });
  kept.erase(std::unique(kept.begin(), kept.end(),
                         [&](const StepMoment &a, const StepMoment &b) {
                           return key(a) == key(b);
                         }),
             kept.end());
  return kept;
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

std::string autoshard::cost::PeakBreakdown::str() const {
  std::string text;
  for (auto [name, bytes] : categories()) {
    if (!bytes)
      continue;
    text += (text.empty() ? "" : ", ") + std::string(name) + " " +
            formatBytes(bytes);
    if (std::string_view(name) != "buffers")
      continue;
    // The last category: its parts follow it.
    const char *separator = " = ";
    for (auto [part, partBytes] : bufferParts())
      if (partBytes) {
        text += separator + std::string(part) + " " + formatBytes(partBytes);
        separator = " + ";
      }
  }
  return text;
}
