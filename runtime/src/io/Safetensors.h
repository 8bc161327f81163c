// The safetensors format: a file's head from its tensors, and a file's bytes
// checked and indexed. Files on disk: driver/Safetensors.h, ckpt/ShardFile.h.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Expected.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace autoshard::rt {

/// A tensor to write: its bytes are numElements(shape) * dtypeSize(dtype).
struct TensorView {
  std::string name;
  asrt_dtype dtype = ASRT_DTYPE_F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// What comes before the tensors' bytes in a safetensors file, which then
/// holds each tensor's bytes in order.
struct SafetensorsHead {
  /// An 8-byte little-endian header length, then the JSON header
  /// {"__metadata__": {...}, "name": {"dtype", "shape", "data_offsets"},
  /// ...} padded with spaces to a multiple of 8 bytes (readers that map the
  /// file expect the data section aligned).
  std::string bytes;
  /// Each tensor's byte size, in order.
  std::vector<uint64_t> tensorBytes;
};

/// The head of a file of `tensors`; `metadata` becomes "__metadata__"
/// (string values), left out when empty. Errors say which tensor is wrong
/// (a name given twice or "__metadata__", an invalid dtype); the caller
/// names the file.
Expected<SafetensorsHead>
safetensorsHead(const std::vector<TensorView> &tensors,
                const std::map<std::string, std::string> &metadata = {});

/// One tensor of a file that was read; `dtype` is the safetensors spelling.
struct SafetensorsEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsFile {
  /// By name (the header's order is not significant in the format).
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
  /// The data section; entries' offsets index it.
  std::string data;

  /// The bytes of tensor `name` (which must exist).
  const char *bytes(const std::string &name) const {
    return data.data() + tensors.at(name).begin;
  }
};

/// Validates and indexes the bytes of a whole safetensors file: header
/// length within the file, a JSON object header, known dtypes, non-negative
/// shapes whose byte size matches data_offsets, offsets that tile the data
/// section exactly. Errors: "'<name>' is not a valid safetensors file: ...".
Expected<SafetensorsFile> parseSafetensors(const std::string &bytes,
                                           const std::string &name);

} // namespace autoshard::rt
