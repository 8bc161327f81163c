// When a run saves, what it keeps and where it resumes: its sharded
// checkpoints (--checkpoint-dir, --resume) and its best evaluation
// (--save-best).
#pragma once

#include "autoshard/rt/abi.h"
#include "ckpt/Checkpointer.h"
#include "core/Control.h"
#include "io/Manifest.h"
#include "driver/Options.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autoshard::rt {

/// The run's checkpoint decisions over a Checkpointer (docs/Reliability.md):
/// the step it starts from (--resume: the newest complete checkpoint's,
/// resharded to this binary's plan), which steps it saves after
/// (--checkpoint-every; --keep-checkpoints prunes), and the held-out loss a
/// new best must beat (--save-best, carried across a resume by its file).
/// Every method is collective over the job's control plane: all ranks call
/// it alike and reach the same decisions.
class CheckpointPolicy {
public:
  /// `manifestText` is the binary's embedded manifest and `dataSource`
  /// describeDataSource's record, which a checkpoint records to refuse a
  /// resume of another model, seed or data.
  CheckpointPolicy(const Options &options, const Manifest &manifest,
                   std::string_view manifestText, std::string dataSource,
                   ControlPlane &control);

  /// The 0-based step the run starts from: 0, or after --resume's
  /// checkpoint, whose state it loads into `args` (memory=nvme arguments
  /// and a GPU's through host copies). The error says why no checkpoint
  /// could be resumed.
  Expected<int64_t> restore(asrt_context &ctx, const std::vector<void *> &args);

  /// Whether the run saves a checkpoint after 1-based `step`.
  bool due(int64_t step) const;
  /// Saves the state in `args` as the checkpoint of `step` (memory=nvme
  /// arguments and a GPU's from host copies) and prunes the old ones.
  Status save(asrt_context &ctx, int64_t step, const std::vector<void *> &args);
  /// The step of the newest checkpoint written or resumed from; -1 if none.
  int64_t newestStep() const { return checkpointer.newestStep(); }

  /// A resumed run with --save-best: the loss of the evaluation its file
  /// holds from before becomes the one to beat (rank 0 reads the file and
  /// says so; every rank decides alike). False, the error printed, when
  /// the file is unreadable.
  bool restoreBest();
  /// Whether an evaluation's mean loss is a new best: finite, lower than
  /// every one before, and not --eval-at-start's baseline (`atStart`).
  bool isNewBest(double loss, bool atStart) const;
  /// Records a new best's loss, once it was saved.
  void recordBest(double loss) { bestLoss = loss; }

private:
  const Options &options;
  const Manifest &manifest;
  ControlPlane &control;
  Checkpointer checkpointer;
  /// The best held-out loss so far, which a new best must beat.
  std::optional<double> bestLoss;
};

} // namespace autoshard::rt
