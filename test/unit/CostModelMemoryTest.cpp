// Per-rank memory: model states against the ZeRO paper's per-stage formulas
// (arXiv:1910.02054, section 5), autoshard's own layout, padding, offload
// footprints and activations.
#include "autoshard/CostModel/Memory.h"

#include <gtest/gtest.h>

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
  device.memoryBandwidth = 3e12;
  device.intraNodeBandwidth = 4.5e11;
  device.interNodeBandwidth = 5e10;
  device.hostLinkBandwidth = 6.4e10;
  device.hostMemoryBytes = int64_t(2) << 40;
  device.hostMemoryBandwidth = 5e11;
  device.nvmeBandwidth = 6e10;
  device.nvmeBytes = int64_t(30) << 40;
  return device;
}

ClusterSpec cluster(int64_t world) { return makeCluster(testGpu(), world); }

Plan preset(const std::string &name, int64_t world, int64_t group = 0) {
  std::optional<Plan> plan = presetPlan(name, world, group);
  EXPECT_TRUE(plan.has_value()) << name;
  return plan.value_or(Plan());
}

/// A model whose tensors every N up to 64 divides: no padding.
ModelDescription evenModel(Precision precision, Optimizer optimizer) {
  ModelDescription model;
  model.parameters = {{"a", 4096 * 64, true, 0},
                      {"b", 1024 * 64, false, 0},
                      {"c", 64, true, -1}};
  model.precision = precision;
  model.optimizer = optimizer;
  return model;
}

/// The measured DDP step on `world` ranks without checkpointing: its arena
/// and its moments (1000 bytes of activations).
ActivationMeasurement measuredStep(int64_t world, int64_t arenaBytes,
                                   std::vector<StepMoment> moments) {
  ActivationMeasurement measured;
  measured.worldSize = world;
  measured.checkpointing = ActivationCheckpointing::None;
  measured.bytesPerRank = 1000;
  measured.stepBytesPerRank = arenaBytes;
  measured.stepMoments = std::move(moments);
  return measured;
}

int64_t modelStates(const ModelDescription &model, const Plan &plan,
                    int64_t world) {
  return estimateMemory(model, plan, cluster(world)).device.modelStates();
}

// ZeRO (Rajbhandari et al. 2020), section 5, mixed-precision Adam with K =
// 12: DDP 16 Psi, P_os 4 Psi + 12 Psi/N, P_os+g 2 Psi + 14 Psi/N, P_os+g+p
// 16 Psi/N bytes per rank; exact when N divides every tensor. The f32
// master weights live with the optimizer states, as the partition pass
// places them.
TEST(CostModelMemory, MixedPrecisionAdamMatchesTheZeroPaper) {
  ModelDescription model = evenModel(Precision::BF16, Optimizer::AdamW);
  const int64_t psi = model.parameterCount();
  for (int64_t N : {1, 2, 4, 8, 16, 64}) {
    SCOPED_TRACE("N = " + std::to_string(N));
    auto states = [&](const char *name) {
      return modelStates(model, preset(name, N), N);
    };
    EXPECT_EQ(states("ddp"), 16 * psi);
    EXPECT_EQ(states("zero1"), 4 * psi + 12 * psi / N);
    EXPECT_EQ(states("zero2"), 2 * psi + 14 * psi / N);
    EXPECT_EQ(states("zero3"), 16 * psi / N);
    EXPECT_EQ(states("fsdp"), 16 * psi / N);
    // Of K = 12, the f32 master (4 bytes) is its own category, placed as
    // the states (8 bytes) are; the bf16 compute copies are the parameters.
    for (const char *name : {"ddp", "zero1", "zero3"}) {
      SCOPED_TRACE(name);
      const MemoryBreakdown device =
          estimateMemory(model, preset(name, N), cluster(N)).device;
      const int64_t sharded = std::string(name) == "ddp" ? 1 : N;
      EXPECT_EQ(device.masterWeights, 4 * psi / sharded);
      EXPECT_EQ(device.optimizerStates, 8 * psi / sharded);
      EXPECT_EQ(device.parameters,
                2 * psi / (std::string(name) == "zero3" ? N : 1));
    }
  }
}

