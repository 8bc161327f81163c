// The cost of a plan: presets and plan checks, candidate plans, compute
// time, overlap, offload time and whether a plan fits.
#include "autoshard/CostModel/CostModel.h"

#include <gtest/gtest.h>

#include <set>

using namespace autoshard::cost;

namespace {

DeviceSpec testGpu() {
  DeviceSpec device;
  device.name = "test-gpu";
  device.kind = DeviceKind::GPU;
  device.devicesPerNode = 8;
  device.memoryBytes = int64_t(80) << 30;
  device.peakFlopsBF16 = 1e15;
  device.peakFlopsF32 = 1e14;
  device.memoryBandwidth = 2e12;
  device.intraNodeBandwidth = 4e11;
  device.interNodeBandwidth = 5e10;
  device.collectiveLaunchLatency = 1e-5;
  device.ringStepLatencyIntraNode = 1e-6;
  device.ringStepLatencyInterNode = 1e-5;
  device.treeStepLatencyIntraNode = 1e-6;
  device.treeStepLatencyInterNode = 1e-5;
  device.hostLinkBandwidth = 5e10;
  device.hostMemoryBytes = int64_t(2) << 40;
  device.hostMemoryBandwidth = 4e11;
  device.nvmeBandwidth = 4e10;
  device.nvmeBytes = int64_t(30) << 40;
  return device;
}

DeviceSpec testCpu() {
  DeviceSpec device;
  device.name = "test-cpu";
  device.kind = DeviceKind::CPU;
  device.devicesPerNode = 1;
  device.memoryBytes = int64_t(24) << 30;
  device.peakFlopsBF16 = device.peakFlopsF32 = 2e11;
  device.memoryBandwidth = 3e10;
  device.intraNodeBandwidth = 2e9;
  device.collectiveLaunchLatency = 1e-7;
  device.ringStepLatencyIntraNode = 1e-6;
  device.treeStepLatencyIntraNode = 1e-6;
  return device;
}

Plan preset(const std::string &name, int64_t world, int64_t group = 0) {
  std::optional<Plan> plan = presetPlan(name, world, group);
  EXPECT_TRUE(plan.has_value()) << name;
  return plan.value_or(Plan());
}

TransformerShape gpt2Small() {
  return {
      TransformerShape::Family::GPT2, 12, 768, 12, 12, 3072, 50257, 1024, true};
}

ModelDescription gpt2(int64_t batchRows, Precision precision) {
  return describeTransformer("gpt2-small", gpt2Small(), batchRows, 1024, 1,
                             Optimizer::AdamW, precision, true);
}

/// Elements one rank holds of every tensor sharded over n ranks.
int64_t shardElements(const ModelDescription &model, int64_t n) {
  int64_t elements = 0;
  for (const ParameterTensor &p : model.parameters)
    elements += ceilDiv(p.elements, n);
  return elements;
}

TEST(CostModelPlan, PresetsAreTheStrategyTable) {
  EXPECT_EQ(presetNames(),
            (std::vector<std::string>{"ddp", "zero1", "zero2", "zero3", "fsdp",
                                      "hybrid"}));
  Plan zero2 = preset("zero2", 8);
  EXPECT_EQ(zero2.layout.optimizerStates, Placement::Sharded);
  EXPECT_EQ(zero2.layout.gradients, Placement::Sharded);
  EXPECT_EQ(zero2.layout.parameters, Placement::Replicated);
  EXPECT_EQ(zero2.layout.shardGroupSize, 8);
  EXPECT_EQ(zero2.bucketCapBytes, int64_t(25) << 20);
  EXPECT_EQ(zero2.prefetchDepth, 1);
  EXPECT_EQ(preset("fsdp", 8).layout.unit, GatherUnit::Block);
  EXPECT_EQ(preset("zero3", 8).layout.unit, GatherUnit::Parameter);
  EXPECT_EQ(preset("hybrid", 16, 8).layout.shardGroupSize, 8);
  EXPECT_FALSE(presetPlan("zero4", 8));
  EXPECT_EQ(describePlan(preset("hybrid", 16, 8)),
            "hybrid(G=8) reshard=after_forward bucket=25MiB prefetch=1 "
            "offload=none/none checkpoint=none");
}

TEST(CostModelPlan, VerifyNamesWhatIsWrong) {
  ModelDescription model = gpt2(8, Precision::BF16);
  ClusterSpec gpus = makeCluster(testGpu(), 8);
  EXPECT_EQ(verifyPlan(preset("fsdp", 8), model, gpus), "");
  EXPECT_EQ(verifyPlan(preset("hybrid", 8, 3), model, gpus),
            "the plan: shard group size 3 does not divide the world size 8 "
            "(valid: 1, 2, 4, 8)");
  Plan bad = preset("ddp", 8);
  bad.layout.gradients = Placement::Sharded;
  EXPECT_NE(verifyPlan(bad, model, gpus)
                .find("sharded gradients need sharded optimizer states"),
            std::string::npos);
  Plan offloadDdp = preset("ddp", 8);
  offloadDdp.optimizerOffload = Offload::Cpu;
  offloadDdp.parameterOffload = Offload::Cpu;
  EXPECT_NE(verifyPlan(offloadDdp, model, gpus)
                .find("parameter offload moves parameter shards"),
            std::string::npos);
  Plan paramsOnly = preset("zero3", 8);
  paramsOnly.parameterOffload = Offload::Nvme;
  EXPECT_NE(verifyPlan(paramsOnly, model, gpus)
                .find("needs the optimizer offloaded too"),
            std::string::npos);
  Plan cpuOffload = preset("zero2", 4);
  cpuOffload.optimizerOffload = Offload::Cpu;
  EXPECT_NE(verifyPlan(cpuOffload, model, makeCluster(testCpu(), 4))
                .find("'test-cpu' cannot offload"),
            std::string::npos);
  Plan everyMicroBatch = preset("zero1", 8);
  everyMicroBatch.reduceEvery = ReduceEvery::MicroBatch;
  EXPECT_NE(verifyPlan(everyMicroBatch, model, gpus)
                .find("reduction every micro-batch reduce-scatters sharded "
                      "gradients, and this plan shards none"),
            std::string::npos);
  Plan group = preset("fsdp", 8);
  group.parameterLayouts["no.such.weight"] = Layout();
  EXPECT_NE(verifyPlan(group, model, gpus).find("'no.such.weight'"),
            std::string::npos);
}

TEST(CostModelPlan, CandidatesCoverTheSpace) {
  ModelDescription model = gpt2(64, Precision::BF16);
  // 16 H100-like ranks: ddp, zero1, zero2 vary checkpointing (3) and
  // optimizer offload (3); zero3, fsdp and hybrid(G=8) also reshard (2),
  // and under bf16 the optimizer's 3 tiers only: its parameters are the f32
  // masters, which move with the optimizer, so parameter offload adds no
  // plan of its own.
  std::vector<Plan> plans =
      enumerateCandidatePlans(model, makeCluster(testGpu(), 16));
  EXPECT_EQ(plans.size(), size_t(3 * 3 * 3 + 3 * 2 * 3 * 3));
  // In f32 the parameters themselves move: the 7 valid offload pairs.
  EXPECT_EQ(enumerateCandidatePlans(gpt2(64, Precision::F32),
                                    makeCluster(testGpu(), 16))
                .size(),
            size_t(3 * 3 * 3 + 3 * 2 * 3 * 7));
  std::set<std::string> names;
  for (const Plan &plan : plans) {
    EXPECT_EQ(verifyPlan(plan, model, makeCluster(testGpu(), 16)), "");
    names.insert(describePlan(plan));
  }
  EXPECT_EQ(names.size(), plans.size()) << "duplicate candidates";
  // A CPU node: no offload, no hybrid (one node holds the world).
  EXPECT_EQ(enumerateCandidatePlans(model, makeCluster(testCpu(), 4)).size(),
            size_t(3 * 3 + 2 * 2 * 3));
  // A narrower space.
  CandidateSpace space;
  space.presets = {"ddp", "fsdp"};
  space.checkpointing = {ActivationCheckpointing::None};
  space.offload = false;
  space.prefetchDepths = {1, 2};
  EXPECT_EQ(
      enumerateCandidatePlans(model, makeCluster(testGpu(), 16), space).size(),
      size_t(2 + 2 * 2));
  // Reducing every micro-batch is a variant of the plans that shard
  // gradients (fsdp here), and only under gradient accumulation.
  space.reduceEvery = {ReduceEvery::Step, ReduceEvery::MicroBatch};
  EXPECT_EQ(
      enumerateCandidatePlans(model, makeCluster(testGpu(), 16), space).size(),
      size_t(2 + 2 * 2));
  model.microBatches = 4;
  std::vector<Plan> accumulating =
      enumerateCandidatePlans(model, makeCluster(testGpu(), 16), space);
  EXPECT_EQ(accumulating.size(), size_t(2 + 2 * 2 * 2));
  for (const Plan &plan : accumulating)
    if (plan.reduceEvery == ReduceEvery::MicroBatch)
      EXPECT_EQ(plan.name, "fsdp");
  // A pinned optimizer tier: only plans that offload the states there (and
  // the parameters nowhere or to the same tier, the valid pairs).
  CandidateSpace pinned;
  pinned.presets = {"zero3"};
  pinned.checkpointing = {ActivationCheckpointing::None};
  pinned.reshards = {Reshard::AfterForward};
  pinned.optimizerOffloads = {Offload::Cpu};
  std::vector<Plan> offloaded =
      enumerateCandidatePlans(model, makeCluster(testGpu(), 16), pinned);
  ASSERT_FALSE(offloaded.empty());
  for (const Plan &plan : offloaded)
    EXPECT_EQ(plan.optimizerOffload, Offload::Cpu) << describePlan(plan);
}

TEST(CostModelPlan, CollectivesDependOnlyOnWhatCollectivesOnlyKeeps) {
  // A search plans the collectives (and prices each alone) once per
  // collectivesOnly(plan) and shares them: every candidate, f32 (parameter offload too) and bf16,
  // with persistence thresholds, prefetch depths and micro-batches, must
  // get the same estimate as when it plans its own.
  for (Precision precision : {Precision::F32, Precision::BF16}) {
    ModelDescription model = gpt2(64, precision);
    model.microBatches = 2;
    CandidateSpace space;
    space.prefetchDepths = {0, 1, 2};
    space.persistenceThresholds = {0, 100000};
    space.reduceEvery = {ReduceEvery::Step, ReduceEvery::MicroBatch};
    ClusterSpec cluster = makeCluster(testGpu(), 16);
    for (const Plan &plan : enumerateCandidatePlans(model, cluster, space)) {
      CostEstimate own = estimateCost(model, plan, cluster);
      std::vector<CollectiveCall> calls =
          planCollectives(model, collectivesOnly(plan), cluster.worldSize());
      CostEstimate shared = estimateCost(model, plan, cluster, calls,
                                         collectiveSeconds(calls, cluster));
      SCOPED_TRACE(describePlan(plan));
      EXPECT_EQ(own.memory.device.total(), shared.memory.device.total());
      EXPECT_EQ(own.memory.host.hostBytes, shared.memory.host.hostBytes);
      EXPECT_EQ(own.traffic.total(), shared.traffic.total());
      EXPECT_EQ(own.time.total(), shared.time.total());
      EXPECT_EQ(own.collectiveCalls, shared.collectiveCalls);
    }
  }
}

TEST(CostModelTime, ComputeIsFlopsOverPeakTimesEfficiency) {
  // 64 sequences of GPT-2 small on 8 ranks, bf16 at 1 PFLOP/s and 50%:
  // a third of the FLOPs forward, two thirds backward.
  ModelDescription model = gpt2(64, Precision::BF16);
  ClusterSpec cluster = makeCluster(testGpu(), 8);
  StepTime time = estimateCompute(model, preset("ddp", 8), cluster);
  double perRank = model.stepFlops / 8;
  EXPECT_DOUBLE_EQ(time.forwardCompute, perRank / 3 / 0.5e15);
  EXPECT_DOUBLE_EQ(time.backwardCompute, perRank * 2 / 3 / 0.5e15);
  // The optimizer streams 8 + 8 * 2 + 2 bytes per element of HBM, and
  // writes the 2-byte compute copy of the updated master (DDP: all of
  // them; ZeRO: a shard).
  const double psi = double(model.parameterCount());
  EXPECT_DOUBLE_EQ(time.optimizerCompute, psi * 28 / 2e12);
  EXPECT_DOUBLE_EQ(
      estimateCompute(model, preset("zero1", 8), cluster).optimizerCompute,
      double(shardElements(model, 8)) * 28 / 2e12);
  // Block checkpointing runs the blocks' forward again.
  Plan blocks = preset("ddp", 8);
  blocks.checkpointing = ActivationCheckpointing::Blocks;
  EXPECT_DOUBLE_EQ(estimateCompute(model, blocks, cluster).backwardCompute,
                   (perRank * 2 / 3 + model.blockRecomputeFlops / 8) / 0.5e15);
  // f32 uses the f32 peak; another efficiency scales it.
  ModelDescription f32 = gpt2(64, Precision::F32);
  CostOptions options;
  options.computeEfficiency = 0.25;
  EXPECT_DOUBLE_EQ(
      estimateCompute(f32, preset("ddp", 8), cluster, options).forwardCompute,
      f32.stepFlops / 8 / 3 / 0.25e14);
  // A device file's measured efficiency takes the place of the option's.
  ClusterSpec measured = cluster;
  measured.device.computeEfficiency = 0.8;
  EXPECT_DOUBLE_EQ(computeEfficiency(measured.device, options), 0.8);
  EXPECT_DOUBLE_EQ(
      estimateCompute(f32, preset("ddp", 8), measured, options).forwardCompute,
      f32.stepFlops / 8 / 3 / 0.8e14);
}

TEST(CostModelTime, ExposedTime) {
  // The lead cannot hide; the rest hides behind the compute.
  EXPECT_DOUBLE_EQ(exposedTime(10, 2, 5), 2 + 3);
  EXPECT_DOUBLE_EQ(exposedTime(10, 2, 20), 2);
  EXPECT_DOUBLE_EQ(exposedTime(10, 0, 20), 0);
  EXPECT_DOUBLE_EQ(exposedTime(1, 5, 0), 1);
}

TEST(CostModelTime, OverlapHidesCommunicationBehindCompute) {
  ModelDescription model = gpt2(64, Precision::BF16);
  ClusterSpec cluster = makeCluster(testGpu(), 16);
  Plan plan = preset("fsdp", 16);
  CostEstimate overlapped = estimateCost(model, plan, cluster);
  plan.overlap = false;
  CostEstimate blocking = estimateCost(model, plan, cluster);
  // The same collectives, the same busy time; all of it exposed without
  // overlap, less with it.
  EXPECT_EQ(overlapped.traffic, blocking.traffic);
  EXPECT_DOUBLE_EQ(overlapped.time.communication, blocking.time.communication);
  EXPECT_DOUBLE_EQ(blocking.time.exposedCommunication,
                   blocking.time.communication);
  EXPECT_LT(overlapped.time.exposedCommunication,
            blocking.time.exposedCommunication);
  EXPECT_GT(overlapped.time.exposedCommunication, 0);
  EXPECT_DOUBLE_EQ(overlapped.time.total(),
                   overlapped.time.compute() +
                       overlapped.time.exposedCommunication);
}

TEST(CostModelTime, ReducingEveryMicroBatchCostsMoreWire) {
  // Four micro-batches of GPT-2 small under ZeRO-2: reducing every
  // micro-batch sends four times the reduce-scatter bytes and is busier
  // on the wire, but holds less gradient memory.
  ModelDescription model = gpt2(64, Precision::BF16);
  model.microBatches = 4;
  ClusterSpec cluster = makeCluster(testGpu(), 16);
  Plan step = preset("zero2", 16);
  Plan every = step;
  every.reduceEvery = ReduceEvery::MicroBatch;
  CostEstimate a = estimateCost(model, step, cluster);
  CostEstimate b = estimateCost(model, every, cluster);
  EXPECT_EQ(b.traffic.reduceScatter, 4 * a.traffic.reduceScatter);
  EXPECT_GT(b.time.communication, a.time.communication);
  EXPECT_GE(b.time.exposedCommunication, 0);
  EXPECT_LT(b.memory.device.gradients, a.memory.device.gradients);
  EXPECT_NE(describePlan(every).find("reduce-every=micro-batch"),
            std::string::npos);
}

TEST(CostModelTime, DdpOnOneRankHasNoCommunication) {
  ModelDescription model = gpt2(8, Precision::BF16);
  CostEstimate one =
      estimateCost(model, preset("ddp", 1), makeCluster(testGpu(), 1));
  EXPECT_EQ(one.traffic.total(), 0);
  EXPECT_EQ(one.collectiveCalls, 0);
  EXPECT_EQ(one.time.communication, 0);
  EXPECT_DOUBLE_EQ(one.time.total(), one.time.compute());
}

TEST(CostModelTime, CommunicationIsTheSumOfItsCalls) {
  ModelDescription model = gpt2(64, Precision::BF16);
  ClusterSpec cluster = makeCluster(testGpu(), 16);
  Plan plan = preset("zero3", 16);
  CostEstimate estimate = estimateCost(model, plan, cluster);
  LinkParameters link = linkParameters(cluster);
  double sum = 0;
  int64_t calls = 0;
  for (const CollectiveCall &call : planCollectives(model, plan, 16)) {
    sum += collectiveTime(call, cluster, link).seconds * call.repeat;
    calls += call.repeat;
  }
  EXPECT_DOUBLE_EQ(estimate.time.communication, sum);
  EXPECT_EQ(estimate.collectiveCalls, calls);
  EXPECT_EQ(estimate.traffic, stepTraffic(model, plan, 16));
}

TEST(CostModelTime, OptimizerOffloadTime) {
  // ZeRO-2 with the optimizer on the host, 8 ranks: gradient shards go down
  // the 50 GB/s PCIe link (bf16), the host streams its f32 master, states
  // and gradient (8 + 16 + 4 bytes per element) at 400/8 GB/s per rank, the
  // f32 masters come back up.
  ModelDescription model = gpt2(64, Precision::BF16);
  ClusterSpec cluster = makeCluster(testGpu(), 8);
  Plan plan = preset("zero2", 8);
  plan.optimizerOffload = Offload::Cpu;
  CostEstimate estimate = estimateCost(model, plan, cluster);
  double shard = double(shardElements(model, 8));
  double down = shard * 2 / 5e10, update = shard * 28 / (4e11 / 8),
         up = shard * 4 / 5e10;
  EXPECT_DOUBLE_EQ(estimate.time.offload, down + update + up);
  EXPECT_GE(estimate.time.exposedOffload, update + up);
  EXPECT_LE(estimate.time.exposedOffload, down + update + up);
  EXPECT_EQ(estimate.time.optimizerCompute, 0);
  // NVMe adds a read and a write of the states and master (12 bytes).
  plan.optimizerOffload = Offload::Nvme;
  CostEstimate nvme = estimateCost(model, plan, cluster);
  EXPECT_DOUBLE_EQ(nvme.time.offload - estimate.time.offload,
                   2 * shard * 12 / (4e10 / 8));
}

TEST(CostModelTime, ParameterOffloadFetchesShardsEveryMicroBatch) {
  ModelDescription model = gpt2(64, Precision::BF16);
  ClusterSpec cluster = makeCluster(testGpu(), 8);
  Plan plan = preset("fsdp", 8);
  plan.optimizerOffload = Offload::Cpu;
  CostEstimate optimizerOnly = estimateCost(model, plan, cluster);
  plan.parameterOffload = Offload::Cpu;
  CostEstimate both = estimateCost(model, plan, cluster);
  // Fetched: the bf16 shard of every unit for the forward pass and of the
  // parameters the backward pass reads; the bf16 copies of the updated
  // masters no longer come up.
  double fetched = 0, up = 0;
  for (const CollectiveCall &call : planCollectives(model, plan, 8))
    if (call.kind == CollectiveKind::AllGather)
      fetched += double(call.packedBytes() / call.groupSize);
  up = double(shardElements(model, 8)) * 2;
  EXPECT_NEAR(both.time.offload - optimizerOnly.time.offload,
              fetched / 5e10 - up / 5e10, 1e-12);
}

TEST(CostModelFit, OverflowsNameEachFootprint) {
  // GPT-2 small in f32 under DDP needs 16 bytes per parameter; a 1 GiB
  // budget is too small and says so.
  ModelDescription model = gpt2(8, Precision::F32);
  CostEstimate estimate =
      estimateCost(model, preset("ddp", 8), makeCluster(testGpu(), 8));
  EXPECT_TRUE(estimate.fits());
  EXPECT_FALSE(estimate.fits(int64_t(1) << 30));
  std::vector<std::string> lines = estimate.overflows(int64_t(1) << 30);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("device memory needs"), std::string::npos);
  EXPECT_NE(lines[0].find("has 1.00 GiB"), std::string::npos);
  EXPECT_EQ(estimate.deviceCapacityBytes, int64_t(80) << 30);
  // A CPU node's memory is shared by its ranks.
  EXPECT_EQ(estimateCost(model, preset("ddp", 4), makeCluster(testCpu(), 4))
                .deviceCapacityBytes,
            int64_t(6) << 30);
}

TEST(CostModelFit, ShardingMakesGpt3Fit) {
  // GPT-3 175B in bf16 on 64 ranks of 80 GiB: DDP's 16 Psi (2.8 TB) does
  // not fit; ZeRO-3 (16 Psi / 64 = 44 GB of model states) with blocks
  // checkpointing does.
  TransformerShape gpt3{TransformerShape::Family::GPT2,
                        96,
                        12288,
                        96,
                        96,
                        4 * 12288,
                        50257,
                        2048,
                        true};
  ModelDescription model = describeTransformer(
      "gpt3-175b", gpt3, 64, 2048, 1, Optimizer::AdamW, Precision::BF16, true);
  ClusterSpec cluster = makeCluster(testGpu(), 64);
  EXPECT_FALSE(estimateCost(model, preset("ddp", 64), cluster).fits());
  Plan zero3 = preset("zero3", 64);
  zero3.checkpointing = ActivationCheckpointing::Blocks;
  CostEstimate estimate = estimateCost(model, zero3, cluster);
  EXPECT_EQ(estimate.memory.device.modelStates(),
            16 * shardElements(model, 64));
  EXPECT_TRUE(estimate.fits()) << estimate.memory.device.total();
}

} // namespace
