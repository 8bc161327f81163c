// Parameters and gradients as safetensors files: loading and saving them.
#pragma once

#include "core/Expected.h"
#include "core/Manifest.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autoshard::rt {

/// What --load-params replaced.
struct LoadedParams {
  int params = 0;
  int optStates = 0;
};

/// --load-params: every tensor of the safetensors file `path` replaces the
/// param or opt_state argument of the same name, in `args` (indexed like
/// the manifest's arguments, whole tensors: params are replicated). Checked
/// before anything is copied: every tensor names a param or opt_state
/// argument, its dtype and shape are the argument's exactly, and every param
/// is present (opt_states may be absent and keep their init= values).
/// Errors start with "--load-params:" and name the tensors at fault.
Expected<LoadedParams> loadParams(const std::string &path,
                                  const Manifest &manifest,
                                  const std::vector<void *> &args);

/// --save-params: every param argument, under its name.
Status saveParams(const std::string &path, const Manifest &manifest,
                  const std::vector<void *> &args, int64_t steps,
                  uint64_t seed);

/// --save-grads needs a step compiled with exposed gradients (grad results).
Status checkSaveGrads(const Manifest &manifest);

/// --save-grads: every grad result, under the result's name; the metadata
/// maps "NAME.of" to the name of the param it is the gradient of.
/// `results` is indexed like the manifest's results.
Status saveGrads(const std::string &path, const Manifest &manifest,
                 const std::vector<void *> &results, int64_t steps,
                 uint64_t seed);

} // namespace autoshard::rt
