// Reading and writing parameters as safetensors files.
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

/// Writes a safetensors file: an 8-byte little-endian header length, a JSON
/// header {"name": {"dtype", "shape", "data_offsets"}, ...} padded with
/// spaces to a multiple of 8 bytes, then the tensors' bytes in order.
/// `metadata` becomes the header's "__metadata__" (string values).
Status
writeSafetensors(const std::string &path,
                 const std::vector<TensorView> &tensors,
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

/// Reads and validates a safetensors file: header length within the file,
/// a JSON object header, known dtypes, non-negative shapes whose byte size
/// matches data_offsets, offsets that tile the data section exactly.
Expected<SafetensorsFile> readSafetensors(const std::string &path);

} // namespace autoshard::rt