TEST(CostModelMemory, F32StepsHaveNoMasterWeights) {
  ModelDescription model = evenModel(Precision::F32, Optimizer::AdamW);
  const int64_t psi = model.parameterCount();
  const MemoryBreakdown device =
      estimateMemory(model, preset("ddp", 1), cluster(1)).device;
  EXPECT_EQ(device.masterWeights, 0);
  EXPECT_EQ(device.parameters, 4 * psi);
  EXPECT_EQ(device.optimizerStates, 8 * psi);
}

TEST(CostModelMemory, ShardGenModelsMatchTheZeroPaper) {
  // GPT-2 small and Llama 2 7B as shard-gen builds them: every tensor is a
  // multiple of 256 elements, so the formulas hold exactly up to 256 ranks.
  TransformerShape gpt2{
      TransformerShape::Family::GPT2, 12, 768, 12, 12, 3072, 50257, 1024, true};
  TransformerShape llama{TransformerShape::Family::Llama,
                         32,
                         4096,
                         32,
                         32,
                         11008,
                         32000,
                         0,
                         false};
  for (const TransformerShape &shape : {gpt2, llama}) {
    ModelDescription model = describeTransformer(
        "m", shape, 256, 1024, 1, Optimizer::AdamW, Precision::BF16, true);
    const int64_t psi = model.parameterCount();
    for (int64_t N : {1, 8, 64, 256}) {
      auto states = [&](const char *name) {
        return modelStates(model, preset(name, N), N);
      };
      EXPECT_EQ(states("ddp"), 16 * psi);
      EXPECT_EQ(states("zero1"), 4 * psi + 12 * psi / N);
      EXPECT_EQ(states("zero2"), 2 * psi + 14 * psi / N);
      EXPECT_EQ(states("zero3"), 16 * psi / N);
    }
  }
}

TEST(CostModelMemory, F32AndOtherOptimizers) {
  // f32: 4 bytes of parameter, 4 of gradient, 4 per optimizer state.
  const int64_t N = 8;
  ModelDescription adam = evenModel(Precision::F32, Optimizer::AdamW);
  const int64_t psi = adam.parameterCount();
  EXPECT_EQ(modelStates(adam, preset("ddp", N), N), 16 * psi);
  EXPECT_EQ(modelStates(adam, preset("zero1", N), N), 8 * psi + 8 * psi / N);
  EXPECT_EQ(modelStates(adam, preset("zero2", N), N), 4 * psi + 12 * psi / N);
  EXPECT_EQ(modelStates(adam, preset("zero3", N), N), 16 * psi / N);
  ModelDescription momentum = evenModel(Precision::F32, Optimizer::SGDMomentum);
  EXPECT_EQ(modelStates(momentum, preset("ddp", N), N), 12 * psi);
  EXPECT_EQ(modelStates(momentum, preset("zero3", N), N), 12 * psi / N);
  ModelDescription sgd = evenModel(Precision::F32, Optimizer::SGD);
  EXPECT_EQ(modelStates(sgd, preset("zero1", N), N), 8 * psi);
}

TEST(CostModelMemory, ShardsArePaddedPerTensor) {
  // A 10-element tensor on 4 ranks: each rank holds ceil(10/4) = 3.
  ModelDescription model;
  model.parameters = {{"bias", 10, false, -1}};
  model.precision = Precision::F32;
  MemoryBreakdown zero3 =
      estimateMemory(model, preset("zero3", 4), cluster(4)).device;
  EXPECT_EQ(zero3.parameters, 4 * 3);
  EXPECT_EQ(zero3.gradients, 4 * 3);
  EXPECT_EQ(zero3.optimizerStates, 8 * 3);
  // Hybrid: shards of ceil(10/2) = 5 within groups of 2.
  MemoryBreakdown hybrid =
      estimateMemory(model, preset("hybrid", 4, 2), cluster(4)).device;
  EXPECT_EQ(hybrid.modelStates(), 16 * 5);
}

