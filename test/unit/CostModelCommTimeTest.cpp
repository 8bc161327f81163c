// The alpha-beta time of collectives against hand-computed cases: ring and
// tree, inside a node and across nodes, and nccl-tests' bus bandwidth.
#include "autoshard/CostModel/CommTime.h"
#include "autoshard/CostModel/DeviceCatalog.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace autoshard::cost;

namespace {

/// NCCL's Simple-protocol constants and an H100 node's links (the figures
/// of data/devices/h100-80gb.json).
LinkParameters hopperLinks() {
  LinkParameters link;
  link.launchLatency = 8.4e-6;
  link.ringStepIntraNode = 3.4e-6;
  link.ringStepInterNode = 14e-6;
  link.treeStepIntraNode = 4.0e-6;
  link.treeStepInterNode = 14e-6;
  link.intraNodeBandwidth = 450e9;
  link.interNodeBandwidthPerRank = 50e9;
  return link;
}

TEST(CostModelCommTime, GroupTopology) {
  auto expect = [](int64_t size, int64_t stride, int64_t perNode,
                   int64_t ranksPerNode, int64_t nodes) {
    GroupTopology group = groupTopology(size, stride, perNode);
    EXPECT_EQ(group.ranksPerNode, ranksPerNode)
        << size << " ranks " << stride << " apart, " << perNode << "/node";
    EXPECT_EQ(group.nodes, nodes)
        << size << " ranks " << stride << " apart, " << perNode << "/node";
  };
  expect(8, 1, 8, 8, 1);   // one full node
  expect(4, 1, 8, 4, 1);   // a shard group inside a node
  expect(64, 1, 8, 8, 8);  // the world of 8 nodes
  expect(2, 8, 8, 1, 2);   // replicas of an 8-rank shard: one per node
  expect(4, 4, 8, 2, 2);   // ranks 0, 4, 8, 12: two per node
  expect(16, 8, 8, 1, 16); // 16 replicas across 16 nodes
  expect(4, 1, 4, 4, 1);   // 4 ranks on one CPU node
}

TEST(CostModelCommTime, RingInsideANode) {
  // 8 ranks, 2^28 f32 elements: each rank sends 2 * 7 * 2^25 * 4 bytes over
  // NVLink at 450 GB/s, after 8.4 us + 14 steps of 3.4 us.
  LinkParameters link = hopperLinks();
  GroupTopology node = groupTopology(8, 1, 8);
  int64_t wire =
      ringBytesPerRank(CollectiveKind::AllReduce, int64_t(1) << 28, 8, 4);
  EXPECT_EQ(wire, int64_t(14) * (int64_t(1) << 25) * 4);
  EXPECT_DOUBLE_EQ(ringTime(CollectiveKind::AllReduce, wire, node, link),
                   8.4e-6 + 14 * 3.4e-6 + double(wire) / 450e9);
  // An all-gather takes n - 1 steps.
  int64_t gather =
      ringBytesPerRank(CollectiveKind::AllGather, int64_t(1) << 28, 8, 2);
  EXPECT_DOUBLE_EQ(ringTime(CollectiveKind::AllGather, gather, node, link),
                   8.4e-6 + 7 * 3.4e-6 + double(gather) / 450e9);
}

TEST(CostModelCommTime, RingAcrossNodes) {
  // 2 nodes of 8: 2 of the 30 all-reduce steps cross the network; the
  // bandwidth is the 8 NICs of a node's ranks, 8 * 50 GB/s, below NVLink.
  LinkParameters link = hopperLinks();
  GroupTopology world = groupTopology(16, 1, 8);
  EXPECT_DOUBLE_EQ(groupBusBandwidth(world, link), 400e9);
  const int64_t wire = 1 << 30;
  EXPECT_DOUBLE_EQ(ringTime(CollectiveKind::AllReduce, wire, world, link),
                   8.4e-6 + 28 * 3.4e-6 + 2 * 14e-6 + double(wire) / 400e9);
  // Reduce-scatter: 15 steps, 1 crossing.
  EXPECT_DOUBLE_EQ(ringTime(CollectiveKind::ReduceScatter, wire, world, link),
                   8.4e-6 + 14 * 3.4e-6 + 1 * 14e-6 + double(wire) / 400e9);
}

TEST(CostModelCommTime, HybridIsHierarchical) {
  // 16 ranks as 2 replicas of 8: the shard group stays on NVLink, the
  // replica all-reduce has one rank per node and one NIC, 50 GB/s.
  LinkParameters link = hopperLinks();
  EXPECT_DOUBLE_EQ(groupBusBandwidth(groupTopology(8, 1, 8), link), 450e9);
  GroupTopology replicas = groupTopology(2, 8, 8);
  EXPECT_DOUBLE_EQ(groupBusBandwidth(replicas, link), 50e9);
  EXPECT_DOUBLE_EQ(ringTime(CollectiveKind::AllReduce, 1000, replicas, link),
                   8.4e-6 + 2 * 14e-6 + 1000 / 50e9);
}

TEST(CostModelCommTime, TreeAllReduce) {
  // 2 nodes of 8: a chain of 7 NVLink hops and log2(2) = 1 network hop,
  // each walked up and down; the whole buffer twice at the bus bandwidth.
  LinkParameters link = hopperLinks();
  GroupTopology world = groupTopology(16, 1, 8);
  EXPECT_DOUBLE_EQ(treeAllReduceTime(4096, world, link),
                   8.4e-6 + 2 * (7 * 4.0e-6 + 1 * 14e-6) + 2 * 4096 / 400e9);
  // 8 nodes of 8: ceil(log2 8) = 3 network hops.
  GroupTopology big = groupTopology(64, 1, 8);
  EXPECT_DOUBLE_EQ(treeAllReduceTime(0, big, link),
                   8.4e-6 + 2 * (7 * 4.0e-6 + 3 * 14e-6));
}

ClusterSpec hopperCluster(int64_t nodes) {
  ClusterSpec cluster;
  cluster.device.name = "h";
  cluster.device.devicesPerNode = 8;
  cluster.nodes = nodes;
  cluster.ranksPerNode = 8;
  return cluster;
}

TEST(CostModelCommTime, FastestPicksTheCheaperAlgorithm) {
  LinkParameters link = hopperLinks();
  CollectiveCall call;
  call.kind = CollectiveKind::AllReduce;
  call.groupSize = 64;
  call.elementBytes = 4;
  // One f32 on 8 nodes: latency decides; the tree's 2 (7 + 3) hops beat the
  // ring's 126 steps.
  call.memberElements = {1};
  CollectiveTime small = collectiveTime(call, hopperCluster(8), link);
  EXPECT_EQ(small.algorithm, CollectiveAlgorithm::Tree);
  EXPECT_DOUBLE_EQ(small.seconds,
                   treeAllReduceTime(256, groupTopology(64, 1, 8), link));
  // A gigabyte on 8 nodes: the ring's bandwidth term (2 * 63/64 of the
  // buffer) is barely below the tree's (twice the buffer), not enough to
  // pay for its 126 steps: the tree still wins, as NCCL's tuner finds at
  // scale.
  call.memberElements = {int64_t(1) << 28};
  EXPECT_EQ(collectiveTime(call, hopperCluster(8), link).algorithm,
            CollectiveAlgorithm::Tree);
  // Inside one node the ring wins at any size: fewer steps (14 of 3.4 us
  // against 2 * 7 of 4.0 us) and 2 * 7/8 of the buffer against 2.
  call.groupSize = 8;
  for (int64_t elements : {int64_t(1), int64_t(1) << 28}) {
    call.memberElements = {elements};
    CollectiveTime inNode = collectiveTime(call, hopperCluster(1), link);
    EXPECT_EQ(inNode.algorithm, CollectiveAlgorithm::Ring);
    EXPECT_DOUBLE_EQ(inNode.seconds,
                     ringTime(CollectiveKind::AllReduce, call.wireBytes(),
                              groupTopology(8, 1, 8), link));
  }
  // Forcing an algorithm prices it.
  call.groupSize = 64;
  call.memberElements = {1};
  EXPECT_EQ(collectiveTime(call, hopperCluster(8), link, AlgorithmChoice::Ring)
                .algorithm,
            CollectiveAlgorithm::Ring);
  // Gathers always use the ring; a group of one costs nothing.
  call.kind = CollectiveKind::AllGather;
  EXPECT_EQ(collectiveTime(call, hopperCluster(8), link).algorithm,
            CollectiveAlgorithm::Ring);
  call.groupSize = 1;
  EXPECT_EQ(collectiveTime(call, hopperCluster(8), link).seconds, 0.0);
}

TEST(CostModelCommTime, BusBandwidthRecoversTheLinkRate) {
  // Without latency, nccl-tests' bus bandwidth of a ring collective is the
  // link's: busbw = S/t * 2(n-1)/n (all-reduce) or (n-1)/n.
  LinkParameters link = hopperLinks();
  link.launchLatency = link.ringStepIntraNode = link.ringStepInterNode = 0;
  for (int64_t n : {2, 4, 8}) {
    GroupTopology node = groupTopology(n, 1, 8);
    const int64_t elements = int64_t(n) << 20, payload = elements * 4;
    for (CollectiveKind kind :
         {CollectiveKind::AllReduce, CollectiveKind::AllGather,
          CollectiveKind::ReduceScatter}) {
      double t =
          ringTime(kind, ringBytesPerRank(kind, elements, n, 4), node, link);
      EXPECT_NEAR(busBandwidth(kind, n, payload, t), 450e9, 1.0)
          << stringify(kind) << " on " << n;
    }
  }
  EXPECT_DOUBLE_EQ(busBandwidth(CollectiveKind::AllReduce, 4, 1000, 1e-6),
                   1000 / 1e-6 * 1.5);
}

TEST(CostModelCommTime, LinkParametersOfAClusterShareACpuNodesNetwork) {
  DeviceSpec cpu;
  cpu.kind = DeviceKind::CPU;
  cpu.intraNodeBandwidth = 2e9;
  cpu.interNodeBandwidth = 10e9;
  ClusterSpec cluster{cpu, 2, 4};
  LinkParameters link = linkParameters(cluster, 0.5);
  EXPECT_DOUBLE_EQ(link.intraNodeBandwidth, 1e9);
  EXPECT_DOUBLE_EQ(link.interNodeBandwidthPerRank, 10e9 / 4 * 0.5);
  DeviceSpec gpu;
  gpu.interNodeBandwidth = 50e9;
  EXPECT_DOUBLE_EQ(
      linkParameters(ClusterSpec{gpu, 2, 8}).interNodeBandwidthPerRank, 50e9);
}

} // namespace

