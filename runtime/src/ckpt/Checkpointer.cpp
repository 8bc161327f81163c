// Sharded checkpoints of a training run: save, resume, reshard (collective).
#include "ckpt/Checkpointer.h"
#include "ckpt/AtomicFile.h"
#include "ckpt/CheckpointDir.h"
#include "ckpt/CheckpointWriter.h"
#include "ckpt/ShardFile.h"
#include "core/Dtype.h"
#include "data/Philox.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace autoshard::rt {

namespace {

std::string quoted(const std::string &text) { return "'" + text + "'"; }

void note(int rank, const std::string &message) {
  if (rank != 0)
    return;
  std::printf("autoshard: %s\n", message.c_str());
  std::fflush(stdout);
}

} // namespace

Checkpointer::Checkpointer(CheckpointOptions options, const Manifest &manifest,
                           std::string_view manifestText, uint64_t seed,
                           std::string data, ControlPlane &control)
    : options(std::move(options)), manifest(manifest),
      planHash(fnv1a64(manifestText)), seed(seed), data(std::move(data)),
      control(control), rank(control.rank()), worldSize(control.size()),
      assignments(assignCheckpointBlocks(manifest)) {}

Checkpointer::~Checkpointer() {
  if (lockFd >= 0)
    ::close(lockFd); // drops the flock
}

bool Checkpointer::due(int64_t step, int64_t lastStep) const {
  if (!enabled() || step <= newest)
    return false;
  return step == lastStep || (options.every > 0 && step % options.every == 0);
}

Expected<int64_t> Checkpointer::start(const std::vector<void *> &args,
                                      int64_t totalSteps) {
  if (!enabled())
    return int64_t(0);
  const std::string &root = options.dir;
  ControlPlane::Purpose purpose(
      control, std::string(options.resume ? "resuming from" : "starting") +
                   " --checkpoint-dir " + quoted(root) +
                   ": agreeing on rank 0's look at the directory");

  // Rank 0 looks at the directory; everyone else gets its verdict.
  Status found;
  std::string chosen, manifestText;
  // A step-N directory is one checkpoint, not a directory of them: a run
  // there would nest its checkpoints inside another's.
  std::string trimmed = root;
  while (trimmed.size() > 1 && trimmed.back() == '/')
    trimmed.pop_back();
  std::string last = trimmed.substr(trimmed.find_last_of('/') + 1);
  std::string parent = parentDirectory(trimmed);
  if (rank == 0 && isCheckpointDirName(last)) {
    found = Error("--checkpoint-dir " + quoted(root) +
                  " is one checkpoint (a " + quoted(last) +
                  " directory), not a directory of checkpoints; give the "
                  "directory that holds it, " +
                  quoted(parent) +
                  (options.resume ? " (--resume takes its newest complete "
                                    "checkpoint)"
                                  : ""));
  } else if (rank == 0) {
    Expected<std::vector<CheckpointEntry>> entries = listCheckpoints(root);
    if (!entries) {
      found = Error("--checkpoint-dir: " + entries.message());
    } else if (!options.resume) {
      // A fresh run must not mix its checkpoints with another run's.
      int complete = 0;
      std::string newestPath;
      for (const CheckpointEntry &entry : *entries)
        if (entry.complete) {
          ++complete;
          newestPath = entry.path;
        }
      if (complete > 0)
        found = Error("--checkpoint-dir " + quoted(root) +
                      " already holds a checkpoint (" + quoted(newestPath) +
                      " is the newest of " + std::to_string(complete) +
                      "); pass --resume to continue from it, or choose a "
                      "directory without checkpoints");
      if (found.ok())
        if (Status s = makeDirectories(root); !s)
          found = Error("--checkpoint-dir: " + s.message());
    } else {
      std::string skipped;
      for (auto it = entries->rbegin(); it != entries->rend(); ++it) {
        if (it->complete) {
          chosen = it->path;
          break;
        }
        skipped += (skipped.empty() ? "" : ", ") + quoted(it->path);
      }
      if (chosen.empty()) {
        found =
            Error("--resume: --checkpoint-dir " + quoted(root) +
                  (entries->empty()
                       ? std::string(" holds no checkpoint")
                       : " holds no complete checkpoint (incomplete, without a "
                         "MANIFEST: " +
                             skipped + ")") +
                  "; run without --resume to start afresh");
      } else {
        if (!skipped.empty())
          note(rank,
               "skipping incomplete checkpoints (no MANIFEST): " + skipped);
        Expected<std::string> text =
            readWholeFile(chosen + "/" + kCheckpointManifestName);
        if (!text)
          found = Error("--resume: " + text.message());
        else
          manifestText = *text;
      }
    }
  }
  // The directory exists now (created, or holding the checkpoint to
  // resume): this run takes it.
  if (rank == 0 && found.ok()) {
    Expected<int> lock = lockCheckpointDirectory(root);
    if (lock)
      lockFd = *lock;
    else
      found = Error(lock.message());
  }
  if (Status s = agreeOnStatus(found, control); !s)
    return Error(s.message());
  if (!options.resume)
    return int64_t(0);

  purpose.set("resuming from --checkpoint-dir " + quoted(root) +
              ": receiving the MANIFEST from rank 0");
  control.broadcast(chosen, 0);
  control.broadcast(manifestText, 0);
  // Every rank parses and checks the same text, so they agree without
  // talking; the files are then checked and read by all of them.
  Expected<CheckpointReader> reader =
      CheckpointReader::fromText(chosen, manifestText);
  if (!reader)
    return Error("--resume: " + reader.message() + " (" + quoted(chosen) +
                 " is the newest complete checkpoint; move it away to resume "
                 "from an older one)");
  const CheckpointManifest &checkpoint = reader->manifest();
  if (Status s = checkResumable(checkpoint, chosen, manifest, seed, data); !s)
    return Error("--resume: " + s.message());
  if (checkpoint.step > totalSteps)
    return Error("--resume: checkpoint " + quoted(chosen) + " is of step " +
                 std::to_string(checkpoint.step) + ", past --steps " +
                 std::to_string(totalSteps) +
                 " (--steps counts every step of the run, those before the "
                 "checkpoint included)");

  // Test hook: this rank hangs before its reads, its peers in the
  // agreement after them.
  if (options.stop.due(StopPoint::Load, checkpoint.step, rank))
    stopThisRank();
  Status loaded = load(*reader, args);
  purpose.set("resuming from " + quoted(chosen) +
              ": agreeing that every rank loaded its elements");
  if (Status s = agreeOnStatus(loaded, control); !s)
    return Error("--resume: " + s.message() + " (" + quoted(chosen) +
                 " is the newest complete checkpoint; move it away to resume "
                 "from an older one)");

  resumedPath = chosen;
  newest = checkpoint.step;
  bool sameLayout = checkpoint.strategy == manifest.strategy &&
                    checkpoint.grid == manifest.gridString();
  note(rank, "resumed from " + quoted(chosen) + " (step " +
                 std::to_string(checkpoint.step) + ", strategy " +
                 checkpoint.strategy + ", grid " + checkpoint.grid +
                 (sameLayout ? ""
                             : "; resharded to strategy " + manifest.strategy +
                                   ", grid " + manifest.gridString()) +
                 ")");
  return checkpoint.step;
}

