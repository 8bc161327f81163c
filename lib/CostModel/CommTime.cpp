//===- CommTime.cpp - alpha-beta collective times -------------------------===//

#include "autoshard/CostModel/CommTime.h"

#include <algorithm>
#include <cmath>

using namespace autoshard::cost;

LinkParameters autoshard::cost::linkParameters(const ClusterSpec &cluster,
                                               double bandwidthEfficiency) {
  const DeviceSpec &device = cluster.device;
  LinkParameters link;
  link.launchLatency = device.collectiveLaunchLatency;
  link.ringStepIntraNode = device.ringStepLatencyIntraNode;
  link.ringStepInterNode = device.ringStepLatencyInterNode;
  link.treeStepIntraNode = device.treeStepLatencyIntraNode;
  link.treeStepInterNode = device.treeStepLatencyInterNode;
  link.intraNodeBandwidth = device.intraNodeBandwidth * bandwidthEfficiency;
  const double byKind[3] = {device.intraNodeAllReduceBandwidth,
                            device.intraNodeAllGatherBandwidth,
                            device.intraNodeReduceScatterBandwidth};
  const DeviceSpec::BandwidthCurve *curves[3] = {
      &device.intraNodeAllReduceCurve, &device.intraNodeAllGatherCurve,
      &device.intraNodeReduceScatterCurve};
  for (int k = 0; k < 3; ++k) {
    link.intraNodeBandwidthByKind[k] =
        (byKind[k] > 0 ? byKind[k] : device.intraNodeBandwidth) *
        bandwidthEfficiency;
    for (const auto &[bytes, rate] : *curves[k])
      link.intraNodeCurveByKind[k].push_back(
          {bytes, rate * bandwidthEfficiency});
  }
  // A GPU rank has its own NIC; the ranks of a CPU node share its network.
  double perRank =
      device.kind == DeviceKind::CPU
          ? device.interNodeBandwidth / double(cluster.ranksPerNode)
          : device.interNodeBandwidth;
  link.interNodeBandwidthPerRank = perRank * bandwidthEfficiency;
  return link;
}

/// The group's bus bandwidth when its ranks inside a node move data at
/// `intra` bytes/s.
static double groupBusBandwidthAt(const GroupTopology &group,
                                  const LinkParameters &link, double intra) {
  if (group.nodes <= 1)
    return intra;
  // Each ring crosses between nodes through one of the group's NICs; NCCL
  // runs one ring per NIC, so the node's share of the group brings
  // ranksPerNode NICs to the collective.
  return std::min(intra,
                  double(group.ranksPerNode) * link.interNodeBandwidthPerRank);
}

double autoshard::cost::groupBusBandwidth(const GroupTopology &group,
                                          const LinkParameters &link) {
  return groupBusBandwidthAt(group, link, link.intraNodeBandwidth);
}

double
autoshard::cost::interpolateBandwidth(const DeviceSpec::BandwidthCurve &curve,
                                      double bytes) {
  if (bytes <= curve.front().first)
    return curve.front().second;
  if (bytes >= curve.back().first)
    return curve.back().second;
  size_t i = 1;
  while (curve[i].first < bytes)
    ++i;
  const auto &[x0, y0] = curve[i - 1];
  const auto &[x1, y1] = curve[i];
  double t = std::log(bytes / x0) / std::log(x1 / x0);
  return y0 * std::pow(y1 / y0, t);
}

double autoshard::cost::groupBusBandwidth(const GroupTopology &group,
                                          const LinkParameters &link,
                                          CollectiveKind kind,
                                          double bufferBytes) {
  const int k = static_cast<int>(kind);
  double intra = link.intraNodeBandwidth;
  if (!link.intraNodeCurveByKind[k].empty() && bufferBytes > 0)
    intra = interpolateBandwidth(link.intraNodeCurveByKind[k], bufferBytes);
  else if (link.intraNodeBandwidthByKind[k] > 0)
    intra = link.intraNodeBandwidthByKind[k];
  return groupBusBandwidthAt(group, link, intra);
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
  // The buffer the collective moves (what a bandwidth curve is measured
  // against): each rank sends (n-1)/n of it, twice for an all-reduce.
  double buffer =
      double(wireBytes) * double(n) / double(allReduce ? 2 * (n - 1) : n - 1);
  return latency +
         double(wireBytes) / groupBusBandwidth(group, link, kind, buffer);
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
                       groupBusBandwidth(group, link, CollectiveKind::AllReduce,
                                         double(payloadBytes));
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
