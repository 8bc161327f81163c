// The checkpoint directory: naming, listing, atomic commit and retention.
#pragma once

#include "core/Expected.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autoshard::rt {

/// "step-00000040": the directory of the checkpoint of step 40 inside a
/// --checkpoint-dir. Its files are written into "step-00000040.partial",
/// which is renamed to this name once its MANIFEST is written.
std::string checkpointDirName(int64_t step);

/// Whether `name` (one path component) is a directory name the checkpoint
/// code writes, renames and removes inside a --checkpoint-dir: "step-N",
/// "step-N.partial" or "step-N.deleting". Nothing else there is touched.
bool isCheckpointDirName(const std::string &name);

struct CheckpointEntry {
  int64_t step = 0;
  std::string path;
  /// Holds a MANIFEST. A "step-N" directory without one can only be left by
  /// damage from outside (saves rename the directory after the MANIFEST is
  /// written); it is not a checkpoint.
  bool complete = false;
};

/// The "step-N" directories of `root` by increasing step (other entries,
/// ".partial" staging directories included, are not checkpoints). A root
/// that does not exist has none; one that is not a directory is an error.
Expected<std::vector<CheckpointEntry>> listCheckpoints(const std::string &root);

/// Starts the checkpoint of `step`: creates `root` if needed and a fresh,
/// empty staging directory root/step-N.partial (removing the leftovers of
/// an interrupted save), and returns its path. Fails, naming it, when a
/// complete checkpoint of that step exists: saves never overwrite one. An
/// incomplete root/step-N (no MANIFEST) is removed.
Expected<std::string> beginCheckpoint(const std::string &root, int64_t step);

/// Finishes the checkpoint of `step` whose shard files are in its staging
/// directory: writes MANIFEST there atomically (temporary file, fsync,
/// rename), fsyncs the directory, renames it to root/step-N and fsyncs
/// `root`. Until that last rename the previous checkpoints are all there
/// is; after it the new one is complete.
Status commitCheckpoint(const std::string &root, int64_t step,
                        const std::string &manifestText);

/// Keeps the newest `keep` complete checkpoints of `root` and removes the
/// older ones, every leftover staging or deletion directory, and incomplete
/// step directories older than the newest complete checkpoint. The paths
/// removed are appended to `removed`.
Status pruneCheckpoints(const std::string &root, int keep,
                        std::vector<std::string> &removed);

/// Removes a checkpoint directory: first renamed to PATH.deleting, so that
/// it stops being a checkpoint at once, then its files and itself.
Status removeCheckpointDirectory(const std::string &path);

/// The lock file of a checkpoint directory, `root/.lock`.
inline constexpr char kCheckpointLockName[] = ".lock";

/// Takes `root`'s lock for this process (an exclusive flock of
/// root/.lock, which records the holder's pid and host) and returns its
/// descriptor, to be closed when the run ends; the kernel drops the lock
/// when the process dies, so a killed run never leaves it behind. Another
/// process holding it is an error naming the holder: two runs writing one
/// directory would replace and prune each other's checkpoints.
Expected<int> lockCheckpointDirectory(const std::string &root);

} // namespace autoshard::rt
