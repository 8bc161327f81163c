//===- CommTime.cpp - alpha-beta collective times -------------------------===//

#include "autoshard/CostModel/CommTime.h"

#include <algorithm>

using namespace autoshard::cost;

LinkParameters autoshard::cost::linkParameters(const ClusterSpec &cluster,
                                               double bandwidthEfficiency) {
  const DeviceSpec &device = cluster.device;
  LinkParameters link;
  link.launchLatency = device.collectiveLaunchLatency;
  // More ranks than cores on a CPU node: each collective waits for peers
  // the scheduler has set aside.
  if (device.kind == DeviceKind::CPU && device.cores > 0 &&
      cluster.ranksPerNode > device.cores)
    link.launchLatency += device.oversubscribedCollectiveLatency;
  link.ringStepIntraNode = device.ringStepLatencyIntraNode;
  link.ringStepInterNode = device.ringStepLatencyInterNode;
  link.treeStepIntraNode = device.treeStepLatencyIntraNode;
  link.treeStepInterNode = device.treeStepLatencyInterNode;
  link.intraNodeBandwidth = device.intraNodeBandwidth * bandwidthEfficiency;
  const double byKind[3] = {device.intraNodeAllReduceBandwidth,
                            device.intraNodeAllGatherBandwidth,
                            device.intraNodeReduceScatterBandwidth};
  for (int k = 0; k < 3; ++k)
    link.intraNodeBandwidthByKind[k] =
        (byKind[k] > 0 ? byKind[k] : device.intraNodeBandwidth) *
        bandwidthEfficiency;
  // A GPU rank has its own NIC; the ranks of a CPU node share its network.
  double perRank =
      device.kind == DeviceKind::CPU
          ? device.interNodeBandwidth / double(cluster.ranksPerNode)
          : device.interNodeBandwidth;
  link.interNodeBandwidthPerRank = perRank * bandwidthEfficiency;
  return link;
}

double autoshard::cost::groupBusBandwidth(const GroupTopology &group,
                                          const LinkParameters &link) {
  if (group.nodes <= 1)
    return link.intraNodeBandwidth;
  // Each ring crosses between nodes through one of the group's NICs; NCCL
  // runs one ring per NIC, so the node's share of the group brings
  // ranksPerNode NICs to the collective.
  return std::min(link.intraNodeBandwidth,
                  double(group.ranksPerNode) * link.interNodeBandwidthPerRank);
}

double autoshard::cost::groupBusBandwidth(const GroupTopology &group,
                                          const LinkParameters &link,
                                          CollectiveKind kind) {
  LinkParameters forKind = link;
  double own = link.intraNodeBandwidthByKind[static_cast<int>(kind)];
  if (own > 0)
    forKind.intraNodeBandwidth = own;
  return groupBusBandwidth(group, forKind);
}

double autoshard::cost::ringTime(CollectiveKind kind, int64_t wireBytes,
                                 const GroupTopology &group,
                                 const LinkParameters &link) {
  const int64_t n = group.size, q = group.nodes;
  if (n <= 1)
    return 0;
  bool allReduce = kind == CollectiveKind::AllReduce;
  int64_t steps = allReduce ? 2 * (n - 1) : n - 1;
  int64_t interSteps = q > 1 ? (allReduce ? 2 * (q - 1) : q - 1) : 0;
  double latency = link.launchLatency +
                   double(steps - interSteps) * link.ringStepIntraNode +
                   double(interSteps) * link.ringStepInterNode;
  return latency + double(wireBytes) / groupBusBandwidth(group, link, kind);
}

static int64_t ceilLog2(int64_t x) {
  int64_t bits = 0;
  while ((int64_t(1) << bits) < x)
    ++bits;
  return bits;
}

double autoshard::cost::treeAllReduceTime(int64_t payloadBytes,
                                          const GroupTopology &group,
                                          const LinkParameters &link) {
  if (group.size <= 1)
    return 0;
  // Reduce up the tree, broadcast down: a chain inside each node and a
  // binary tree of depth ceil(log2 q) across nodes, each walked twice.
  double latency =
      link.launchLatency +
      2.0 * (double(group.ranksPerNode - 1) * link.treeStepIntraNode +
             double(ceilLog2(group.nodes)) * link.treeStepInterNode);
  // Pipelined, each rank receives and sends the whole buffer once per
  // direction: algorithm bandwidth is half the bus bandwidth (NCCL's tuner
  // converts tree bus bandwidth to algorithm bandwidth with a factor 0.5).
  return latency + 2.0 * double(payloadBytes) /
                       groupBusBandwidth(group, link, CollectiveKind::AllReduce);
}

CollectiveTime autoshard::cost::collectiveTime(const CollectiveCall &call,
                                               const ClusterSpec &cluster,
                                               const LinkParameters &link,
                                               AlgorithmChoice allReduce) {
  CollectiveTime time;
  if (call.groupSize <= 1)
    return time;
  GroupTopology group =
      groupTopology(call.groupSize, call.groupStride, cluster.ranksPerNode);
  double ring = ringTime(call.kind, call.wireBytes(), group, link);
  time.seconds = ring;
  if (call.kind != CollectiveKind::AllReduce ||
      allReduce == AlgorithmChoice::Ring)
    return time;
  double tree = treeAllReduceTime(call.packedBytes(), group, link);
  if (allReduce == AlgorithmChoice::Tree || tree < ring) {
    time.seconds = tree;
    time.algorithm = CollectiveAlgorithm::Tree;
  }
  return time;
}

double autoshard::cost::busBandwidth(CollectiveKind kind, int64_t groupSize,
                                     int64_t payloadBytes, double seconds) {
  if (groupSize <= 1 || seconds <= 0)
    return 0;
  double algorithmBandwidth = double(payloadBytes) / seconds;
  double n = double(groupSize);
  double factor =
      kind == CollectiveKind::AllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
  return algorithmBandwidth * factor;
}
