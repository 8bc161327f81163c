//===- CommTime.h - alpha-beta time of one collective -----------*- C++ -*-===//
//
// The time of a collective is a latency term (a fixed launch cost plus one
// step latency per ring step or tree hop, NCCL's own tuning model) plus a
// bandwidth term (bytes over the group's bus bandwidth, as nccl-tests
// defines it). docs/CostModel.md, "Communication time", has the formulas.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_COSTMODEL_COMMTIME_H
#define AUTOSHARD_COSTMODEL_COMMTIME_H

#include "autoshard/CostModel/Hardware.h"
#include "autoshard/CostModel/Traffic.h"

namespace autoshard::cost {

enum class CollectiveAlgorithm { Ring, Tree };
/// Which algorithm an all-reduce uses: one of them, or the faster of the two
/// as NCCL's tuner picks. All-gather and reduce-scatter always use the ring.
enum class AlgorithmChoice { Ring, Tree, Fastest };

/// The alpha and beta figures of a cluster.
struct LinkParameters {
  double launchLatency = 0;
  double ringStepIntraNode = 0;
  double ringStepInterNode = 0;
  double treeStepIntraNode = 0;
  double treeStepInterNode = 0;
  /// Bus bandwidth between ranks of one node, bytes/s, and per kind
  /// (AllReduce, AllGather, ReduceScatter: Traffic.h's order) where the
  /// device gives one.
  double intraNodeBandwidth = 0;
  double intraNodeBandwidthByKind[3] = {0, 0, 0};
  /// Per kind, the bus bandwidth by buffer size where the device gives it
  /// (DeviceSpec::BandwidthCurve, already scaled by the efficiency).
  DeviceSpec::BandwidthCurve intraNodeCurveByKind[3];
  /// Network bandwidth of one rank, bytes/s: a GPU's NIC, or a CPU node's
  /// network shared by its ranks.
  double interNodeBandwidthPerRank = 0;
};

/// The cluster's figures, bandwidths scaled by `bandwidthEfficiency` (the
/// fraction of the link rate a collective attains; 1 uses the data sheet).
LinkParameters linkParameters(const ClusterSpec &cluster,
                              double bandwidthEfficiency = 1.0);

/// The bus bandwidth of a group: the intra-node bandwidth on one node;
/// across nodes the smaller of that and the network bandwidth of the
/// group's ranks on one node (NCCL spreads its rings over their NICs).
double groupBusBandwidth(const GroupTopology &group,
                         const LinkParameters &link);
/// The same for one collective kind: the device's bandwidth for that kind
/// inside a node when it gives one.
double groupBusBandwidth(const GroupTopology &group, const LinkParameters &link,
                         CollectiveKind kind, double bufferBytes = 0);

/// `curve` at `bytes`: interpolated in log(bytes) and log(bandwidth)
/// between its points, the end values beyond them.
double interpolateBandwidth(const DeviceSpec::BandwidthCurve &curve,
                            double bytes);

/// Ring: launch + (s - s_inter) * ring_step_intra + s_inter *
/// ring_step_inter + wireBytes / busBandwidth, with s = 2(n-1) steps for an
/// all-reduce and n-1 otherwise, s_inter = 2(q-1) or q-1 of them crossing
/// nodes (q nodes). wireBytes is ringBytesPerRank's.
double ringTime(CollectiveKind kind, int64_t wireBytes,
                const GroupTopology &group, const LinkParameters &link);

/// Tree all-reduce (NCCL's double binary tree): launch + 2 ((l-1) *
/// tree_step_intra + ceil(log2 q) * tree_step_inter) + 2 * payloadBytes /
/// busBandwidth, l ranks per node on q nodes.
double treeAllReduceTime(int64_t payloadBytes, const GroupTopology &group,
                         const LinkParameters &link);

struct CollectiveTime {
  double seconds = 0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
};

/// One run of `call` on `cluster`: zero on a group of one rank.
CollectiveTime
collectiveTime(const CollectiveCall &call, const ClusterSpec &cluster,
               const LinkParameters &link,
               AlgorithmChoice allReduce = AlgorithmChoice::Fastest);

/// nccl-tests' bus bandwidth of a collective of `payloadBytes` that took
/// `seconds` on n ranks: S / t times 2(n-1)/n (all-reduce) or (n-1)/n
/// (all-gather, reduce-scatter). The inverse of the ring's bandwidth term.
double busBandwidth(CollectiveKind kind, int64_t groupSize,
                    int64_t payloadBytes, double seconds);

} // namespace autoshard::cost

#endif // AUTOSHARD_COSTMODEL_COMMTIME_H
