// Sharded checkpoints of a training run: save, resume, reshard (collective).
#pragma once

#include "ckpt/CheckpointReader.h"
#include "ckpt/Layout.h"
#include "core/Control.h"
#include "core/Expected.h"
#include "core/StopHook.h"
#include "io/Manifest.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace autoshard::rt {

/// The checkpoint options of a training binary (docs/Reliability.md).
struct CheckpointOptions {
  /// --checkpoint-dir; empty: no checkpoints.
  std::string dir;
  /// --checkpoint-every K: a checkpoint after every K-th step (0: only
  /// after the last step).
  int64_t every = 0;
  /// --keep-checkpoints N: complete checkpoints kept.
  int keep = 2;
  /// --resume: continue from the newest complete checkpoint; a directory
  /// without one is an error.
  bool resume = false;
  /// Hidden test hook (--exit-during-checkpoint K): while saving step K,
  /// the job ends (ControlPlane::abortJob, status 3) once every shard file
  /// is written
  /// and before the MANIFEST is, as if it died mid-save.
  int64_t exitDuringSave = 0;
  /// --stop-rank-at at a save or resume point (core/StopHook.h).
  StopHook stop;
};

/// One rank's side of a run's checkpoints. Every method is collective over
/// the job's control plane: all ranks call it with the same arguments and
/// get the same verdict (the error of the lowest failing rank). Rank 0 prints
/// what was done to stdout ("autoshard: ..."). The directory must be one that
/// every rank sees (a shared file system on several nodes).
///
/// Saving: each rank writes its own file of the blocks assignCheckpointBlocks
/// gives it, straight from its buffers (no gathering); rank 0 then writes
/// the MANIFEST and renames the staging directory (CheckpointDir.h).
/// Resuming: rank 0 picks the newest complete checkpoint and sends its
/// MANIFEST; every rank checks it against its step (checkResumable), the
/// files' sizes, the whole-file CRC-32 of every world-size-th file, and
/// reads the elements it holds from whichever blocks have them, which
/// reshards a checkpoint of any world size or strategy of the same model.
class Checkpointer {
public:
  /// `manifestText` is the binary's embedded manifest (hashed into the
  /// checkpoint's "plan" record); `data` is describeDataSource's record.
  Checkpointer(CheckpointOptions options, const Manifest &manifest,
               std::string_view manifestText, uint64_t seed, std::string data,
               ControlPlane &control);
  ~Checkpointer();
  Checkpointer(const Checkpointer &) = delete;
  Checkpointer &operator=(const Checkpointer &) = delete;

  bool enabled() const { return !options.dir.empty(); }

  /// Before the first step. With --resume: loads the newest complete
  /// checkpoint into `args` (params and opt_states; padding zeroed) and
  /// returns its step, which must not exceed `totalSteps`. Without: checks
  /// that the directory holds no complete checkpoint (a fresh run must not
  /// mix its checkpoints with another run's), creates it, returns 0.
  /// Either way rank 0 then holds the directory's lock until the run ends:
  /// a second run on the same directory is refused.
  Expected<int64_t> start(const std::vector<void *> &args, int64_t totalSteps);

  /// Whether step `step` (1-based, completed) gets a checkpoint: every
  /// `every`-th step, and the last one (`lastStep`).
  bool due(int64_t step, int64_t lastStep) const;

  /// Writes the checkpoint of completed step `step` from `args`, then
  /// keeps the newest --keep-checkpoints complete ones.
  Status save(int64_t step, const std::vector<void *> &args);

  /// The checkpoint start() resumed from, for the banner ("" if none).
  const std::string &resumedFrom() const { return resumedPath; }
  /// The step of the newest complete checkpoint this run has written or
  /// resumed from; -1 if none.
  int64_t newestStep() const { return newest; }

private:
  Status load(const CheckpointReader &reader, const std::vector<void *> &args);

  CheckpointOptions options;
  const Manifest &manifest;
  uint64_t planHash;
  uint64_t seed;
  std::string data;
  ControlPlane &control;
  int rank;
  int worldSize;
  std::vector<BlockAssignment> assignments;
  std::string resumedPath;
  int64_t newest = -1;
  /// Rank 0's lock of the directory (lockCheckpointDirectory), or -1.
  int lockFd = -1;
};

} // namespace autoshard::rt
