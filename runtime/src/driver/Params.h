// Parameters and gradients as safetensors files: loading and saving them.
#pragma once

#include "ckpt/Layout.h"
#include "core/Expected.h"
#include "io/Manifest.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace autoshard::rt {

/// What --load-params replaced.
struct LoadedParams {
  int params = 0;
  int optStates = 0;
};

/// Arguments with init=load take their initial values from a file: a run
/// that loads none (`fromFile`: --load-params or --resume given) cannot
/// start. The error counts and names them, and names both flags.
Status checkInitFromFile(const Manifest &manifest, bool fromFile);

/// --load-params: the tensors of the safetensors file `path` replace the
/// param and opt_state arguments they name, in `args` (indexed like
/// the manifest's arguments, each holding what world rank `rank` holds:
/// for a sharded argument its flat shard, which gets its block of the file's
/// full tensor and zero padding). A param's tensor may be under one of its
/// aliases: the file's tensor of its name wins, else its first alias the
/// file holds; other aliases are not read. Checked before anything is
/// copied: every tensor names a param or opt_state argument or an alias,
/// its dtype and shape are the argument's global ones exactly, and every
/// param is present, and every opt_state with init=load (other opt_states
/// may be absent and keep their init= values). Errors start with
/// "--load-params:" and name the tensors at fault.
Expected<LoadedParams> loadParams(const std::string &path,
                                  const Manifest &manifest,
                                  const std::vector<void *> &args, int rank);

/// --save-params: every param argument, under its name and again (a copy)
/// under each of its aliases, with its global shape. `args` is indexed like the
/// manifest's arguments and holds global tensors: sharded params must have been
/// gathered first. Errors start with `option` (--save-params, --save-best). The
/// file's metadata names the step, strategy, steps and seed, and holds
/// `extraMetadata` too.
Status saveParams(const std::string &path, const Manifest &manifest,
                  const std::vector<void *> &args, int64_t steps, uint64_t seed,
                  const char *option = "--save-params",
                  const std::map<std::string, std::string> &extraMetadata = {});

/// The best held-out loss a --save-best file records (its metadata's
/// `eval_loss`, with `eval_after_step`), for a resumed run to beat; the
/// error names a file that holds none (not written by --save-best).
struct BestEvaluation {
  double loss = 0;
  int64_t afterStep = 0;
};
Expected<BestEvaluation> readBestEvaluation(const std::string &path);

/// --save-grads needs a step compiled with exposed gradients (grad results).
Status checkSaveGrads(const Manifest &manifest);

/// --save-grads: every grad result, under the result's name, with its
/// global shape; the metadata maps "NAME.of" to the name of the param it is
/// the gradient of. `results` is indexed like the manifest's results and
/// holds global tensors, as for saveParams.
Status saveGrads(const std::string &path, const Manifest &manifest,
                 const std::vector<void *> &results, int64_t steps,
                 uint64_t seed);

} // namespace autoshard::rt
