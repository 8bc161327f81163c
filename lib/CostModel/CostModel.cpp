//===- CostModel.cpp - step time, overlap and the estimate of a plan ------===//

#include "autoshard/CostModel/CostModel.h"

#include <algorithm>
#include <cassert>
#include <cstdio>

using namespace autoshard::cost;

double autoshard::cost::exposedTime(double communication, double lead,
                                    double overlappable) {
  lead = std::min(std::max(lead, 0.0), communication);
  return lead + std::max(0.0, communication - lead - overlappable);
}

/// Bytes the optimizer streams per element it updates: the f32 master and
/// every f32 state read and written, the gradient read, and under mixed
/// precision the bf16 compute copy written (cast from the updated master).
static double optimizerBytesPerElement(const ModelDescription &model,
                                       const Plan &plan, int64_t gradient) {
  double bytes = 8.0 +
                 8.0 * double(optimizerStatesPerElement(model.optimizer)) +
                 double(gradient);
  if (model.precision == Precision::BF16)
    bytes += double(computeElementBytes(model.precision));
  return bytes;
}

/// Elements of optimizer state this rank updates.
static int64_t localStateElements(const ModelDescription &model,
                                  const Plan &plan) {
  int64_t elements = 0;
  for (const ParameterTensor &p : model.parameters) {
    const Layout layout = plan.layoutOf(p);
    elements += layout.optimizerStates == Placement::Sharded
                    ? ceilDiv(p.elements, layout.shardGroupSize)
                    : p.elements;
  }
  return elements;
}

double autoshard::cost::computeEfficiency(const DeviceSpec &device,
                                          const CostOptions &options) {
  return device.computeEfficiency > 0 ? device.computeEfficiency
                                      : options.computeEfficiency;
}

StepTime autoshard::cost::estimateCompute(const ModelDescription &model,
                                          const Plan &plan,
                                          const ClusterSpec &cluster,
                                          const CostOptions &options) {
  StepTime time;
  const double ranks = double(cluster.worldSize());
  const double flops =
      rankPeakFlops(cluster, model.precision == Precision::BF16) *
      computeEfficiency(cluster.device, options);
  // The forward pass is a third of a step's FLOPs (one matrix product per
  // weight against two in the backward pass).
  double forward = model.stepFlops / 3.0 / ranks;
  double backward = model.stepFlops * 2.0 / 3.0 / ranks;
  if (plan.checkpointing == ActivationCheckpointing::Blocks)
    backward += model.blockRecomputeFlops / ranks;
  time.forwardCompute = forward / flops;
  time.backwardCompute = backward / flops;
  if (plan.optimizerOffload == Offload::None) {
    double bytes = double(localStateElements(model, plan)) *
                   optimizerBytesPerElement(model, plan,
                                            elementSizes(model, plan).gradient);
    time.optimizerCompute =
        bytes / (rankMemoryBandwidth(cluster) * options.bandwidthEfficiency);
  }
  return time;
}

namespace {

/// Busy time of the collectives of one phase, and the first and last ones.
struct PhaseComm {
  double total = 0;
  double first = 0;
  double last = 0;
  bool any = false;

  void add(double seconds) {
    if (!any)
      first = seconds;
    last = seconds;
    total += seconds;
    any = true;
  }
};

} // namespace

CostEstimate autoshard::cost::estimateCost(const ModelDescription &model,
                                           const Plan &plan,
                                           const ClusterSpec &cluster,
                                           const CostOptions &options) {
  return estimateCost(model, plan, cluster,
                      planCollectives(model, plan, cluster.worldSize()),
                      options);
}

std::vector<double>
autoshard::cost::collectiveSeconds(const std::vector<CollectiveCall> &calls,
                                   const ClusterSpec &cluster,
                                   const CostOptions &options) {
  LinkParameters link = linkParameters(cluster, options.bandwidthEfficiency);
  std::vector<double> seconds;
  seconds.reserve(calls.size());
  for (const CollectiveCall &call : calls)
    seconds.push_back(
        collectiveTime(call, cluster, link, options.allReduceAlgorithm)
            .seconds);
  return seconds;
}

