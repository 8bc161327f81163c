// Bytes on the wire per step: docs/Strategies.md's formulas against
// hand-computed cases, padding included, and the collective calls that sum
// to them.
#include "autoshard/CostModel/Traffic.h"

#include <gtest/gtest.h>

using namespace autoshard::cost;

namespace {

/// The step of docs/Strategies.md's "Before and after": h.0.fc1.weight
/// (4x5, not read by the backward pass), h.0.fc2.weight (3x4, read) and a
/// 10-element bias outside the blocks (padded to 12 on 4 ranks).
ModelDescription smallModel(Precision precision = Precision::F32,
                            int64_t microBatches = 1) {
  ModelDescription model;
  model.name = "small";
  model.parameters = {{"h.0.fc1.weight", 20, false, 0},
                      {"h.0.fc2.weight", 12, true, 0},
                      {"out.bias", 10, false, -1}};
  model.precision = precision;
  model.clipGradients = true;
  model.microBatches = microBatches;
  model.batchRows = 8;
  return model;
}

Plan preset(const std::string &name, int64_t world, int64_t group = 0) {
  std::optional<Plan> plan = presetPlan(name, world, group);
  EXPECT_TRUE(plan.has_value()) << name;
  return plan.value_or(Plan());
}

Traffic traffic(int64_t allReduce, int64_t allGather, int64_t reduceScatter) {
  Traffic t;
  t.allReduce = allReduce;
  t.allGather = allGather;
  t.reduceScatter = reduceScatter;
  return t;
}

void expectTraffic(const Traffic &actual, const Traffic &expected) {
  EXPECT_EQ(actual.allReduce, expected.allReduce);
  EXPECT_EQ(actual.allGather, expected.allGather);
  EXPECT_EQ(actual.reduceScatter, expected.reduceScatter);
}

TEST(CostModelTraffic, RingBytesPadEachTensor) {
  // 10 elements on 4 ranks: blocks of ceil(10/4) = 3.
  EXPECT_EQ(ringBytesPerRank(CollectiveKind::AllReduce, 10, 4, 4),
            2 * 3 * 3 * 4);
  EXPECT_EQ(ringBytesPerRank(CollectiveKind::AllGather, 10, 4, 2), 3 * 3 * 2);
  EXPECT_EQ(ringBytesPerRank(CollectiveKind::ReduceScatter, 10, 4, 4),
            3 * 3 * 4);
  // One rank sends nothing.
  EXPECT_EQ(ringBytesPerRank(CollectiveKind::AllReduce, 10, 1, 4), 0);
}

// Hand-computed for 4 ranks, f32 (b = 4): ceil(k/4) is 5, 3 and 3 for the
// three parameters (11 in all); L = C = 2 * 3 * 4 = 24.
TEST(CostModelTraffic, PresetsOnFourRanksWithPadding) {
  ModelDescription model = smallModel();
  const int64_t L = 24, C = 24;
  expectTraffic(stepTraffic(model, preset("ddp", 4), 4),
                traffic(L + 2 * 3 * 11 * 4, 0, 0));
  for (const char *name : {"zero1", "zero2"})
    expectTraffic(stepTraffic(model, preset(name, 4), 4),
                  traffic(L + C, 3 * 11 * 4, 3 * 11 * 4));
  // ZeRO-3 and FSDP gather for the forward pass, and again for the
  // backward pass only h.0.fc2.weight (ceil(12/4) = 3).
  for (const char *name : {"zero3", "fsdp"})
    expectTraffic(stepTraffic(model, preset(name, 4), 4),
                  traffic(L + C, 3 * 11 * 4 + 3 * 3 * 4, 3 * 11 * 4));
  Plan kept = preset("fsdp", 4);
  kept.reshard = Reshard::AfterBackward;
  expectTraffic(stepTraffic(model, kept, 4),
                traffic(L + C, 3 * 11 * 4, 3 * 11 * 4));
}

TEST(CostModelTraffic, HybridAveragesShardsAcrossReplicas) {
  // 4 ranks as 2 replicas of shard groups of 2: ceil(k/2) = 10, 6, 5 (21),
  // the replica all-reduce of those shards ceil(ceil(k/2)/2) = 5, 3, 3 (11).
  ModelDescription model = smallModel();
  const int64_t L = 2 * 3 * 4, C = 2 * 1 * 4;
  Traffic expected =
      traffic(L + C + 2 * 1 * 11 * 4, 1 * 21 * 4 + 1 * 6 * 4, 1 * 21 * 4);
  expectTraffic(stepTraffic(model, preset("hybrid", 4, 2), 4), expected);
}

TEST(CostModelTraffic, WithoutPaddingDdpAndZeroSendTwoPsiB) {
  // Strategies.md's closed forms when n divides every k: DDP and ZeRO-1/2
  // 2 Psi b (N-1)/N, ZeRO-3 Psi (N-1)/N b (2 + |B|/Psi), plus L and C.
  ModelDescription model;
  model.parameters = {
      {"a", 4096, true, 0}, {"b", 1024, false, 0}, {"c", 64, true, -1}};
  model.clipGradients = false;
  const int64_t psi = 5184, readByBackward = 4096 + 64, N = 8, b = 4;
  const int64_t L = 2 * (N - 1) * 4;
  EXPECT_EQ(stepTraffic(model, preset("ddp", N), N).total(),
            L + 2 * psi * b * (N - 1) / N);
  EXPECT_EQ(stepTraffic(model, preset("zero2", N), N).total(),
            L + 2 * psi * b * (N - 1) / N);
  EXPECT_EQ(stepTraffic(model, preset("zero3", N), N).total(),
            L + (2 * psi + readByBackward) * b * (N - 1) / N);
}

TEST(CostModelTraffic, MixedPrecisionElementSizes) {
  // bf16: gradients reduced in bf16 (b_g = 2) unless reduce_dtype = f32;
  // sharded parameters gathered in bf16 (b_c = 2); ZeRO-1/2 gather the
  // bf16 compute copy (b_m = 2: the f32 master lives with the optimizer
  // states), in f32 the parameter (b_m = 4).
  ModelDescription model = smallModel(Precision::BF16);
  const int64_t L = 24, C = 24;
  Plan zero1 = preset("zero1", 4);
  expectTraffic(stepTraffic(model, zero1, 4),
                traffic(L + C, 3 * 11 * 2, 3 * 11 * 2));
  expectTraffic(stepTraffic(smallModel(Precision::F32), zero1, 4),
                traffic(L + C, 3 * 11 * 4, 3 * 11 * 4));
  Plan fsdp = preset("fsdp", 4);
  fsdp.reduceDtype = ReduceDtype::F32;
  expectTraffic(stepTraffic(model, fsdp, 4),
                traffic(L + C, (3 * 11 + 3 * 3) * 2, 3 * 11 * 4));
  // DDP reduces whole gradients: in bf16, 2 bytes.
  expectTraffic(stepTraffic(model, preset("ddp", 4), 4),
                traffic(L + 2 * 3 * 11 * 2, 0, 0));
}

TEST(CostModelTraffic, AccumulationGathersEveryMicroBatch) {
  // K micro-batches reduce once but gather K times.
  ModelDescription one = smallModel(Precision::F32, 1);
  ModelDescription three = smallModel(Precision::F32, 3);
  Traffic a = stepTraffic(one, preset("zero3", 4), 4);
  Traffic b = stepTraffic(three, preset("zero3", 4), 4);
  EXPECT_EQ(b.allGather, 3 * a.allGather);
  EXPECT_EQ(b.reduceScatter, a.reduceScatter);
  EXPECT_EQ(b.allReduce, a.allReduce);
  // ZeRO-1/2 gather the updated shards once per step.
  EXPECT_EQ(stepTraffic(three, preset("zero2", 4), 4),
            stepTraffic(one, preset("zero2", 4), 4));
}

TEST(CostModelTraffic, MixedPrecisionZero12GatherTheComputeCopyOncePerStep) {
  // Under mixed precision ZeRO-1/2 gather the bf16 copies before the first
  // forward reader, once per step; in f32 they gather the updated
  // parameters after the optimizer. Both in one bucket under the cap.
  for (const char *name : {"zero1", "zero2"}) {
    for (Precision precision : {Precision::BF16, Precision::F32}) {
      ModelDescription model = smallModel(precision, 3);
      int64_t gathers = 0, gatherCalls = 0;
      for (const CollectiveCall &call :
           planCollectives(model, preset(name, 4), 4)) {
        if (call.kind != CollectiveKind::AllGather)
          continue;
        ++gatherCalls;
        gathers += int64_t(call.memberElements.size());
        EXPECT_EQ(call.repeat, 1) << name;
        EXPECT_EQ(call.phase, precision == Precision::BF16 ? Phase::FirstForward
                                                           : Phase::Optimizer)
            << name;
        EXPECT_EQ(call.elementBytes, precision == Precision::BF16 ? 2 : 4);
      }
      EXPECT_EQ(gathers, 3) << name;
      EXPECT_EQ(gatherCalls, 1) << name;
      // Calls: one bucket of the three, or three under a 1-byte cap.
      Plan tiny = preset(name, 4);
      tiny.bucketCapBytes = 1;
      int64_t calls = 0;
      for (const CollectiveCall &call : planCollectives(model, tiny, 4))
        calls += call.kind == CollectiveKind::AllGather;
      EXPECT_EQ(calls, 3) << name;
    }
  }
}

TEST(CostModelTraffic, ParameterGroupsUseTheirOwnRows) {
  // FSDP with the bias replicated (a ddp group): the bias is all-reduced,
  // the rest is FSDP's; the clipping norm is still one group size.
  ModelDescription model = smallModel();
  Plan plan = preset("fsdp", 4);
  Layout ddp;
  plan.parameterLayouts["out.bias"] = ddp;
  const int64_t L = 24, C = 24;
  expectTraffic(
      stepTraffic(model, plan, 4),
      traffic(L + C + 2 * 3 * 3 * 4, 3 * 8 * 4 + 3 * 3 * 4, 3 * 8 * 4));
  // A hybrid plan whose bias shards over the whole world: two shard group
  // sizes, two clipping all-reduces.
  Plan hybrid = preset("hybrid", 4, 2);
  Layout world = hybrid.layout;
  world.shardGroupSize = 4;
  hybrid.parameterLayouts["out.bias"] = world;
  Traffic t = stepTraffic(model, hybrid, 4);
  const int64_t C2 = 2 * 1 * 4, C4 = 2 * 3 * 4;
  // Replica all-reduce only for the two weights: ceil(ceil(k/2)/2) = 5, 3.
  EXPECT_EQ(t.allReduce, L + C2 + C4 + 2 * 1 * (5 + 3) * 4);
  EXPECT_EQ(t.reduceScatter, 1 * (10 + 6) * 4 + 3 * 3 * 4);
}

TEST(CostModelTraffic, OneRankSendsNothing) {
  ModelDescription model = smallModel();
  for (const std::string &name : presetNames())
    EXPECT_EQ(stepTraffic(model, preset(name, 1, 1), 1).total(), 0) << name;
  EXPECT_TRUE(planCollectives(model, preset("fsdp", 1), 1).empty());
}

/// The calls' bytes, each run counted.
Traffic sumOfCalls(const std::vector<CollectiveCall> &calls) {
  Traffic sum;
  for (const CollectiveCall &call : calls)
    sum[call.kind] += call.wireBytes() * call.repeat;
  return sum;
}

TEST(CostModelTraffic, CallsSumToTheFormula) {
  ModelDescription model = smallModel(Precision::BF16, 2);
  for (const std::string &name : presetNames()) {
    Plan plan = preset(name, 4, 2);
    for (Reshard reshard : {Reshard::AfterForward, Reshard::AfterBackward}) {
      plan.reshard = reshard;
      for (int64_t cap : {int64_t(1), int64_t(64), int64_t(25) << 20}) {
        plan.bucketCapBytes = cap;
        EXPECT_EQ(sumOfCalls(planCollectives(model, plan, 4)),
                  stepTraffic(model, plan, 4))
            << name << " cap " << cap;
      }
    }
  }
}

TEST(CostModelTraffic, ReducingEveryMicroBatchScattersKTimes) {
  // Sharded gradients reduced every micro-batch: the reduce-scatter term
  // times K; gathers and the hybrid replicas' all-reduce do not change.
  ModelDescription three = smallModel(Precision::F32, 3);
  for (const char *name : {"zero2", "zero3", "fsdp", "hybrid"}) {
    Plan step = preset(name, 4, 2);
    Plan every = step;
    every.reduceEvery = ReduceEvery::MicroBatch;
    Traffic a = stepTraffic(three, step, 4);
    Traffic b = stepTraffic(three, every, 4);
    EXPECT_EQ(b.reduceScatter, 3 * a.reduceScatter) << name;
    EXPECT_EQ(b.allGather, a.allGather) << name;
    EXPECT_EQ(b.allReduce, a.allReduce) << name;
    // The calls agree: the scatters of sharded gradients run K times.
    EXPECT_EQ(sumOfCalls(planCollectives(three, every, 4)), b) << name;
  }
  // ZeRO-1 in a mixed plan: its whole gradients still reduce once.
  Plan mixed = preset("zero2", 4);
  Layout zero1 = mixed.layout;
  zero1.gradients = Placement::Replicated;
  mixed.parameterLayouts["out.bias"] = zero1;
  mixed.reduceEvery = ReduceEvery::MicroBatch;
  Plan once = mixed;
  once.reduceEvery = ReduceEvery::Step;
  EXPECT_EQ(stepTraffic(three, mixed, 4).reduceScatter -
                stepTraffic(three, once, 4).reduceScatter,
            2 * 3 * (5 + 3) * 4);
}

TEST(CostModelTraffic, BucketsCloseAtTheCap) {
  // DDP on 4 ranks in f32: gradients 40, 48 and 80 bytes in backward order
  // (bias, fc2, fc1). A 64-byte cap closes a bucket once it holds 64 bytes.
  ModelDescription model = smallModel();
  Plan plan = preset("ddp", 4);
  plan.bucketCapBytes = 64;
  std::vector<CollectiveCall> calls = planCollectives(model, plan, 4);
  // The loss, then {bias, fc2} (88 bytes), then {fc1}.
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].memberElements, std::vector<int64_t>({1}));
  EXPECT_EQ(calls[1].memberElements, std::vector<int64_t>({10, 12}));
  EXPECT_EQ(calls[2].memberElements, std::vector<int64_t>({20}));
  plan.bucketCapBytes = int64_t(25) << 20;
  EXPECT_EQ(planCollectives(model, plan, 4).size(), 2u);
}

TEST(CostModelTraffic, FsdpGathersABlockAtOnce) {
  ModelDescription model = smallModel();
  std::vector<CollectiveCall> calls =
      planCollectives(model, preset("fsdp", 4), 4);
  std::vector<std::vector<int64_t>> forward, backward;
  for (const CollectiveCall &call : calls) {
    if (call.kind != CollectiveKind::AllGather)
      continue;
    (call.phase == Phase::Forward ? forward : backward)
        .push_back(call.memberElements);
  }
  // Block h.0 together, the bias alone; the backward pass regathers only
  // h.0.fc2.weight.
  EXPECT_EQ(forward, (std::vector<std::vector<int64_t>>{{20, 12}, {10}}));
  EXPECT_EQ(backward, (std::vector<std::vector<int64_t>>{{12}}));
  // ZeRO-3 gathers each parameter alone.
  int64_t zero3Forward = 0;
  for (const CollectiveCall &call :
       planCollectives(model, preset("zero3", 4), 4))
    zero3Forward +=
        call.kind == CollectiveKind::AllGather && call.phase == Phase::Forward;
  EXPECT_EQ(zero3Forward, 3);
}

} // namespace