Status Checkpointer::load(const CheckpointReader &reader,
                          const std::vector<void *> &args) {
  if (Status s = reader.checkFiles(); !s)
    return s;
  // The ranks share the whole-file checks: together they read every file
  // once; the blocks each rank loads are checked by their own CRCs.
  const std::vector<CheckpointFile> &files = reader.manifest().files;
  for (size_t i = static_cast<size_t>(rank); i < files.size();
       i += static_cast<size_t>(worldSize))
    if (Status s = reader.verifyFile(files[i].name); !s)
      return s;
  for (const TensorSpec &arg : manifest.args) {
    if (arg.role != Role::Param && arg.role != Role::OptState)
      continue;
    HeldBlock held = heldBlock(manifest, arg, rank);
    auto *buffer = static_cast<char *>(args[arg.index]);
    if (Status s = reader.readRange(arg.name, held.begin, held.valid, buffer);
        !s)
      return s;
    int64_t size = dtypeSize(arg.dtype);
    std::memset(buffer + held.valid * size, 0,
                static_cast<size_t>((held.chunk - held.valid) * size));
  }
  return Status::success();
}

Status Checkpointer::save(int64_t step, const std::vector<void *> &args) {
  auto startTime = std::chrono::steady_clock::now();
  const std::string &root = options.dir;
  std::string staging = root + "/" + checkpointDirName(step) + ".partial";
  const std::string saving =
      "saving the checkpoint of step " + std::to_string(step) + ": ";
  ControlPlane::Purpose purpose(
      control, saving + "agreeing that rank 0 created " + quoted(staging));
  // Test hook: this rank hangs here, its peers in the exchange after it.
  auto stopAt = [&](StopPoint point) {
    if (options.stop.due(point, step, rank))
      stopThisRank();
  };

  stopAt(StopPoint::Create);
  Status begun;
  if (rank == 0) {
    Expected<std::string> made = beginCheckpoint(root, step);
    if (!made)
      begun = Error(made.message());
  }
  if (Status s = agreeOnStatus(begun, control); !s)
    return s;

  // This rank's blocks, straight from its buffers.
  std::vector<ShardBlock> blocks = shardBlocksOfRank(
      manifest, assignments, rank,
      [&](const TensorSpec &arg, int64_t begin) -> const void * {
        HeldBlock held = heldBlock(manifest, arg, rank);
        return static_cast<const char *>(args[arg.index]) +
               (begin - held.begin) * dtypeSize(arg.dtype);
      });
  WrittenShardFile written;
  Status wrote;
  stopAt(StopPoint::Write);
  if (!blocks.empty()) {
    Expected<WrittenShardFile> file =
        writeShardFile(staging, shardFileName(rank), rank, step, blocks);
    if (file)
      written = std::move(*file);
    else
      wrote = Error("cannot write the checkpoint of step " +
                    std::to_string(step) + ": " + file.message());
  }
  purpose.set(saving + "agreeing that every rank wrote its shard file");
  if (Status s = agreeOnStatus(wrote, control); !s)
    return s;

  // Test hook: the job dies with every shard file written and no MANIFEST.
  if (options.exitDuringSave == step) {
    control.abortJob(3);
  }

  // Rank 0 needs where each block landed: per rank, its file's size and
  // CRC, then (offset, CRC) of each of its blocks in assignment order.
  std::vector<uint64_t> record;
  if (!blocks.empty()) {
    record = {written.file.bytes, written.file.crc};
    for (const CheckpointBlock &b : written.blocks) {
      record.push_back(b.offset);
      record.push_back(b.crc);
    }
  }
  std::string mine(record.size() * sizeof(uint64_t), '\0');
  if (!record.empty())
    std::memcpy(mine.data(), record.data(), mine.size());
  purpose.set(saving + "gathering the shard files' sizes and CRCs on rank 0");
  stopAt(StopPoint::Gather);
  std::vector<std::string> gathered = control.gather(mine);
  // Rank r's record starts at displacements[r] in `records`.
  std::vector<size_t> displacements;
  std::vector<uint64_t> records;
  for (const std::string &bytes : gathered) {
    displacements.push_back(records.size());
    size_t at = records.size();
    records.resize(at + bytes.size() / sizeof(uint64_t));
    if (!bytes.empty())
      std::memcpy(records.data() + at, bytes.data(), bytes.size());
  }

  Status committed, pruned;
  uint64_t bytes = 0;
  std::vector<std::string> removed;
  stopAt(StopPoint::Commit);
  if (rank == 0) {
    // Every rank's file, rebuilt from its record and the assignments.
    std::vector<std::optional<WrittenShardFile>> files(
        static_cast<size_t>(worldSize));
    for (const BlockAssignment &a : assignments) {
      auto r = static_cast<size_t>(a.writer);
      size_t at = static_cast<size_t>(displacements[r]);
      if (!files[r]) {
        files[r] = WrittenShardFile{{shardFileName(a.writer), records[at],
                                     static_cast<uint32_t>(records[at + 1])},
                                    {}};
        bytes += records[at];
      }
      at += 2 + 2 * files[r]->blocks.size();
      files[r]->blocks.push_back({a.begin, a.count, shardFileName(a.writer),
                                  records[at],
                                  static_cast<uint32_t>(records[at + 1])});
    }
    CheckpointHeader header{step, seed, data, planHash};
    std::string text = formatCheckpointManifest(
        describeCheckpoint(manifest, assignments, files, header));
    // What a resume will parse, checked before it becomes the checkpoint.
    if (Expected<CheckpointManifest> check = parseCheckpointManifest(
            text, staging + "/" + kCheckpointManifestName);
        !check)
      committed = Error("internal error: the checkpoint's own MANIFEST does "
                        "not parse: " +
                        check.message());
    else
      committed = commitCheckpoint(root, step, text);
    // The checkpoint is complete whatever happens to the old ones: a
    // failure to remove them is reported, not fatal.
    if (committed)
      pruned = pruneCheckpoints(root, options.keep, removed);
  }
  purpose.set(saving + "agreeing that rank 0 committed the MANIFEST");
  if (Status s = agreeOnStatus(committed, control); !s)
    return Error("cannot write the checkpoint of step " + std::to_string(step) +
                 ": " + s.message());
  newest = step;

  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - startTime)
                  .count();
  char timing[64];
  std::snprintf(timing, sizeof timing, "%.1f ms", ms);
  std::string line = "checkpoint of step " + std::to_string(step) +
                     " written to " +
                     quoted(root + "/" + checkpointDirName(step)) + " (" +
                     std::to_string(bytes) + " bytes, " + timing + ")";
  if (!removed.empty()) {
    line += "; removed";
    for (const std::string &path : removed)
      line += " " + quoted(path);
  }
  note(rank, line);
  if (!pruned)
    note(rank, "warning: older checkpoints were not all removed: " +
                   pruned.message());
  return Status::success();
}

} // namespace autoshard::rt
