//===- Plan.cpp - presets, plan checks and candidate plans ----------------===//

#include "autoshard/CostModel/Plan.h"

#include <algorithm>
#include <set>

using namespace autoshard::cost;

Layout Plan::layoutOf(const ParameterTensor &parameter) const {
  // The search asks this for every parameter of every candidate; most
  // candidates name no parameter.
  if (!parameterLayouts.empty())
    if (auto it = parameterLayouts.find(parameter.name);
        it != parameterLayouts.end())
      return it->second;
  if (persistenceThreshold > 0 && layout.parameters == Placement::Sharded &&
      parameter.elements <= persistenceThreshold) {
    Layout whole = layout;
    whole.parameters = Placement::Replicated;
    return whole;
  }
  return layout;
}

const std::vector<std::string> &autoshard::cost::presetNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const strategy::StrategyPreset &preset : strategy::kStrategyPresets)
      list.push_back(preset.name);
    return list;
  }();
  return names;
}

std::optional<Plan> autoshard::cost::presetPlan(const std::string &name,
                                                int64_t worldSize,
                                                int64_t shardGroupSize) {
  const strategy::StrategyPreset *preset = strategy::lookupStrategy(name);
  if (!preset)
    return std::nullopt;
  Plan plan;
  plan.name = preset->name;
  plan.layout.optimizerStates = preset->optimizerStates;
  plan.layout.gradients = preset->gradients;
  plan.layout.parameters = preset->parameters;
  plan.layout.unit = preset->unit;
  plan.layout.shardGroupSize =
      preset->hybrid ? shardGroupSize : std::max<int64_t>(worldSize, 1);
  return plan;
}

static std::string divisorsOf(int64_t n) {
  std::string text;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0)
      text += (text.empty() ? "" : ", ") + std::to_string(d);
  return text;
}

static void verifyLayout(const Layout &layout, const std::string &what,
                         int64_t worldSize, std::vector<std::string> &errors) {
  if (layout.gradients == Placement::Sharded &&
      layout.optimizerStates == Placement::Replicated)
    errors.push_back(what +
                     ": sharded gradients need sharded optimizer states");
  if (layout.parameters == Placement::Sharded &&
      layout.gradients == Placement::Replicated)
    errors.push_back(what + ": sharded parameters need sharded gradients");
  bool sharded = layout.optimizerStates == Placement::Sharded ||
                 layout.gradients == Placement::Sharded ||
                 layout.parameters == Placement::Sharded;
  if (sharded &&
      (layout.shardGroupSize < 1 || worldSize % layout.shardGroupSize != 0))
    errors.push_back(
        what + ": shard group size " + std::to_string(layout.shardGroupSize) +
        " does not divide the world size " + std::to_string(worldSize) +
        " (valid: " + divisorsOf(worldSize) + ")");
}

std::string autoshard::cost::verifyPlan(const Plan &plan,
                                        const ModelDescription &model,
                                        const ClusterSpec &cluster) {
  std::vector<std::string> errors;
  int64_t worldSize = cluster.worldSize();
  verifyLayout(plan.layout, "the plan", worldSize, errors);
  for (const auto &entry : plan.parameterLayouts) {
    const std::string &name = entry.first;
    bool known =
        std::any_of(model.parameters.begin(), model.parameters.end(),
                    [&](const ParameterTensor &p) { return p.name == name; });
    if (!known)
      errors.push_back("parameter layout for '" + name +
                       "', which the model does not have");
    verifyLayout(entry.second, "parameter '" + name + "'", worldSize, errors);
  }
  if (plan.bucketCapBytes < 1)
    errors.push_back("bucket cap " + std::to_string(plan.bucketCapBytes) +
                     " bytes: it must be at least 1");
  if (plan.reduceEvery == ReduceEvery::MicroBatch && !shardsGradients(plan))
    errors.push_back("reduction every micro-batch reduce-scatters sharded "
                     "gradients, and this plan shards none (use zero2, "
                     "zero3, fsdp or hybrid)");
  if (plan.prefetchDepth < 0)
    errors.push_back("prefetch depth " + std::to_string(plan.prefetchDepth) +
                     ": it must be at least 0");
  bool offload = plan.optimizerOffload != Offload::None ||
                 plan.parameterOffload != Offload::None;
  if (offload && !cluster.device.canOffload())
    errors.push_back("'" + cluster.device.name +
                     "' cannot offload: offload moves state from a GPU to "
                     "its host's memory or NVMe (use offload none)");
  if (plan.parameterOffload != Offload::None) {
    bool allSharded = plan.layout.parameters == Placement::Sharded;
    for (const ParameterTensor &p : model.parameters)
      allSharded &= plan.layoutOf(p).parameters == Placement::Sharded;
    if (!allSharded)
      errors.push_back("parameter offload moves parameter shards: it needs "
                       "sharded parameters for every parameter (zero3, "
                       "fsdp, hybrid)");
    if (plan.optimizerOffload == Offload::None)
      errors.push_back("parameter offload needs the optimizer offloaded too: "
                       "the update runs where the master weights are");
  }
  bool toNvme = plan.optimizerOffload == Offload::Nvme ||
                plan.parameterOffload == Offload::Nvme;
  if (offload && cluster.device.canOffload() &&
      (cluster.device.hostMemoryBytes <= 0 ||
       (toNvme && cluster.device.nvmeBytes <= 0)))
    errors.push_back("'" + cluster.device.name +
                     "' has no host memory or NVMe figures to offload to");
  std::string text;
  for (const std::string &error : errors)
    text += (text.empty() ? "" : "; ") + error;
  return text;
}

