//===- Hardware.h - devices, clusters and communication groups --*- C++ -*-===//
//
// Plain structs that describe the machines a plan runs on. The figures come
// from data files (data/devices/*.json, read by DeviceCatalog.h), never from
// code: this header only says what each figure means and how a rank's share
// of a node follows from them.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_COSTMODEL_HARDWARE_H
#define AUTOSHARD_COSTMODEL_HARDWARE_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace autoshard::cost {

enum class DeviceKind {
  /// One rank per GPU; a node holds `devicesPerNode` of them, each with its
  /// own memory, links and network adapter.
  GPU,
  /// A CPU node: the ranks on it share its cores, memory and links.
  CPU,
};

/// One device, as a data file describes it. Bandwidths are bytes per second
/// in one direction; latencies are seconds. GPU figures are per GPU, CPU
/// figures per node (docs/CostModel.md, "Devices").
struct DeviceSpec {
  std::string name;
  std::string description;
  DeviceKind kind = DeviceKind::GPU;

  int64_t devicesPerNode = 1;
  /// Memory a rank's buffers live in: HBM (GPU) or the node's DRAM (CPU).
  int64_t memoryBytes = 0;
  /// Dense peak throughput: bf16 on tensor cores, f32 without them (GPU).
  double peakFlopsBF16 = 0;
  double peakFlopsF32 = 0;
  /// HBM (GPU) or DRAM (CPU) bandwidth: what the optimizer step streams.
  double memoryBandwidth = 0;

  /// Between ranks of one node (NVLink per GPU; shared memory on a CPU).
  double intraNodeBandwidth = 0;
  /// Network bandwidth of one device (GPU: its NIC; CPU: the node's);
  /// 0 when the device file describes no network (one node only).
  double interNodeBandwidth = 0;

  /// NCCL's (or MPI's) fixed cost of one collective call, and its cost per
  /// step of a ring or a tree hop inside and across nodes.
  double collectiveLaunchLatency = 0;
  double ringStepLatencyIntraNode = 0;
  double ringStepLatencyInterNode = 0;
  double treeStepLatencyIntraNode = 0;
  double treeStepLatencyInterNode = 0;

  /// CPU only: the node's cores (0 where the figure does not apply).
  int64_t cores = 0;
  /// The fraction of the peak FLOP/s a training step's compute attains on
  /// this device, where it has been measured; 0: CostOptions'
  /// computeEfficiency, an assumption.
  double computeEfficiency = 0;
  /// Optional per-kind bus bandwidths between ranks of one node, where the
  /// communication library's algorithms differ by kind (Open MPI on shared
  /// memory: its reduce-scatter attains a fraction of its all-gather's);
  /// 0: intraNodeBandwidth for that kind, as NCCL's kinds share one rate.
  double intraNodeAllReduceBandwidth = 0;
  double intraNodeReduceScatterBandwidth = 0;
  double intraNodeAllGatherBandwidth = 0;
  /// Optionally, how each of those varies with the collective's buffer
  /// size: (bytes, bus bandwidth) points in increasing bytes, interpolated
  /// in log-log and held flat beyond the ends (shared-memory collectives
  /// run faster while their buffers fit in cache). Empty: the one value.
  using BandwidthCurve = std::vector<std::pair<double, double>>;
  BandwidthCurve intraNodeAllReduceCurve;
  BandwidthCurve intraNodeReduceScatterCurve;
  BandwidthCurve intraNodeAllGatherCurve;

  /// GPU only: the device's host link (PCIe), the node's host memory and its
  /// bandwidth, the node's NVMe drives. 0 where a figure does not apply.
  double hostLinkBandwidth = 0;
  int64_t hostMemoryBytes = 0;
  double hostMemoryBandwidth = 0;
  double nvmeBandwidth = 0;
  int64_t nvmeBytes = 0;

  bool hasNetwork() const { return interNodeBandwidth > 0; }
  /// Whether optimizer states or parameters can move to host memory or NVMe.
  bool canOffload() const {
    return kind == DeviceKind::GPU && hostLinkBandwidth > 0;
  }
};

/// `nodes` identical nodes with `ranksPerNode` ranks each; rank r lives on
/// node r / ranksPerNode (the launcher's block placement).
struct ClusterSpec {
  DeviceSpec device;
  int64_t nodes = 1;
  int64_t ranksPerNode = 1;

  int64_t worldSize() const { return nodes * ranksPerNode; }
};

/// A cluster of `worldSize` ranks on `device`: full nodes of
/// `devicesPerNode` GPUs (fewer on one node), or one CPU node running every
/// rank. Check the result with verifyCluster.
ClusterSpec makeCluster(const DeviceSpec &device, int64_t worldSize);

/// "" when the cluster can exist, else what is wrong and what would be
/// valid: at least one node and rank, at most one rank per GPU, a network
/// when there is more than one node.
std::string verifyCluster(const ClusterSpec &cluster);

/// What one rank has of the node: a GPU's own figures, or the CPU node's
/// divided among the ranks on it.
int64_t rankMemoryBytes(const ClusterSpec &cluster);
double rankPeakFlops(const ClusterSpec &cluster, bool bf16);
double rankMemoryBandwidth(const ClusterSpec &cluster);
/// The node's host memory, host memory bandwidth, NVMe bandwidth and NVMe
/// capacity divided among its ranks (GPU clusters; 0 otherwise).
int64_t rankHostMemoryBytes(const ClusterSpec &cluster);
double rankHostMemoryBandwidth(const ClusterSpec &cluster);
double rankNvmeBandwidth(const ClusterSpec &cluster);
int64_t rankNvmeBytes(const ClusterSpec &cluster);

/// Where the ranks of one communication group sit. A group is `size` ranks
/// `stride` apart: a shard group or the world is contiguous (stride 1), the
/// replicas of a hybrid plan's shard are `n` apart.
struct GroupTopology {
  int64_t size = 1;
  /// Ranks of the group on one node, and the nodes the group spans.
  int64_t ranksPerNode = 1;
  int64_t nodes = 1;
};

/// The topology of the group of `size` ranks `stride` apart that holds rank
/// 0, on nodes of `clusterRanksPerNode` ranks.
GroupTopology groupTopology(int64_t size, int64_t stride,
                            int64_t clusterRanksPerNode);

} // namespace autoshard::cost

#endif // AUTOSHARD_COSTMODEL_HARDWARE_H