CostEstimate autoshard::cost::estimateCost(
    const ModelDescription &model, const Plan &plan,
    const ClusterSpec &cluster, const std::vector<CollectiveCall> &calls,
    const CostOptions &options) {
  return estimateCost(model, plan, cluster, calls,
                      collectiveSeconds(calls, cluster, options), options);
}

CostEstimate autoshard::cost::estimateCost(
    const ModelDescription &model, const Plan &plan,
    const ClusterSpec &cluster, const std::vector<CollectiveCall> &calls,
    const std::vector<double> &callSeconds, const CostOptions &options) {
  assert(callSeconds.size() == calls.size() &&
         "one time for each collective call");
  CostEstimate estimate;
  estimate.plan = plan;
  const int64_t N = cluster.worldSize();
  const int64_t K = std::max<int64_t>(model.microBatches, 1);
  estimate.memory = estimateMemory(model, plan, cluster, calls);
  estimate.traffic = stepTraffic(model, plan, N);
  estimate.deviceCapacityBytes = rankMemoryBytes(cluster);
  estimate.hostCapacityBytes = rankHostMemoryBytes(cluster);
  estimate.nvmeCapacityBytes = rankNvmeBytes(cluster);

  StepTime &time = estimate.time;
  time = estimateCompute(model, plan, cluster, options);

  // Communication: each call priced alone, then summed per phase.
  // Reductions run in the last micro-batch's backward pass, or (sharded
  // gradients reduced every micro-batch) in each one's.
  PhaseComm firstForward, forwardGathers, backwardGathers, reductions,
      everyMicroBatch, afterBackward, optimizer;
  for (size_t i = 0; i < calls.size(); ++i) {
    const CollectiveCall &call = calls[i];
    const double seconds = callSeconds[i];
    estimate.collectiveCalls += call.repeat;
    time.communication += seconds * double(call.repeat);
    switch (call.phase) {
    case Phase::FirstForward:
      firstForward.add(seconds);
      break;
    case Phase::Forward:
      forwardGathers.add(seconds);
      break;
    case Phase::Backward:
      (call.kind == CollectiveKind::AllGather ? backwardGathers
       : call.repeat > 1                      ? everyMicroBatch
                                              : reductions)
          .add(seconds);
      break;
    case Phase::AfterBackward:
      afterBackward.add(seconds);
      break;
    case Phase::Optimizer:
      optimizer.add(seconds);
      break;
    }
  }

  const double forwardPerMicroBatch = time.forwardCompute / double(K);
  const double backwardPerMicroBatch = time.backwardCompute / double(K);
  // On a CPU node the communication thread runs MPI on the cores the
  // ranks compute on: nothing overlaps (bench/cost_ranking.py measures it).
  bool sharedCores = cluster.device.kind == DeviceKind::CPU;
  if (!plan.overlap || plan.prefetchDepth == 0 || sharedCores) {
    time.exposedCommunication = time.communication;
  } else {
    // Per micro-batch, the communication stream runs the forward gathers
    // during the forward pass and the backward gathers (and the reductions
    // of that micro-batch: every one in the last) during the backward pass.
    // Nothing precedes the step's first gather; nothing follows a micro-
    // batch's last reduction, which is waited for where it ends.
    double exposed = 0;
    for (int64_t mb = 0; mb < K; ++mb) {
      bool first = mb == 0, last = mb == K - 1;
      // The first forward pass also gathers what is kept for the step.
      double gathers = forwardGathers.total + (first ? firstForward.total : 0);
      double lead = !first             ? 0.0
                    : firstForward.any ? firstForward.first
                                       : forwardGathers.first;
      exposed += exposedTime(gathers, lead, forwardPerMicroBatch);
      double backward = backwardGathers.total + everyMicroBatch.total +
                        (last ? reductions.total : 0);
      double tail = last && reductions.any ? reductions.last
                                           : everyMicroBatch.last;
      exposed += exposedTime(backward, tail, backwardPerMicroBatch);
    }
    // The clipping norm needs every gradient; ZeRO-1/2's gathers of updated
    // shards overlap the rest of the update, except the last.
    exposed += afterBackward.total;
    exposed +=
        exposedTime(optimizer.total, optimizer.last, time.optimizerCompute);
    time.exposedCommunication = exposed;
  }

  // Offload: the optimizer on the host (gradients down, updated parameters
  // up, states through NVMe) and parameter shards fetched for each gather.
  const ElementSizes b = elementSizes(model, plan);
  const double efficiency = options.bandwidthEfficiency;
  const double pcie = cluster.device.hostLinkBandwidth * efficiency;
  const double nvme = rankNvmeBandwidth(cluster) * efficiency;
  if (plan.optimizerOffload != Offload::None) {
    const double elements = double(localStateElements(model, plan));
    const int64_t states = optimizerStatesPerElement(model.optimizer);
    double down = elements * double(b.gradient) / pcie;
    // The host's update streams its f32 master, states and gradient.
    double update = elements * optimizerBytesPerElement(model, plan, 4) /
                    (rankHostMemoryBandwidth(cluster) * efficiency);
    double up = plan.parameterOffload == Offload::None
                    ? elements * double(b.compute) / pcie
                    : 0.0;
    double swap = 0;
    if (plan.optimizerOffload == Offload::Nvme)
      swap = 2.0 * elements * double(4 * states + 4) / nvme;
    time.offload += down + update + up + swap;
    // Gradient shards go down while the last backward pass runs; the
    // update, the swap and the way back follow it.
    time.exposedOffload +=
        exposedTime(down, 0.0, backwardPerMicroBatch) + update + up + swap;
  }
  if (plan.parameterOffload != Offload::None) {
    double bytes = 0;
    int64_t units = 0;
    for (const CollectiveCall &call : calls)
      if (call.kind == CollectiveKind::AllGather &&
          (call.phase == Phase::Forward || call.phase == Phase::Backward)) {
        bytes += double(call.packedBytes() / call.groupSize);
        ++units;
      }
    double perByte =
        1.0 / pcie + (plan.parameterOffload == Offload::Nvme ? 1.0 / nvme : 0);
    double fetch = bytes * perByte;
    double firstUnit = units > 0 ? fetch / double(units) : 0.0;
    for (int64_t mb = 0; mb < K; ++mb) {
      time.offload += fetch;
      time.exposedOffload +=
          exposedTime(fetch, mb == 0 ? firstUnit : 0.0,
                      forwardPerMicroBatch + backwardPerMicroBatch);
    }
    if (plan.parameterOffload == Offload::Nvme &&
        model.precision == Precision::BF16) {
      // The updated compute copy goes back to NVMe.
      double writeBack = 0;
      for (const ParameterTensor &p : model.parameters) {
        const Layout layout = plan.layoutOf(p);
        writeBack +=
            double(ceilDiv(p.elements, layout.shardGroupSize) * b.compute);
      }
      time.offload += writeBack / nvme;
      time.exposedOffload += writeBack / nvme;
    }
  }
  return estimate;
}

std::vector<std::string> CostEstimate::overflows(int64_t budgetBytes) const {
  std::vector<std::string> lines;
  int64_t capacity = budgetBytes > 0 ? budgetBytes : deviceCapacityBytes;
  if (memory.device.total() > capacity)
    lines.push_back("device memory needs " +
                    formatBytes(memory.device.total()) + " per rank, has " +
                    formatBytes(capacity));
  int64_t hostNeed = memory.host.hostBytes + memory.host.pinnedStagingBytes;
  if (hostNeed > 0 && hostNeed > hostCapacityBytes)
    lines.push_back("host memory needs " + formatBytes(hostNeed) +
                    " per rank, has " + formatBytes(hostCapacityBytes));
  if (memory.host.nvmeBytes > 0 && memory.host.nvmeBytes > nvmeCapacityBytes)
    lines.push_back("NVMe needs " + formatBytes(memory.host.nvmeBytes) +
                    " per rank, has " + formatBytes(nvmeCapacityBytes));
  return lines;
}

bool CostEstimate::fits(int64_t budgetBytes) const {
  return overflows(budgetBytes).empty();
}