/// Whether the plan's layout, or that of a parameter placed otherwise,
/// shards what `placement` names (gradients, parameters).
static bool shardsAny(const Plan &plan, Placement Layout::*placement) {
  if (plan.layout.*placement == Placement::Sharded)
    return true;
  for (const auto &[name, layout] : plan.parameterLayouts)
    if (layout.*placement == Placement::Sharded)
      return true;
  return false;
}

bool autoshard::cost::shardsGradients(const Plan &plan) {
  return shardsAny(plan, &Layout::gradients);
}

static bool shardsParameters(const Plan &plan) {
  return shardsAny(plan, &Layout::parameters);
}

std::vector<Plan>
autoshard::cost::enumerateCandidatePlans(const ModelDescription &model,
                                         const ClusterSpec &cluster,
                                         const CandidateSpace &space) {
  int64_t worldSize = cluster.worldSize();
  std::vector<Plan> bases;
  for (const std::string &preset : space.presets) {
    const strategy::StrategyPreset *row = strategy::lookupStrategy(preset);
    if (!row || !row->hybrid) {
      if (std::optional<Plan> plan = presetPlan(preset, worldSize))
        bases.push_back(*plan);
      continue;
    }
    std::vector<int64_t> groups = space.hybridGroupSizes;
    if (groups.empty() && cluster.ranksPerNode > 1 &&
        cluster.ranksPerNode < worldSize)
      groups.push_back(cluster.ranksPerNode);
    for (int64_t group : groups)
      if (std::optional<Plan> plan = presetPlan(preset, worldSize, group))
        bases.push_back(*plan);
  }

  std::vector<Plan> plans;
  for (const Plan &base : bases) {
    bool sharded = shardsParameters(base);
    std::vector<Reshard> reshards =
        sharded ? space.reshards : std::vector<Reshard>{Reshard::AfterForward};
    // Reducing every micro-batch differs from once per step only for
    // sharded gradients and more than one micro-batch.
    std::vector<ReduceEvery> reduceEvery;
    for (ReduceEvery every : space.reduceEvery)
      if (every == ReduceEvery::Step ||
          (shardsGradients(base) && model.microBatches > 1))
        reduceEvery.push_back(every);
    // The per-layer mixes of this base: small parameters kept whole, where
    // the base shards some that it does not place by name.
    std::vector<int64_t> thresholds;
    for (int64_t threshold : space.persistenceThresholds) {
      bool any =
          threshold == 0 ||
          (base.layout.parameters == Placement::Sharded &&
           std::any_of(model.parameters.begin(), model.parameters.end(),
                       [&](const ParameterTensor &p) {
                         return p.elements <= threshold &&
                                !base.parameterLayouts.count(p.name);
                       }));
      if (any)
        thresholds.push_back(threshold);
    }
    for (int64_t threshold : thresholds)
    for (ReduceEvery every : reduceEvery)
    for (Reshard reshard : reshards)
      for (int64_t cap : space.bucketCapsBytes)
        for (int64_t depth : space.prefetchDepths)
          for (ActivationCheckpointing mode : space.checkpointing)
            for (Offload optimizer : space.optimizerOffloads)
              for (Offload parameters : space.parameterOffloads) {
                bool offloads =
                    optimizer != Offload::None || parameters != Offload::None;
                if (offloads && !space.offload)
                  continue;
                // Under mixed precision the parameters are the f32 masters,
                // which move with the offloaded optimizer states; the
                // compiler's parameter offload moves nothing more (it
                // warns), so each such plan is one candidate, without it.
                if (model.precision == Precision::BF16 &&
                    optimizer != Offload::None) {
                  if (parameters != space.parameterOffloads.front())
                    continue;
                  parameters = Offload::None;
                }
                Plan plan = base;
                plan.persistenceThreshold = threshold;
                plan.reshard = reshard;
                plan.bucketCapBytes = cap;
                plan.prefetchDepth = depth;
                plan.checkpointing = mode;
                plan.optimizerOffload = optimizer;
                plan.parameterOffload = parameters;
                plan.reduceDtype = space.reduceDtype;
                plan.reduceEvery = every;
                if (verifyPlan(plan, model, cluster).empty())
                  plans.push_back(std::move(plan));
              }
  }
  return plans;
}

static std::string formatCap(int64_t bytes) {
  if (bytes % (int64_t(1) << 20) == 0)
    return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes) + "B";
}

std::string autoshard::cost::describePlan(const Plan &plan) {
  std::string text = plan.name;
  if (const strategy::StrategyPreset *preset =
          strategy::lookupStrategy(plan.name);
      preset && preset->hybrid)
    text += "(G=" + std::to_string(plan.layout.shardGroupSize) + ")";
  if (plan.persistenceThreshold > 0)
    text += " persist<=" + std::to_string(plan.persistenceThreshold);
  else if (!plan.parameterLayouts.empty())
    text += "+" + std::to_string(plan.parameterLayouts.size()) + " groups";
  if (shardsParameters(plan))
    text += std::string(" reshard=") + stringify(plan.reshard);
  text += " bucket=" + formatCap(plan.bucketCapBytes);
  text += " prefetch=" + std::to_string(plan.prefetchDepth);
  if (!plan.overlap)
    text += " overlap=false";
  if (plan.reduceDtype == ReduceDtype::F32)
    text += " reduce=f32";
  if (plan.reduceEvery == ReduceEvery::MicroBatch)
    text += " reduce-every=micro-batch";
  text += std::string(" offload=") + stringify(plan.optimizerOffload) + "/" +
          stringify(plan.parameterOffload);
  text += std::string(" checkpoint=") + stringify(plan.checkpointing);
  return text;
}