TEST(CostModelMemory, ParameterGroupsKeepTheirOwnPlacement) {
  ModelDescription model = evenModel(Precision::F32, Optimizer::AdamW);
  Plan plan = preset("zero3", 8);
  plan.parameterLayouts["c"] = Layout(); // replicated, as ddp
  int64_t expected = 16 * (4096 * 64 + 1024 * 64) / 8 + 16 * 64;
  EXPECT_EQ(modelStates(model, plan, 8), expected);
}

TEST(CostModelMemory, GatheredParametersFollowTheUnitsAndPrefetch) {
  // Two blocks of 1000 + 500 elements and a root tensor of 300, bf16.
  ModelDescription model;
  model.parameters = {{"h.0.w", 1000, true, 0},
                      {"h.0.b", 500, false, 0},
                      {"h.1.w", 1000, true, 1},
                      {"h.1.b", 500, false, 1},
                      {"head", 300, true, -1}};
  model.precision = Precision::BF16;
  Plan fsdp = preset("fsdp", 4);
  fsdp.prefetchDepth = 1;
  // The block in use, 1500 elements of 2 bytes, and the packed buffer of
  // the one prefetched: a block as large, its tensors' shards padded to a
  // multiple of the 4 ranks.
  MemoryBreakdown prefetched = estimateMemory(model, fsdp, cluster(4)).device;
  EXPECT_EQ(prefetched.gatheredParameters, 1500 * 2);
  EXPECT_GE(prefetched.prefetchedGatherBuffers, 1500 * 2);
  EXPECT_LE(prefetched.prefetchedGatherBuffers, 1504 * 2);
  fsdp.prefetchDepth = 0;
  MemoryBreakdown inPlace = estimateMemory(model, fsdp, cluster(4)).device;
  EXPECT_EQ(inPlace.gatheredParameters, 1500 * 2);
  EXPECT_EQ(inPlace.prefetchedGatherBuffers, 0);
  // ZeRO-3 gathers per parameter: the largest in use, 1000 elements, and
  // the next one's packed buffer.
  Plan zero3 = preset("zero3", 4);
  MemoryBreakdown perParameter =
      estimateMemory(model, zero3, cluster(4)).device;
  EXPECT_EQ(perParameter.gatheredParameters, 1000 * 2);
  EXPECT_EQ(perParameter.prefetchedGatherBuffers, 1000 * 2);
  // Kept through the backward pass: every parameter it reads (2300), the
  // unit in use among them, and no gather in flight at the peak.
  fsdp.prefetchDepth = 1;
  fsdp.reshard = Reshard::AfterBackward;
  MemoryBreakdown kept = estimateMemory(model, fsdp, cluster(4)).device;
  EXPECT_EQ(kept.gatheredParameters, 2300 * 2);
  EXPECT_EQ(kept.prefetchedGatherBuffers, 0);
  // Replicated parameters gather nothing.
  EXPECT_EQ(estimateMemory(model, preset("zero2", 4), cluster(4))
                .device.gatheredParameters,
            0);
}

TEST(CostModelMemory, PendingGradientsAreTheBucketsInFlight) {
  // ZeRO-2, f32, a 4000-byte cap: buckets of 1000 elements (one tensor
  // each). With one reduction in flight beside the open bucket, two
  // buckets of full gradients wait: 8000 bytes.
  ModelDescription model;
  for (int i = 0; i < 6; ++i)
    model.parameters.push_back({"p" + std::to_string(i), 1000, true, -1});
  Plan plan = preset("zero2", 4);
  plan.bucketCapBytes = 4000;
  EXPECT_EQ(estimateMemory(model, plan, cluster(4)).device.pendingGradients,
            8000);
  plan.prefetchDepth = 0;
  EXPECT_EQ(estimateMemory(model, plan, cluster(4)).device.pendingGradients,
            4000);
  // DDP's and ZeRO-1's gradients are whole anyway, counted as gradients.
  for (const char *name : {"ddp", "zero1"}) {
    MemoryBreakdown memory =
        estimateMemory(model, preset(name, 4), cluster(4)).device;
    EXPECT_EQ(memory.pendingGradients, 0) << name;
    EXPECT_EQ(memory.gradients, 6 * 4000) << name;
  }
}

