// The MANIFEST of a sharded checkpoint: what it holds, where, and checksums.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Expected.h"
#include "io/Manifest.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace autoshard::rt {

/// The checkpoint format version this runtime reads and writes.
constexpr int kCheckpointFormatVersion = 1;

/// One shard file of a checkpoint: its name inside the checkpoint
/// directory, its size and the CRC-32 of all its bytes.
struct CheckpointFile {
  std::string name;
  uint64_t bytes = 0;
  uint32_t crc = 0;
};

/// A contiguous run of a tensor's global (flat, row-major) elements
/// [begin, begin + count), stored at byte `offset` of `file` with CRC-32
/// `crc` over its count * dtype-size bytes.
struct CheckpointBlock {
  int64_t begin = 0;
  int64_t count = 0;
  std::string file;
  uint64_t offset = 0;
  uint32_t crc = 0;
};

/// A param or opt_state: its identity (what must match for a checkpoint to
/// load: name, role, dtype, global shape) and its blocks, sorted by begin
/// and tiling [0, numel) exactly.
struct CheckpointTensor {
  std::string name;
  Role role = Role::Param;
  asrt_dtype dtype = ASRT_DTYPE_F32;
  std::vector<int64_t> shape;
  /// A param's aliases (the step manifest's `aliases=`): further names it
  /// is saved under when consolidated. Not part of its identity.
  std::vector<std::string> aliases;
  std::vector<CheckpointBlock> blocks;

  int64_t numElements() const;
  /// "param fc1.weight f32 5x8".
  std::string describe() const;
};

struct CheckpointManifest {
  int formatVersion = kCheckpointFormatVersion;
  /// Steps completed when it was written; a resumed run continues with
  /// step `step + 1` (1-based).
  int64_t step = 0;
  /// The run's --seed: batches are a pure function of (seed, step).
  uint64_t seed = 0;
  /// Where the batches come from: "synthetic", or "file bytes=N path=P".
  std::string data = "synthetic";
  /// The plan that wrote it, for messages: strategy, grid, world size and
  /// the FNV-1a-64 of the binary's embedded manifest text.
  std::string strategy;
  std::string grid;
  int64_t world = 1;
  uint64_t planHash = 0;
  /// FNV-1a-64 of the tensors' identities (modelSignatureHash); recomputed
  /// and compared when parsed.
  uint64_t modelHash = 0;
  std::vector<CheckpointFile> files;
  std::vector<CheckpointTensor> tensors;

  const CheckpointTensor *findTensor(std::string_view name) const;
  const CheckpointFile *findFile(std::string_view name) const;
};

/// The identity of every param and opt_state argument of a step, in
/// argument order, with global shapes (and a param's aliases) and no
/// blocks: what a checkpoint of the same model holds whatever the strategy
/// and world size.
std::vector<CheckpointTensor> modelSignature(const Manifest &manifest);

/// FNV-1a-64 of "NAME ROLE DTYPE SHAPE\n" for each tensor in order.
uint64_t modelSignatureHash(const std::vector<CheckpointTensor> &tensors);

/// The manifest as text (docs/Reliability.md), ending in a line
/// "end crc32=X" whose CRC covers every byte before it.
std::string formatCheckpointManifest(const CheckpointManifest &manifest);

/// Parses and checks a manifest's text: version, the final checksum line
/// (a truncated or altered file fails it), every record once, tensors and
/// files unique, blocks tiling each tensor, inside their file, in a listed
/// file, and the model hash matching the tensors. Errors start with
/// "checkpoint manifest '<path>'" and name the line.
Expected<CheckpointManifest> parseCheckpointManifest(std::string_view text,
                                                     const std::string &path);

/// The "data" record of a run: "synthetic" without a data file, else
/// "file bytes=N path=P" (N its size, read with stat). Errors name the file.
Expected<std::string> describeDataSource(const std::string &dataFile);

/// Why a checkpoint cannot resume the step `manifest` describes, or
/// success: every param and opt_state of the step must be in the
/// checkpoint with the same role, dtype and global shape, and nothing
/// else; the seed and the data source must be the run's (a different data
/// file path of the same size is accepted: files move). The strategy, grid
/// and world size may differ (the loader reshards). `where` names the
/// checkpoint in messages.
Status checkResumable(const CheckpointManifest &checkpoint,
                      const std::string &where, const Manifest &manifest,
                      uint64_t seed, const std::string &data);

} // namespace autoshard::rt
