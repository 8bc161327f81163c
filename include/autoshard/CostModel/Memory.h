//===- Memory.h - per-rank memory of a plan, by category --------*- C++ -*-===//
//
// Model states (parameters, gradients, optimizer states) are exact: they
// follow from the placements and the ceil(k/n) shards. Activations come from
// the compiler's memory plan when it measured them, otherwise from an
// estimate; gathered parameters, pending gradients, communication buffers
// and offload staging follow from the schedule's settings and are estimates.
// docs/CostModel.md, "Memory", has every term.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_COSTMODEL_MEMORY_H
#define AUTOSHARD_COSTMODEL_MEMORY_H

#include "autoshard/CostModel/Hardware.h"
#include "autoshard/CostModel/Model.h"
#include "autoshard/CostModel/Plan.h"
#include "autoshard/CostModel/Traffic.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace autoshard::cost {

/// A step's device memory per rank at its peak, in the categories both
/// reports give it in: the plan report from the compiled step's buffers
/// alive then, the cost report from the estimate's moment of the peak. The
/// parts add up to the peak; what an arena holds beyond its live buffers
/// (alignment, fragmentation) is `other`.
struct PeakBreakdown {
  int64_t parameters = 0;
  int64_t masterWeights = 0;
  int64_t gradients = 0;
  int64_t optimizerStates = 0;
  int64_t activations = 0;
  int64_t gatheredParameters = 0;
  /// The buffers: packed buffers of collectives, device buffers of
  /// transfers from the host or NVMe, the batch, and the rest.
  int64_t communication = 0;
  int64_t offloadStaging = 0;
  int64_t batch = 0;
  int64_t other = 0;

  int64_t buffers() const {
    return communication + offloadStaging + batch + other;
  }
  int64_t total() const {
    return parameters + masterWeights + gradients + optimizerStates +
           activations + gatheredParameters + buffers();
  }
  /// ("parameters", bytes), ... ("buffers", bytes): the reports' names, in
  /// their order.
  std::vector<std::pair<const char *, int64_t>> categories() const;
  /// ("communication", bytes), ... ("other", bytes): the parts of
  /// `buffers`.
  std::vector<std::pair<const char *, int64_t>> bufferParts() const;
  /// "parameters 1.00 MiB (1048576 bytes), ..., buffers 3.00 MiB (...) =
  /// communication ... + other ...": the categories with bytes, in the
  /// reports' order, and the parts of the buffers.
  std::string str() const;
};

/// Device bytes per rank.
struct MemoryBreakdown {
  /// The parameters the step computes with: the f32 parameters, or under
  /// mixed precision the bf16 compute copies (their masters are
  /// `masterWeights`).
  int64_t parameters = 0;
  /// Gradients held until the optimizer: whole, or this rank's shards.
  int64_t gradients = 0;
  /// Optimizer states (AdamW's moments, SGD's momentum).
  int64_t optimizerStates = 0;
  /// The f32 master weights of a mixed-precision step, placed as the
  /// optimizer states are (ZeRO's layout; the plan report's category of
  /// the same name).
  int64_t masterWeights = 0;
  int64_t activations = 0;
  /// Full parameters gathered from shards (ZeRO-3, FSDP).
  int64_t gatheredParameters = 0;
  /// Full gradients waiting for their bucket's reduce-scatter.
  int64_t pendingGradients = 0;
  /// Packed buffers of the collectives in flight.
  int64_t communicationBuffers = 0;
  /// Device buffers of transfers to and from host memory or NVMe.
  int64_t offloadStaging = 0;
  /// The step buffers of the DDP memory plan at their peak, when measured:
  /// activations and the gradients alive with them, and its buckets' pack
  /// buffers, in the compiled step's arena (gradients are never kept
  /// between steps), less the bf16 compute copies of the parameters that
  /// the arena holds under mixed precision (`parameters` counts this
  /// plan's copies: whole, or the shards). 0 when unknown.
  int64_t stepBuffers = 0;
  /// Of `communicationBuffers`, the packed buffers of the parameter gathers
  /// in flight beside the unit in use (prefetched), which a plan that
  /// gathers parameters in the forward pass holds at the activations' peak.
  int64_t prefetchedGatherBuffers = 0;
  /// The step's own buffers at this plan's peak, derived from the moments
  /// of the measured DDP step (its held gradients as this plan keeps them,
  /// beside the rest), with what the plan gathers, prefetches and stages
  /// for offload at that moment. 0 when not measured.
  int64_t stepPeak = 0;
  /// Of `stepPeak`, the gradients (or this plan's shards of them) held
  /// until the optimizer: sharded, they shrink as 1/ranks as the model
  /// states do, whatever their category (an offloaded optimizer's
  /// gradients wait on the device until it runs).
  int64_t stepGradients = 0;
  /// The peak by category, adding up to total().
  PeakBreakdown atPeak;