TEST(CostModelMemory, AccumulationKeepsFullGradientsUntilTheReduction) {
  // Two micro-batches under ZeRO-2 in f32: reduced once per step, the full
  // sums (6 x 4000 bytes) live until the last micro-batch; reduced every
  // micro-batch, only the shards (6 x 1000 bytes) do.
  ModelDescription model;
  for (int i = 0; i < 6; ++i)
    model.parameters.push_back({"p" + std::to_string(i), 1000, true, -1});
  model.microBatches = 2;
  Plan plan = preset("zero2", 4);
  EXPECT_EQ(estimateMemory(model, plan, cluster(4)).device.gradients,
            6 * 4000);
  plan.reduceEvery = ReduceEvery::MicroBatch;
  EXPECT_EQ(estimateMemory(model, plan, cluster(4)).device.gradients,
            6 * 1000);
  // bf16: the full sums in bf16 (2 bytes), the shards in f32 (4 bytes).
  model.precision = Precision::BF16;
  EXPECT_EQ(estimateMemory(model, plan, cluster(4)).device.gradients,
            6 * 250 * 4);
  Plan step = preset("zero2", 4);
  EXPECT_EQ(estimateMemory(model, step, cluster(4)).device.gradients,
            6 * 1000 * 2);
  // Reduced in f32, the full sums accumulate in f32.
  step.reduceDtype = ReduceDtype::F32;
  EXPECT_EQ(estimateMemory(model, step, cluster(4)).device.gradients,
            6 * 1000 * 4);
  model.precision = Precision::F32;
  // One micro-batch: nothing accumulates, the two agree.
  model.microBatches = 1;
  Plan once = preset("zero2", 4);
  EXPECT_EQ(estimateMemory(model, once, cluster(4)).device.gradients,
            estimateMemory(model, plan, cluster(4)).device.gradients);
}

TEST(CostModelMemory, OptimizerOffloadMovesStatesToTheHost) {
  // ZeRO-Offload (arXiv:2101.06840, section 4.1): the host keeps f32 states,
  // an f32 master and the f32 gradient of the rank's shard: 16 bytes per
  // element for AdamW. The device keeps the bf16 compute copies; the f32
  // masters are the host's.
  ModelDescription model = evenModel(Precision::BF16, Optimizer::AdamW);
  const int64_t psi = model.parameterCount(), N = 8;
  Plan plan = preset("zero2", N);
  plan.optimizerOffload = Offload::Cpu;
  MemoryEstimate memory = estimateMemory(model, plan, cluster(N));
  EXPECT_EQ(memory.host.hostBytes, 16 * psi / N);
  EXPECT_EQ(memory.host.nvmeBytes, 0);
  EXPECT_EQ(memory.device.optimizerStates, 0);
  EXPECT_EQ(memory.device.masterWeights, 0);
  EXPECT_EQ(memory.device.gradients, 0);
  EXPECT_EQ(memory.device.parameters, 2 * psi); // the bf16 copy
  // NVMe: states and master there (12 bytes), the gradient in host memory.
  plan.optimizerOffload = Offload::Nvme;
  memory = estimateMemory(model, plan, cluster(N));
  EXPECT_EQ(memory.host.nvmeBytes, 12 * psi / N);
  EXPECT_EQ(memory.host.hostBytes, 4 * psi / N);
  EXPECT_GT(memory.host.pinnedStagingBytes, 0);
}

TEST(CostModelMemory, ParameterOffloadEmptiesTheDevice) {
  ModelDescription model = evenModel(Precision::BF16, Optimizer::AdamW);
  const int64_t psi = model.parameterCount(), N = 8;
  Plan plan = preset("zero3", N);
  plan.optimizerOffload = Offload::Cpu;
  plan.parameterOffload = Offload::Nvme;
  MemoryEstimate memory = estimateMemory(model, plan, cluster(N));
  EXPECT_EQ(memory.device.modelStates(), 0);
  EXPECT_EQ(memory.host.hostBytes, 16 * psi / N);
  EXPECT_EQ(memory.host.nvmeBytes, 2 * psi / N); // the bf16 shards
  EXPECT_GT(memory.device.offloadStaging, 0);
  EXPECT_GT(memory.device.gatheredParameters, 0);
}

