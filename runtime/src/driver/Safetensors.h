// Parameters as safetensors files on disk (--save-params, --load-params,
// shard-ckpt); the format itself is io/Safetensors.h.
#pragma once

#include "core/Expected.h"
#include "io/Safetensors.h"

#include <map>
#include <string>
#include <vector>

namespace autoshard::rt {

/// Writes `tensors` and `metadata` as the safetensors file `path`
/// (safetensorsHead); errors start with "cannot write '<path>'".
Status
writeSafetensors(const std::string &path,
                 const std::vector<TensorView> &tensors,
                 const std::map<std::string, std::string> &metadata = {});

/// Reads the regular file `path` (a FIFO or a device is refused, not waited
/// on) and checks it with parseSafetensors.
Expected<SafetensorsFile> readSafetensors(const std::string &path);

} // namespace autoshard::rt
