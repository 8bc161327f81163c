// Reading a sharded checkpoint: its MANIFEST, file checks, any element range.
#pragma once

#include "ckpt/CheckpointManifest.h"
#include "core/Expected.h"

#include <string>

namespace autoshard::rt {

/// The name of the file whose presence makes a checkpoint directory complete.
inline constexpr char kCheckpointManifestName[] = "MANIFEST";

/// A checkpoint directory opened for reading. Every byte it hands out is
/// checked against the CRC-32 the MANIFEST records for its block, so a
/// corrupt file is refused rather than loaded, whatever range is read.
class CheckpointReader {
public:
  /// Reads and parses `dir`/MANIFEST (parseCheckpointManifest). A missing
  /// MANIFEST is an error saying the checkpoint is incomplete.
  static Expected<CheckpointReader> open(const std::string &dir);
  /// Parses `manifestText` as the MANIFEST of `dir` (a rank that received
  /// the text from rank 0 instead of reading it).
  static Expected<CheckpointReader> fromText(const std::string &dir,
                                             const std::string &manifestText);

  const std::string &directory() const { return dir; }
  const CheckpointManifest &manifest() const { return contents; }

  /// Every listed file exists with the size the MANIFEST records. Errors
  /// name the file: missing, or truncated / grown (sizes found and
  /// expected).
  Status checkFiles() const;
  /// The CRC-32 of the whole file `name` is the recorded one.
  Status verifyFile(const std::string &name) const;
  /// Reads the global elements `[begin, begin + count)` of tensor `name`
  /// into `out` (count * dtype-size bytes), from whichever blocks hold
  /// them: this is how a run on another world size or strategy reshards.
  /// Each block it touches is read whole and checked against its CRC-32.
  Status readRange(const std::string &name, int64_t begin, int64_t count,
                   void *out) const;

private:
  std::string dir;
  CheckpointManifest contents;
};

} // namespace autoshard::rt