TEST(CostModelMemory, MeasuredActivationsWinOverTheEstimate) {
  TransformerShape shape{
      TransformerShape::Family::GPT2, 2, 64, 4, 4, 256, 256, 128, true};
  ModelDescription model = describeTransformer(
      "tiny", shape, 8, 64, 1, Optimizer::AdamW, Precision::F32, false);
  Plan plan = preset("ddp", 4);
  MemoryEstimate estimated = estimateMemory(model, plan, cluster(4));
  EXPECT_TRUE(estimated.activationsEstimated);
  // 8 rows over 4 ranks: 2 rows of 64 tokens per rank.
  EXPECT_EQ(estimated.device.activations,
            estimateTransformerActivationBytes(shape, 2, 64, Precision::F32,
                                               ActivationCheckpointing::None));
  model.activationMeasurements.push_back(
      {4, ActivationCheckpointing::None, 123456});
  MemoryEstimate measured = estimateMemory(model, plan, cluster(4));
  EXPECT_FALSE(measured.activationsEstimated);
  EXPECT_EQ(measured.device.activations, 123456);
  // A measurement for another world size or mode does not apply.
  plan.checkpointing = ActivationCheckpointing::Blocks;
  EXPECT_TRUE(estimateMemory(model, plan, cluster(4)).activationsEstimated);
  // Without a shape or a measurement the activations are unknown.
  model.transformer.reset();
  EXPECT_TRUE(estimateMemory(model, plan, cluster(4)).activationsUnknown);
}

// Of a step's moments, only those that could be some plan's peak stay: a
// moment with no more held gradients and no more other bytes than another
// (with the same parameters in use) is never the peak, whatever a plan keeps
// of the gradients; one that is larger only without its compute copies
// stays for the plans that hold no copies.
TEST(CostModelMemory, PeakCandidatesDropDominatedMoments) {
  std::vector<StepMoment> moments = {
      {0, 100, 0, 0, false}, // the forward pass's peak
      {0, 90, 0, 0, false},  // dominated by the one above
      {40, 80, 50, 0, false}, // more held gradients, 50 of its bytes copies
      {30, 70, 0, 0, false},  // dominated, but not without the copies
      {20, 20, 0, 0, false},  // dominated either way
      {80, 10, 0, 0, false},  // every gradient held
      {10, 50, 0, 32, false}, // a unit in use: its own group
  };
  std::vector<StepMoment> kept = peakCandidates(moments);
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const StepMoment &m : kept)
    got.push_back({m.heldGradients, m.others});
  std::vector<std::pair<int64_t, int64_t>> want = {
      {0, 100}, {10, 50}, {30, 70}, {40, 80}, {80, 10}};
  EXPECT_EQ(got, want);
  EXPECT_TRUE(peakCandidates({}).empty());
}

// A DDP plan over the measured DDP step reproduces its peak, with the
// arena's fragmentation; a plan that shards the gradients holds its shards
// of them at that moment (beside the open bucket's full ones).
TEST(CostModelMemory, StepPeakFollowsTheMeasuredMoments) {
  ModelDescription model = evenModel(Precision::F32, Optimizer::AdamW);
  const int64_t allGradients = 4 * (4096 * 64 + 1024 * 64 + 64);
  ActivationMeasurement measured =
      measuredStep(4, allGradients + 5000 + 64,
                   {{0, 3000, 0, 0, false}, {allGradients, 5000, 0, 0, false}});
  model.activationMeasurements.push_back(measured);
  const MemoryBreakdown ddp =
      estimateMemory(model, preset("ddp", 4), cluster(4)).device;
  EXPECT_EQ(ddp.stepPeak, allGradients + 5000 + 64);
  EXPECT_EQ(ddp.stepGradients, allGradients);
  EXPECT_EQ(ddp.total(), ddp.parameters + ddp.optimizerStates + ddp.stepPeak);
  const MemoryBreakdown zero2 =
      estimateMemory(model, preset("zero2", 4), cluster(4)).device;
  EXPECT_EQ(zero2.stepGradients, allGradients / 4);
  EXPECT_GE(zero2.stepPeak, 5000 + allGradients / 4 + 64);
  // Without moments the step buffers alone stand for the step.
  model.activationMeasurements[0].stepMoments.clear();
  EXPECT_EQ(estimateMemory(model, preset("ddp", 4), cluster(4)).device.stepPeak,
            0);
}

