// When a run saves, what it keeps and where it resumes.
#include "driver/CheckpointPolicy.h"
#include "driver/OffloadArgs.h"
#include "driver/Params.h"
#include "driver/RankErrors.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace autoshard::rt {

namespace {

CheckpointOptions checkpointOptions(const Options &options) {
  CheckpointOptions checkpoints;
  checkpoints.dir = options.checkpointDir;
  checkpoints.every = options.checkpointEvery;
  checkpoints.keep = options.keepCheckpoints;
  checkpoints.resume = options.resume;
  checkpoints.exitDuringSave = options.exitDuringCheckpoint;
  if (options.stopRankAt.inCheckpoint())
    checkpoints.stop = options.stopRankAt;
  return checkpoints;
}

} // namespace

CheckpointPolicy::CheckpointPolicy(const Options &options,
                                   const Manifest &manifest,
                                   std::string_view manifestText,
                                   std::string dataSource,
                                   ControlPlane &control)
    : options(options), manifest(manifest), control(control),
      checkpointer(checkpointOptions(options), manifest, manifestText,
                   options.seed, std::move(dataSource), control) {}

Expected<int64_t> CheckpointPolicy::restore(asrt_context &ctx,
                                            const std::vector<void *> &args) {
  if (!options.resume)
    return checkpointer.start(args, options.steps);
  // --resume loads memory=nvme arguments (and a GPU's) through host
  // copies.
  StagedArgs resumed(ctx, manifest, args);
  Expected<int64_t> firstStep = checkpointer.start(resumed.args(), options.steps);
  if (firstStep)
    resumed.writeBack();
  return firstStep;
}

bool CheckpointPolicy::due(int64_t step) const {
  return checkpointer.due(step, options.steps);
}

Status CheckpointPolicy::save(asrt_context &ctx, int64_t step,
                              const std::vector<void *> &args) {
  // memory=nvme arguments (and a GPU's) are saved from host copies.
  StagedArgs saving(ctx, manifest, args);
  return checkpointer.save(step, saving.args());
}

bool CheckpointPolicy::restoreBest() {
  std::string shared;
  Status readBest;
  std::error_code ec;
  if (control.rank() == 0 &&
      std::filesystem::exists(options.saveBestFile, ec)) {
    Expected<BestEvaluation> best = readBestEvaluation(options.saveBestFile);
    if (best) {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", best->loss);
      shared = text;
      std::printf("autoshard: --save-best: the evaluation to beat is "
                  "'%s''s, loss %.8g after step %" PRId64 "\n",
                  options.saveBestFile.c_str(), best->loss, best->afterStep);
      std::fflush(stdout);
    } else {
      readBest = best.status();
    }
  }
  if (!allRanksOk(readBest, control))
    return false;
  control.broadcast(shared, 0);
  if (!shared.empty())
    bestLoss = std::strtod(shared.c_str(), nullptr);
  return true;
}

bool CheckpointPolicy::isNewBest(double loss, bool atStart) const {
  return !atStart && std::isfinite(loss) && (!bestLoss || loss < *bestLoss);
}

} // namespace autoshard::rt
