// The hidden test hook that stops one rank at one of the runtime's waits.
#pragma once

#include "core/Expected.h"

#include <cstdint>
#include <string_view>

namespace autoshard::rt {

/// The points where a rank blocks on its peers or on its own offload
/// thread, and where the hook can stop it. Of a checkpoint save: before
/// rank 0 creates the staging directory, before this rank writes its shard
/// file, before the gather of the files' sizes and CRCs, before rank 0
/// commits the MANIFEST; of a resume: before this rank reads its elements
/// (each followed by an exchange over the control plane). Then: before a
/// training step runs (its collectives follow: in step 1, the creation of
/// each grid group's communicator too), before the evaluation after a
/// training step runs its first batch, and at the first offload transfer
/// wait of a training step (asrt_transfer_wait or a synchronous copy or
/// NVMe read or write).
enum class StopPoint {
  Create,
  Write,
  Gather,
  Commit,
  Load,
  Step,
  Eval,
  Offload
};

/// Hidden test hook (--stop-rank-at STEP:RANK:POINT): rank RANK stops
/// itself (SIGSTOP) at POINT of step STEP (the save of step STEP's
/// checkpoint, the resume from it, the start of training step STEP, the
/// evaluation after it, its first offload wait), as a rank that hangs
/// there; every other
/// rank must end the job at the collective timeout, naming what it waited
/// for.
struct StopHook {
  int64_t step = 0; ///< 0: never.
  int rank = 0;
  StopPoint point = StopPoint::Create;

  bool due(StopPoint at, int64_t atStep, int atRank) const {
    return step != 0 && point == at && step == atStep && rank == atRank;
  }
  /// Whether POINT lies in a checkpoint's save or resume (which needs
  /// --checkpoint-dir).
  bool inCheckpoint() const { return step != 0 && point <= StopPoint::Load; }
};

/// Parses STEP:RANK:POINT (STEP >= 1, RANK >= 0, POINT one of create,
/// write, gather, commit, load, step, eval, offload); the error names the
/// part that is wrong.
Expected<StopHook> parseStopHook(std::string_view spec);

/// Stops this process (SIGSTOP) after flushing stdout, so that the lines
/// printed before the stop reach the launcher.
void stopThisRank();

} // namespace autoshard::rt