// Late in the backward pass a ZeRO-3 step holds its gradient shards, the
// open bucket's full gradients, the parameters in use and the next gather
// in flight (its packed buffer and the parameter it fills: at most the
// largest but the first, the output head's, here "b"), and no longer the
// bf16 copies of its parameter shards, freed after their last gather as
// the gradients came.
TEST(CostModelMemory, BackwardPassPrefetchesAndFreesTheShardsCopies) {
  ModelDescription model = evenModel(Precision::BF16, Optimizer::AdamW);
  model.parameters[1].readByBackward = true; // "b" is gathered again too
  const int64_t psi = model.parameterCount(), N = 4;
  const int64_t allGradients = 2 * psi; // bf16, as the DDP step holds them
  const int64_t inUse = 1000;
  ActivationMeasurement measured = measuredStep(
      N, allGradients + 50000, // no fragmentation
      {{0, 1000, 0, 0, false}, {allGradients, 50000, 0, inUse, false}});
  model.activationMeasurements.push_back(measured);
  Plan zero3 = preset("zero3", N);
  const MemoryBreakdown device =
      estimateMemory(model, zero3, cluster(N)).device;
  const int64_t shards = allGradients / N;      // kept until the optimizer
  const int64_t openBucket = allGradients;      // one bucket under the cap
  const int64_t prefetched = 2 * (2 * 1024 * 64); // packed + gathered "b"
  const int64_t copiesFreed = 2 * psi / N;
  EXPECT_EQ(device.parameters, copiesFreed);
  EXPECT_EQ(device.stepPeak, 50000 + shards + openBucket + inUse +
                                 prefetched - copiesFreed);
  // Without prefetching, nothing is in flight beside the unit in use.
  zero3.prefetchDepth = 0;
  EXPECT_EQ(estimateMemory(model, zero3, cluster(N)).device.stepPeak,
            50000 + shards + openBucket + inUse - copiesFreed);
}

// A plan that reduces the gradients away holds whole only those whose
// bucket the measured step has not reduced yet at that moment, not the
// largest bucket at every moment; a larger bucket cap adds what it can
// hold beyond the measured step's.
TEST(CostModelMemory, PendingGradientsAreTheMomentsUnreducedOnes) {
  ModelDescription model = evenModel(Precision::F32, Optimizer::AdamW);
  const int64_t allGradients = 4 * model.parameterCount(), N = 4;
  ActivationMeasurement measured = measuredStep(
      N, allGradients + 5000, // no fragmentation
      {{allGradients, 5000, 0, 0, false, 1000}});
  model.activationMeasurements.push_back(measured);
  Plan zero2 = preset("zero2", N);
  EXPECT_EQ(estimateMemory(model, zero2, cluster(N)).device.stepPeak,
            5000 + allGradients / N + 1000);
  zero2.bucketCapBytes += 100;
  EXPECT_EQ(estimateMemory(model, zero2, cluster(N)).device.stepPeak,
            5000 + allGradients / N + 1100);
  // Unmeasured, the largest bucket (here all of them, under the cap).
  model.activationMeasurements[0].stepMoments[0].unreducedGradients = -1;
  EXPECT_EQ(estimateMemory(model, preset("zero2", N), cluster(N))
                .device.stepPeak,
            5000 + allGradients / N + allGradients);
}

