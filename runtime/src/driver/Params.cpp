// Parameters and gradients as safetensors files: loading and saving them.
#include "driver/Params.h"
#include "comm/Comm.h"
#include "core/Dtype.h"
#include "core/FlatShard.h"
#include "driver/Safetensors.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

namespace autoshard::rt {

namespace {

std::string quoted(const std::string &text) { return "'" + text + "'"; }

/// "a, b, c" — at most `limit` names, then how many more, so that loading
/// the wrong model's file gives a readable message.
std::string listNames(const std::vector<std::string> &names,
                      size_t limit = 10) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i)
    out += (i ? ", " : "") + names[i];
  if (names.size() > limit)
    out += " and " + std::to_string(names.size() - limit) + " more";
  return out;
}

std::string namesWithRole(const Manifest &manifest, Role role) {
  std::vector<std::string> names;
  for (const TensorSpec &arg : manifest.args)
    if (arg.role == role)
      names.push_back(arg.name);
  return names.empty() ? "none" : listNames(names);
}

std::map<std::string, std::string> fileMetadata(const Manifest &manifest,
                                                int64_t steps, uint64_t seed) {
  return {{"format", "pt"},
          {"step", manifest.step},
          {"strategy", manifest.strategy},
          {"steps", std::to_string(steps)},
          {"seed", std::to_string(seed)}};
}

/// "F32 5x3": how a file must spell an argument's dtype and global shape.
std::string fileSpelling(const TensorSpec &arg) {
  return std::string(dtypeSafetensorsName(arg.dtype)) + " " +
         formatShape(arg.globalShape());
}

} // namespace

Expected<LoadedParams> loadParams(const std::string &path,
                                  const Manifest &manifest,
                                  const std::vector<void *> &args, int rank) {
  Expected<SafetensorsFile> file = readSafetensors(path);
  if (!file)
    return Error("--load-params: " + file.message());

  std::vector<std::string> unknown;
  for (const auto &[name, entry] : file->tensors)
    if (!manifest.findArg(name))
      unknown.push_back(name);
  if (!unknown.empty())
    return Error("--load-params: " + quoted(path) + " holds " +
                 std::to_string(unknown.size()) +
                 (unknown.size() == 1 ? " tensor" : " tensors") +
                 " that name no argument of step '" + manifest.step +
                 "': " + listNames(unknown) + " (its params: " +
                 namesWithRole(manifest, Role::Param) + "; its opt_states: " +
                 namesWithRole(manifest, Role::OptState) + ")");

  for (const auto &[name, entry] : file->tensors) {
    const TensorSpec &arg = *manifest.findArg(name);
    if (arg.role != Role::Param && arg.role != Role::OptState)
      return Error("--load-params: tensor " + quoted(name) + " of " +
                   quoted(path) + " names " + arg.describe() +
                   "; only params and opt_states are loaded");
    // Files hold whole tensors at every world size and under every
    // sharding, so a checkpoint moves between them.
    if (entry.dtype != dtypeSafetensorsName(arg.dtype) ||
        entry.shape != arg.globalShape())
      return Error(
          "--load-params: tensor " + quoted(name) + " of " + quoted(path) +
          " is " + entry.dtype + " " + formatShape(entry.shape) + " but " +
          arg.describe() + " is " + fileSpelling(arg) +
          (arg.isSharded() ? " (sharded; files hold full tensors)" : "") +
          "; dtype and shape must match exactly");
  }

  std::vector<std::string> missing;
  for (const TensorSpec &arg : manifest.args)
    if (arg.role == Role::Param && !file->tensors.count(arg.name))
      missing.push_back(arg.name);
  if (!missing.empty())
    return Error(
        "--load-params: " + quoted(path) + " lacks " +
        std::to_string(missing.size()) + " of the " +
        std::to_string(std::count_if(
            manifest.args.begin(), manifest.args.end(),
            [](const TensorSpec &arg) { return arg.role == Role::Param; })) +
        " params of step '" + manifest.step + "': " + listNames(missing) +
        " (every param must be in the file; opt_states may be "
        "absent and keep their init= values)");

  LoadedParams loaded;
  for (const auto &[name, entry] : file->tensors) {
    const TensorSpec &arg = *manifest.findArg(name);
    HeldBlock block = heldBlock(manifest, arg, rank);
    int64_t elementBytes = dtypeSize(arg.dtype);
    auto *dst = static_cast<char *>(args[arg.index]);
    std::memcpy(dst, file->bytes(name) + block.begin * elementBytes,
                static_cast<size_t>(block.valid * elementBytes));
    // The padding of a shard is zero (abi.h), whatever the buffer held.
    std::memset(
        dst + block.valid * elementBytes, 0,
        static_cast<size_t>((block.chunk - block.valid) * elementBytes));
    ++(arg.role == Role::Param ? loaded.params : loaded.optStates);
  }
  return loaded;
}