  int64_t modelStates() const {
    return parameters + gradients + optimizerStates + masterWeights;
  }
  /// What the step keeps between steps besides the gradients.
  int64_t keptStates() const {
    return parameters + optimizerStates + masterWeights;
  }
  /// The peak. With the measured step buffers: the states kept between
  /// steps, the compute copies of the parameters, those buffers (gradients
  /// and DDP's pack buffers included, at the moment they peak with the
  /// activations; a sharded plan's gradient shards, pending full gradients
  /// and packed reductions are no larger than DDP's), and the gathered
  /// parameters a plan adds to them (the units in use and prefetched, and
  /// the packed buffers of the prefetched gathers).
  /// Otherwise every category at once, an upper bound (activations peak
  /// before the gradients do, and the buffers of collectives in flight
  /// with neither).
  int64_t total() const {
    if (stepPeak > 0)
      return keptStates() + stepPeak;
    if (stepBuffers > 0)
      return keptStates() + stepBuffers + gatheredParameters +
             prefetchedGatherBuffers + offloadStaging;
    return modelStates() + activations + gatheredParameters + pendingGradients +
           communicationBuffers + offloadStaging;
  }
};

/// Bytes per rank outside the device.
struct HostFootprint {
  /// Offloaded states and parameters in host memory (a GPU's share of the
  /// node's memory).
  int64_t hostBytes = 0;
  /// Pinned host buffers that stage NVMe transfers.
  int64_t pinnedStagingBytes = 0;
  int64_t nvmeBytes = 0;
};

struct MemoryEstimate {
  MemoryBreakdown device;
  HostFootprint host;
  /// Whether `activations` is an estimate rather than the memory plan's.
  bool activationsEstimated = false;
  /// Whether no activation figure could be had (no measurement, no shape):
  /// `activations` is then 0.
  bool activationsUnknown = false;
};

/// The activation bytes per rank: the measurement for this world size and
/// checkpointing mode if there is one, else the transformer estimate.
int64_t activationBytesPerRank(const ModelDescription &model, const Plan &plan,
                               int64_t worldSize, bool *estimated,
                               bool *unknown);

/// The memory of `plan` per rank. Requires a plan verifyPlan accepts.
MemoryEstimate estimateMemory(const ModelDescription &model, const Plan &plan,
                              const ClusterSpec &cluster);
/// The same, given the plan's collectives (planCollectives), which a caller
/// that needs them too computes once.
MemoryEstimate estimateMemory(const ModelDescription &model, const Plan &plan,
                              const ClusterSpec &cluster,
                              const std::vector<CollectiveCall> &calls);

/// Of `moments`, those where a plan's peak can be, by ascending held
/// gradients: the moments no other dominates (as many held gradients and
/// as many other bytes, one of them more), counting the compute copies or
/// not. A peak `others + f(heldGradients)`, or the same without the
/// copies, is at one of them for any f that does not decrease.
std::vector<StepMoment> peakCandidates(std::vector<StepMoment> moments);

/// A byte count for people: "1.50 GiB (1610612736 bytes)", "512 B".
std::string formatBytes(int64_t bytes);

} // namespace autoshard::cost

#endif // AUTOSHARD_COSTMODEL_MEMORY_H