// The peak by category, in the plan report's vocabulary: the moment of
// the peak as the plan holds it, beside the kept states, adding up to the
// total. Late in ZeRO-3's backward pass (the case above): the moment's own
// buffers by category, the gradient shards and the open bucket, the
// parameter in use and the next gather in flight; the shards' copies are
// freed by then.
TEST(CostModelMemory, PeakByCategoryIsTheMomentOfThePeak) {
  ModelDescription model = evenModel(Precision::BF16, Optimizer::AdamW);
  model.parameters[1].readByBackward = true;
  const int64_t psi = model.parameterCount(), N = 4;
  const int64_t allGradients = 2 * psi;
  ActivationMeasurement measured = measuredStep(N, allGradients + 50000, {});
  StepMoment backward{allGradients, 50000, 0, 1000, false};
  backward.activations = 30000;
  backward.summingGradients = 8000;
  backward.communication = 7000;
  backward.batch = 1000;
  measured.stepMoments = {{0, 1000, 0, 0, false}, backward};
  model.activationMeasurements.push_back(measured);
  const MemoryBreakdown device =
      estimateMemory(model, preset("zero3", N), cluster(N)).device;
  const PeakBreakdown &at = device.atPeak;
  EXPECT_EQ(at.total(), device.total());
  EXPECT_EQ(at.activations, 30000);
  EXPECT_EQ(at.gradients, 8000 + allGradients / N + allGradients);
  EXPECT_EQ(at.gatheredParameters, 1000 + 2 * (2 * 1024 * 64));
  EXPECT_EQ(at.parameters, 0); // every shard's copy freed
  EXPECT_EQ(at.masterWeights, device.masterWeights);
  EXPECT_EQ(at.optimizerStates, device.optimizerStates);
  EXPECT_EQ(at.communication, 7000);
  EXPECT_EQ(at.batch, 1000);
  EXPECT_EQ(at.other, 50000 - 30000 - 8000 - 7000 - 1000);
  EXPECT_EQ(at.categories().size(), 7u);
  EXPECT_EQ(std::string(at.categories().back().first), "buffers");
  EXPECT_EQ(at.categories().back().second, at.buffers());
}

// Every preset, offloaded or not, measured or not: the categories add up.
TEST(CostModelMemory, PeakByCategoryAddsUpForEveryPlan) {
  for (bool withMoments : {false, true}) {
    ModelDescription model = evenModel(Precision::BF16, Optimizer::AdamW);
    const int64_t N = 4;
    if (withMoments) {
      ActivationMeasurement measured =
          measuredStep(N, 2 * model.parameterCount() + 60000, {});
      StepMoment forward{0, 40000, 3000, 500, false};
      forward.activations = 30000;
      forward.parameterBuffers = 3000;
      StepMoment backward{2 * model.parameterCount(), 50000, 3000, 700,
                          false, 4000};
      backward.parameterBuffers = 3000;
      measured.stepMoments = {forward, backward};
      model.activationMeasurements.push_back(measured);
    }
    for (const char *name : {"ddp", "zero1", "zero2", "zero3", "fsdp"})
      for (Offload optimizer : {Offload::None, Offload::Cpu, Offload::Nvme}) {
        SCOPED_TRACE(std::string(name) + (withMoments ? " measured" : ""));
        Plan plan = preset(name, N);
        plan.optimizerOffload = optimizer;
        const MemoryBreakdown device =
            estimateMemory(model, plan, cluster(N)).device;
        EXPECT_EQ(device.atPeak.total(), device.total());
        for (auto [category, bytes] : device.atPeak.categories())
          EXPECT_GE(bytes, 0) << category;
      }
  }
}

// FSDP gathers a whole block for the use of any of its parameters: at a
// moment of the backward pass it holds the block in use, or the piece in
// use and the next gather in flight, whichever is more; ZeRO-3 the
// parameter in use and the next gather.
TEST(CostModelMemory, FsdpHoldsTheBlockInUse) {
  ModelDescription model = evenModel(Precision::BF16, Optimizer::AdamW);
  model.parameters[1].readByBackward = true;
  const int64_t psi = model.parameterCount(), N = 4;
  const int64_t allGradients = 2 * psi;
  ActivationMeasurement measured = measuredStep(N, allGradients + 50000, {});
  StepMoment backward{allGradients, 50000, 0, 1000, false};
  const int64_t block = 10'000'000;
  backward.unitBytesInUse = block;
  measured.stepMoments = {{0, 1000, 0, 0, false}, backward};
  model.activationMeasurements.push_back(measured);
  auto gathered = [&](const char *name) {
    return estimateMemory(model, preset(name, N), cluster(N))
        .device.atPeak.gatheredParameters;
  };
  EXPECT_EQ(gathered("fsdp"), block);
  EXPECT_LT(gathered("zero3"), block);
  // A small block: the piece in use and the next gather in flight (the
  // root unit's "c", after the block's: packed and gathered).
  model.activationMeasurements[0].stepMoments[1].unitBytesInUse = 1000;
  EXPECT_EQ(gathered("fsdp"), 1000 + 2 * (2 * 64));
}