Status saveParams(const std::string &path, const Manifest &manifest,
                  const std::vector<void *> &args, int64_t steps, uint64_t seed,
                  const char *option,
                  const std::map<std::string, std::string> &extraMetadata) {
  std::vector<TensorView> tensors;
  for (const TensorSpec &arg : manifest.args)
    if (arg.role == Role::Param)
      tensors.push_back(
          {arg.name, arg.dtype, arg.globalShape(), args[arg.index]});
  std::map<std::string, std::string> metadata =
      fileMetadata(manifest, steps, seed);
  metadata.insert(extraMetadata.begin(), extraMetadata.end());
  Status written = writeSafetensors(path, tensors, metadata);
  if (!written)
    return Error(std::string(option) + ": " + written.message());
  return written;
}

Expected<BestEvaluation> readBestEvaluation(const std::string &path) {
  Expected<SafetensorsFile> file = readSafetensors(path);
  if (!file)
    return Error("--save-best: " + file.message());
  auto loss = file->metadata.find("eval_loss");
  auto step = file->metadata.find("eval_after_step");
  BestEvaluation best;
  const char *end = nullptr;
  if (loss != file->metadata.end() && step != file->metadata.end()) {
    const std::string &text = loss->second;
    best.loss = std::strtod(text.c_str(), const_cast<char **>(&end));
    auto [ptr, ec] = std::from_chars(step->second.data(),
                                     step->second.data() + step->second.size(),
                                     best.afterStep);
    if (end == text.c_str() + text.size() && !text.empty() &&
        std::isfinite(best.loss) && ec == std::errc() &&
        ptr == step->second.data() + step->second.size())
      return best;
  }
  return Error("--save-best: '" + path +
               "' records no held-out loss "
               "(eval_loss and eval_after_step in its metadata), so a resumed "
               "run cannot tell whether it holds a better evaluation; move it "
               "away, or name another file");
}

Status checkSaveGrads(const Manifest &manifest) {
  if (manifest.hasGradResults())
    return Status::success();
  return Error("--save-grads: step '" + manifest.step +
               "' exposes no gradients (no result has role grad); compile "
               "with exposed gradients");
}

Status saveGrads(const std::string &path, const Manifest &manifest,
                 const std::vector<void *> &results, int64_t steps,
                 uint64_t seed) {
  if (Status s = checkSaveGrads(manifest); !s)
    return s;
  std::vector<TensorView> tensors;
  std::map<std::string, std::string> metadata =
      fileMetadata(manifest, steps, seed);
  for (const TensorSpec &result : manifest.results) {
    if (result.role != Role::Grad)
      continue;
    tensors.push_back({result.name, result.dtype, result.globalShape(),
                       results[result.index]});
    metadata[result.name + ".of"] = manifest.args[result.gradOf].name;
  }
  Status written = writeSafetensors(path, tensors, metadata);
  if (!written)
    return Error("--save-grads: " + written.message());
  return written;
}

} // namespace autoshard::rt