namespace {

/// The CPU node's own figures: Open MPI's collectives attain different bus
/// bandwidths by kind, a collective costs the same fixed latency whether or
/// not the ranks outnumber the cores, and only the ranks that run at once
/// share the node's memory bandwidth (data/devices/cpu-node.json).
TEST(CostModelCommTime, CpuNodeKindsAndOversubscription) {
  llvm::Expected<DeviceSpec> cpu = lookupDevice("cpu-node");
  ASSERT_TRUE(bool(cpu)) << llvm::toString(cpu.takeError());
  ASSERT_EQ(cpu->cores, 2);
  ClusterSpec two = makeCluster(*cpu, 2), four = makeCluster(*cpu, 4);
  LinkParameters fits = linkParameters(two), oversubscribed =
                                                 linkParameters(four);
  EXPECT_DOUBLE_EQ(fits.launchLatency, cpu->collectiveLaunchLatency);
  EXPECT_DOUBLE_EQ(oversubscribed.launchLatency, cpu->collectiveLaunchLatency);

  GroupTopology node = groupTopology(4, 1, 4);
  double steps = 3 * oversubscribed.ringStepIntraNode;
  // A reduce-scatter of a 64 MiB buffer: its kind's rate at that size.
  int64_t wire = (int64_t(64) << 20) / 4 * 3;
  EXPECT_DOUBLE_EQ(
      ringTime(CollectiveKind::ReduceScatter, wire, node, oversubscribed),
      oversubscribed.launchLatency + steps +
          double(wire) /
              interpolateBandwidth(cpu->intraNodeReduceScatterCurve,
                                   double(int64_t(64) << 20)));
  EXPECT_LT(cpu->intraNodeReduceScatterBandwidth,
            cpu->intraNodeAllGatherBandwidth);
  // With a curve by buffer size the buffer decides: each rank sends 3/4 of
  // a 1 MiB all-gather at the 1 MiB point's rate, of a 64 MiB one at the
  // 64 MiB point's, and a size between two points reads between them.
  ASSERT_FALSE(cpu->intraNodeAllGatherCurve.empty());
  const auto &curve = cpu->intraNodeAllGatherCurve;
  for (const auto &[bytes, rate] : curve) {
    int64_t sent = int64_t(bytes) / 4 * 3;
    EXPECT_DOUBLE_EQ(
        ringTime(CollectiveKind::AllGather, sent, node, oversubscribed),
        oversubscribed.launchLatency + steps + double(sent) / rate);
  }
  double mid = std::sqrt(curve[0].first * curve[1].first);
  EXPECT_NEAR(interpolateBandwidth(curve, mid),
              std::sqrt(curve[0].second * curve[1].second), 1.0);
  EXPECT_EQ(interpolateBandwidth(curve, 1.0), curve.front().second);
  EXPECT_EQ(interpolateBandwidth(curve, 1e15), curve.back().second);

  EXPECT_DOUBLE_EQ(rankMemoryBandwidth(makeCluster(*cpu, 1)),
                   cpu->memoryBandwidth);
  EXPECT_DOUBLE_EQ(rankMemoryBandwidth(two), cpu->memoryBandwidth / 2);
  EXPECT_DOUBLE_EQ(rankMemoryBandwidth(four), cpu->memoryBandwidth / 2);
}

} // namespace