// DDP with the optimizer offloaded under mixed precision keeps the compute
// copies on the host and copies one to the device for each reader: at a
// moment it holds the copies the op there reads and, prefetched, those the
// next reader reads (depth of them), not every parameter in use (a block's
// weights from their recomputation to their backward reads).
TEST(CostModelMemory, CopiesFetchedPerReaderAreThoseReadAndNext) {
  ModelDescription model = evenModel(Precision::BF16, Optimizer::AdamW);
  const int64_t N = 4, a = 2 * 4096 * 64, b = 2 * 1024 * 64, c = 2 * 64;
  const int64_t allGradients = a + b + c;
  ActivationMeasurement measured = measuredStep(N, allGradients + 50000, {});
  StepMoment backward{allGradients, 50000, 0, a + b, false, 0};
  backward.paramBytesRead = b;
  backward.nextParamBytesRead = c;
  measured.stepMoments = {{0, 1000, 0, 0, false}, backward};
  model.activationMeasurements.push_back(measured);
  Plan ddp = preset("ddp", N);
  ddp.optimizerOffload = Offload::Cpu;
  EXPECT_EQ(estimateMemory(model, ddp, cluster(N)).device.atPeak.offloadStaging,
            b + c);
  ddp.prefetchDepth = 2;
  EXPECT_EQ(estimateMemory(model, ddp, cluster(N)).device.atPeak.offloadStaging,
            b + 2 * c);
  // At most the largest copies, as many as run at once.
  measured.stepMoments[1].nextParamBytesRead = a;
  model.activationMeasurements = {measured};
  EXPECT_EQ(estimateMemory(model, ddp, cluster(N)).device.atPeak.offloadStaging,
            a + b + c);
}

// Under optimizer offload the compiled step copies each gradient to the
// host as soon as it is reduced, and sums the clipping norm's squares of it
// there: late in the backward pass DDP holds only the gradients whose
// bucket is not reduced yet, and those whose copies are in flight (a
// bucket's, at depth 1), not all of them, with clipping or without.
TEST(CostModelMemory, OffloadedGradientsGoToTheHostOnceReduced) {
  ModelDescription model = evenModel(Precision::F32, Optimizer::AdamW);
  const int64_t allGradients = 4 * model.parameterCount(), N = 4;
  StepMoment late{allGradients, 5000, 0, 0, false, 1000};
  late.lastReducedGradients = 2000;
  ActivationMeasurement measured =
      measuredStep(N, allGradients + 5000, {late});
  model.activationMeasurements.push_back(measured);
  Plan ddp = preset("ddp", N);
  ddp.optimizerOffload = Offload::Cpu;
  for (bool clip : {false, true}) {
    model.clipGradients = clip;
    MemoryBreakdown device = estimateMemory(model, ddp, cluster(N)).device;
    // The unreduced bucket, and the one being copied.
    EXPECT_EQ(device.stepPeak, 5000 + 1000 + 2000) << "clip " << clip;
    EXPECT_EQ(device.gradients, 0) << "clip " << clip;
    EXPECT_EQ(device.atPeak.gradients, 1000 + 2000) << "clip " << clip;
    EXPECT_EQ(device.atPeak.total(), device.total()) << "clip " << clip;
  }
  // Without offload the optimizer reads them on the device.
  EXPECT_EQ(estimateMemory(model, preset("ddp", N), cluster(N))
                .device.stepPeak,
            5000 + allGradients);
}

} // namespace
