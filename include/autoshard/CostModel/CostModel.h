//===- CostModel.h - one plan's memory, traffic and step time ---*- C++ -*-===//
//
// The entry point: estimateCost(model, plan, cluster) returns everything the
// compiler needs to choose between plans and to explain the choice. Pure
// functions over the plain structs of Hardware.h, Model.h and Plan.h; no IR.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_COSTMODEL_COSTMODEL_H
#define AUTOSHARD_COSTMODEL_COSTMODEL_H

#include "autoshard/CostModel/CommTime.h"
#include "autoshard/CostModel/Hardware.h"
#include "autoshard/CostModel/Memory.h"
#include "autoshard/CostModel/Model.h"
#include "autoshard/CostModel/Plan.h"
#include "autoshard/CostModel/Traffic.h"

#include <string>
#include <vector>

namespace autoshard::cost {

struct CostOptions {
  /// Achieved fraction of the device's peak FLOP/s, for devices whose file
  /// measures none (compute_efficiency). 0.5 is in the range of
  /// published model-FLOPs utilisation of large transformer training: 52%
  /// of an A100's bf16 peak (Narayanan et al., arXiv:2104.04473, 163 of 312
  /// TFLOP/s), 46.2% for PaLM 540B (arXiv:2204.02311). An assumption.
  double computeEfficiency = 0.5;
  /// Achieved fraction of the data sheet's link bandwidths (NVLink, network,
  /// PCIe, NVMe, memory). 1 prices at the published rates.
  double bandwidthEfficiency = 1.0;
  AlgorithmChoice allReduceAlgorithm = AlgorithmChoice::Fastest;
};

/// Seconds of one optimizer step on one rank.
struct StepTime {
  /// Forward and backward compute over every micro-batch (backward includes
  /// recomputation), and the optimizer update.
  double forwardCompute = 0;
  double backwardCompute = 0;
  double optimizerCompute = 0;
  /// Time the collectives keep the communication stream busy.
  double communication = 0;
  /// The part of it compute does not hide.
  double exposedCommunication = 0;
  /// Transfers to and from host memory or NVMe, and the host's optimizer
  /// step, and the part of them compute does not hide.
  double offload = 0;
  double exposedOffload = 0;

  double compute() const {
    return forwardCompute + backwardCompute + optimizerCompute;
  }
  /// compute + exposed communication + exposed offload.
  double total() const {
    return compute() + exposedCommunication + exposedOffload;
  }
};

struct CostEstimate {
  Plan plan;
  MemoryEstimate memory;
  /// Exact bytes per rank per step (docs/Strategies.md).
  Traffic traffic;
  /// Collective calls per step (each bucket once per run).
  int64_t collectiveCalls = 0;
  StepTime time;

  /// The device memory a rank has, and whether every footprint fits: the
  /// device's memory (or `budgetBytes` when it is positive), the node's host
  /// memory and its NVMe.
  int64_t deviceCapacityBytes = 0;
  bool fits(int64_t budgetBytes = 0) const;
  /// Which footprints do not fit, as "device memory needs X, has Y" lines.
  std::vector<std::string> overflows(int64_t budgetBytes = 0) const;

  int64_t hostCapacityBytes = 0;
  int64_t nvmeCapacityBytes = 0;
};

/// Memory, traffic and step time of `plan`. Requires verifyPlan(plan, model,
/// cluster) to be empty and verifyCluster(cluster) to be empty.
CostEstimate estimateCost(const ModelDescription &model, const Plan &plan,
                          const ClusterSpec &cluster,
                          const CostOptions &options = {});
/// The same, given the plan's collectives (planCollectives), which a search
/// shares between plans that differ only in what they do not depend on
/// (collectivesOnly).
CostEstimate estimateCost(const ModelDescription &model, const Plan &plan,
                          const ClusterSpec &cluster,
                          const std::vector<CollectiveCall> &calls,
                          const CostOptions &options = {});
/// The same, given also each call's time alone (collectiveSeconds of the
/// same calls, cluster and options), which such a search shares too.
CostEstimate estimateCost(const ModelDescription &model, const Plan &plan,
                          const ClusterSpec &cluster,
                          const std::vector<CollectiveCall> &calls,
                          const std::vector<double> &callSeconds,
                          const CostOptions &options = {});

/// The time of each of `calls` run alone on `cluster` (collectiveTime), in
/// their order.
std::vector<double> collectiveSeconds(const std::vector<CollectiveCall> &calls,
                                      const ClusterSpec &cluster,
                                      const CostOptions &options = {});

/// The fraction of `device`'s peak FLOP/s its compute attains: the
/// device file's measured compute_efficiency, else options' assumption.
double computeEfficiency(const DeviceSpec &device, const CostOptions &options);

/// The step's compute alone: forward, backward (with recomputation) and the
/// optimizer update, per rank (the batch is split over every rank).
StepTime estimateCompute(const ModelDescription &model, const Plan &plan,
                         const ClusterSpec &cluster,
                         const CostOptions &options = {});

/// What overlap leaves exposed of `communication` seconds of collectives
/// running during `overlappable` seconds of compute, when `lead` seconds of
/// them (the first collective, which nothing precedes, or the last, which
/// nothing follows) cannot overlap: lead + max(0, communication - lead -
/// overlappable).
double exposedTime(double communication, double lead, double overlappable);

} // namespace autoshard::cost

#endif // AUTOSHARD_COSTMODEL_COSTMODEL_H
