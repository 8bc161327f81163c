//===- Hardware.cpp - clusters, a rank's share, group topology ------------===//

#include "autoshard/CostModel/Hardware.h"

#include <algorithm>

using namespace autoshard::cost;

ClusterSpec autoshard::cost::makeCluster(const DeviceSpec &device,
                                         int64_t worldSize) {
  ClusterSpec cluster;
  cluster.device = device;
  bool fullNodes = device.kind == DeviceKind::GPU &&
                   worldSize > device.devicesPerNode &&
                   worldSize % device.devicesPerNode == 0;
  if (fullNodes) {
    cluster.nodes = worldSize / device.devicesPerNode;
    cluster.ranksPerNode = device.devicesPerNode;
  } else {
    // One node: every rank of a CPU cluster, the GPUs of a small world, or
    // a world that fills no whole number of nodes (verifyCluster says so).
    cluster.nodes = 1;
    cluster.ranksPerNode = worldSize;
  }
  return cluster;
}

std::string autoshard::cost::verifyCluster(const ClusterSpec &cluster) {
  const DeviceSpec &device = cluster.device;
  if (cluster.nodes < 1 || cluster.ranksPerNode < 1)
    return "a cluster needs at least one node and one rank per node (got " +
           std::to_string(cluster.nodes) + " nodes of " +
           std::to_string(cluster.ranksPerNode) + " ranks)";
  if (device.kind == DeviceKind::GPU &&
      cluster.ranksPerNode > device.devicesPerNode)
    return "'" + device.name + "' has " +
           std::to_string(device.devicesPerNode) +
           " GPUs per node, one rank each: " +
           std::to_string(cluster.ranksPerNode) +
           " ranks per node do not fit; use a multiple of " +
           std::to_string(device.devicesPerNode) +
           " ranks, or at most that many on one node";
  if (cluster.nodes > 1 && !device.hasNetwork())
    return "'" + device.name +
           "' describes no network between nodes: a cluster of it has one "
           "node (got " +
           std::to_string(cluster.nodes) + ")";
  return "";
}

/// The fraction of a node's shared resources one rank has.
static double rankShare(const ClusterSpec &cluster) {
  return cluster.device.kind == DeviceKind::CPU
             ? 1.0 / double(cluster.ranksPerNode)
             : 1.0;
}

int64_t autoshard::cost::rankMemoryBytes(const ClusterSpec &cluster) {
  return int64_t(double(cluster.device.memoryBytes) * rankShare(cluster));
}

double autoshard::cost::rankPeakFlops(const ClusterSpec &cluster, bool bf16) {
  const DeviceSpec &device = cluster.device;
  return (bf16 ? device.peakFlopsBF16 : device.peakFlopsF32) *
         rankShare(cluster);
}

double autoshard::cost::rankMemoryBandwidth(const ClusterSpec &cluster) {
  // A CPU node's bandwidth is shared by the ranks that run at once: with
  // more ranks than cores, the others are descheduled, not streaming
  // (measured: one rank's AdamW step with 4 ranks on 2 cores runs at half
  // the node's bandwidth, bench/README.md).
  const DeviceSpec &device = cluster.device;
  if (device.kind == DeviceKind::CPU && device.cores > 0 &&
      cluster.ranksPerNode > device.cores)
    return device.memoryBandwidth / double(device.cores);
  return device.memoryBandwidth * rankShare(cluster);
}

/// Host memory and NVMe belong to the node and are shared by its ranks.
static double perRankOfNode(const ClusterSpec &cluster, double nodeFigure) {
  return nodeFigure / double(cluster.ranksPerNode);
}

int64_t autoshard::cost::rankHostMemoryBytes(const ClusterSpec &cluster) {
  return int64_t(
      perRankOfNode(cluster, double(cluster.device.hostMemoryBytes)));
}

double autoshard::cost::rankHostMemoryBandwidth(const ClusterSpec &cluster) {
  return perRankOfNode(cluster, cluster.device.hostMemoryBandwidth);
}

double autoshard::cost::rankNvmeBandwidth(const ClusterSpec &cluster) {
  return perRankOfNode(cluster, cluster.device.nvmeBandwidth);
}

int64_t autoshard::cost::rankNvmeBytes(const ClusterSpec &cluster) {
  return int64_t(perRankOfNode(cluster, double(cluster.device.nvmeBytes)));
}

GroupTopology autoshard::cost::groupTopology(int64_t size, int64_t stride,
                                             int64_t clusterRanksPerNode) {
  GroupTopology group;
  group.size = std::max<int64_t>(size, 1);
  stride = std::max<int64_t>(stride, 1);
  clusterRanksPerNode = std::max<int64_t>(clusterRanksPerNode, 1);
  // Ranks 0, stride, 2 stride, ...: a node of P ranks holds ceil(P / stride)
  // of them when the stride is below P, one otherwise.
  int64_t perNode = stride >= clusterRanksPerNode
                        ? 1
                        : (clusterRanksPerNode + stride - 1) / stride;
  group.ranksPerNode = std::min(perNode, group.size);
  group.nodes = (group.size + group.ranksPerNode - 1) / group.ranksPerNode;
  return group;
}
