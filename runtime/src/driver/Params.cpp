// Parameters and gradients as safetensors files: loading and saving them.
#include "driver/Params.h"
#include "comm/Comm.h"
#include "core/Dtype.h"
#include "core/FlatShard.h"
#include "core/NameList.h"
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

/// Names listed per error: enough to recognise the wrong model's file.
constexpr size_t kListedNames = 10;

std::string namesWithRole(const Manifest &manifest, Role role) {
  std::vector<std::string> names;
  for (const TensorSpec &arg : manifest.args)
    if (arg.role == role)
      names.push_back(arg.name);
  return names.empty() ? "none" : listNames(names, kListedNames);
}

std::map<std::string, std::string> fileMetadata(const Manifest &manifest,
                                                int64_t steps, uint64_t seed) {
  return {{"format", "pt"},
          {"step", manifest.step},
          {"strategy", manifest.strategy},
          {"steps", std::to_string(steps)},
          {"seed", std::to_string(seed)}};
}

/// The index of the first NaN or infinity among the `count` elements of
/// float dtype `dtype` at `data`, or -1. The exponent field all ones is
/// both, in each of the formats.
int64_t firstNonFinite(const char *data, int32_t dtype, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == ASRT_DTYPE_F32) {
      uint32_t bits;
      std::memcpy(&bits, data + i * 4, 4);
      if ((bits & 0x7f800000u) == 0x7f800000u)
        return i;
      continue;
    }
    uint16_t half;
    std::memcpy(&half, data + i * 2, 2);
    uint16_t exponent = dtype == ASRT_DTYPE_BF16 ? 0x7f80u : 0x7c00u;
    if ((half & exponent) == exponent)
      return i;
  }
  return -1;
}

/// Element `index` of a float tensor of `dtype` at `data` (the file's
/// bytes need not be aligned for it).
float floatElement(const char *data, int32_t dtype, int64_t index) {
  if (dtype == ASRT_DTYPE_F32) {
    float value;
    std::memcpy(&value, data + index * 4, 4);
    return value;
  }
  uint16_t half;
  std::memcpy(&half, data + index * 2, 2);
  return dtype == ASRT_DTYPE_BF16 ? bf16ToFloat(half) : f16ToFloat(half);
}

/// Element `index` of `shape` as "[i, j]".
std::string coordinates(const std::vector<int64_t> &shape, int64_t index) {
  std::vector<int64_t> at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = index % shape[d];
    index /= shape[d];
  }
  std::string out = "[";
  for (size_t d = 0; d < at.size(); ++d)
    out += (d ? ", " : "") + std::to_string(at[d]);
  return out + "]";
}

/// "F32 5x3": how a file must spell an argument's dtype and global shape.
std::string fileSpelling(const TensorSpec &arg) {
  return std::string(dtypeSafetensorsName(arg.dtype)) + " " +
         formatShape(arg.globalShape());
}

/// Every param has a tensor in the file (`source`: the tensor each
/// argument is loaded from, or empty), and every opt_state whose value
/// only a file gives; the error lists the others with their aliases.
Status checkNothingMissing(const std::string &path, const Manifest &manifest,
                           const std::vector<std::string> &source) {
  std::vector<std::string> missingParams, missingStates;
  int params = 0;
  bool loadedStates = false;
  for (const TensorSpec &arg : manifest.args) {
    params += arg.role == Role::Param;
    loadedStates |= arg.role == Role::OptState && arg.initFromFile();
    if (!source[arg.index].empty() ||
        !(arg.role == Role::Param || arg.initFromFile()))
      continue;
    std::string named = arg.name;
    for (size_t i = 0; i < arg.aliases.size(); ++i)
      named += (i ? ", " : " (or ") + arg.aliases[i];
    named += arg.aliases.empty() ? "" : ")";
    (arg.role == Role::Param ? missingParams : missingStates)
        .push_back(std::move(named));
  }
  if (missingParams.empty() && missingStates.empty())
    return Status::success();
  std::string lacks;
  if (!missingParams.empty())
    lacks = std::to_string(missingParams.size()) + " of the " +
            std::to_string(params) + " params of step '" + manifest.step +
            "': " + listNames(missingParams, kListedNames);
  if (!missingStates.empty())
    lacks += std::string(lacks.empty() ? "" : "; and ") +
             std::to_string(missingStates.size()) +
             (missingStates.size() == 1 ? " opt_state" : " opt_states") +
             " with init=load" +
             (lacks.empty() ? " of step '" + manifest.step + "'" : "") + ": " +
             listNames(missingStates, kListedNames);
  return Error("--load-params: " + quoted(path) + " lacks " + lacks +
               " (every param must be in the file" +
               (loadedStates ? ", and every opt_state with init=load; other "
                               "opt_states"
                             : "; opt_states") +
               " may be absent and keep their init= values)");
}

} // namespace

Status checkInitFromFile(const Manifest &manifest, bool fromFile) {
  if (fromFile)
    return Status::success();
  std::vector<std::string> names;
  int params = 0, optStates = 0;
  for (const TensorSpec &arg : manifest.args) {
    if (!arg.initFromFile())
      continue;
    names.push_back(arg.name);
    ++(arg.role == Role::Param ? params : optStates);
  }
  if (names.empty())
    return Status::success();
  auto count = [](int n, const char *what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  std::string what =
      params && optStates
          ? count(params, "param") + " and " + count(optStates, "opt_state")
          : count(params ? params : optStates, params ? "param" : "opt_state");
  return Error("step '" + manifest.step + "' takes the initial values of " +
               what +
               " from a file (init=load): " + listNames(names, kListedNames) +
               "; give them with --load-params FILE (a safetensors file that "
               "holds them under their names, such as the model's exporter "
               "or --save-params writes), or continue a run from its "
               "checkpoint with --resume");
}

Expected<LoadedParams> loadParams(const std::string &path,
                                  const Manifest &manifest,
                                  const std::vector<void *> &args, int rank) {
  Expected<SafetensorsFile> file = readSafetensors(path);
  if (!file)
    return Error("--load-params: " + file.message());

  std::vector<std::string> unknown;
  for (const auto &[name, entry] : file->tensors)
    if (!manifest.findArgByFileName(name))
      unknown.push_back(name);
  if (!unknown.empty())
    return Error("--load-params: " + quoted(path) + " holds " +
                 std::to_string(unknown.size()) +
                 (unknown.size() == 1 ? " tensor" : " tensors") +
                 " that name no argument of step '" + manifest.step +
                 "': " + listNames(unknown, kListedNames) + " (its params: " +
                 namesWithRole(manifest, Role::Param) + "; its opt_states: " +
                 namesWithRole(manifest, Role::OptState) + ")");

  for (const auto &[name, entry] : file->tensors) {
    const TensorSpec &arg = *manifest.findArgByFileName(name);
    if (arg.role != Role::Param && arg.role != Role::OptState)
      return Error("--load-params: tensor " + quoted(name) + " of " +
                   quoted(path) + " names " + arg.describe() +
                   "; only params and opt_states are loaded");
    // Files hold whole tensors at every world size and under every
    // sharding, so a checkpoint moves between them. An alias the load
    // does not read must still be the param's: a file of another model
    // is refused rather than half used.
    if (entry.dtype != dtypeSafetensorsName(arg.dtype) ||
        entry.shape != arg.globalShape())
      return Error(
          "--load-params: tensor " + quoted(name) + " of " + quoted(path) +
          " is " + entry.dtype + " " + formatShape(entry.shape) + " but " +
          arg.describe() + (name != arg.name ? ", whose alias it is," : "") +
          " is " + fileSpelling(arg) +
          (arg.isSharded() ? " (sharded; files hold full tensors)" : "") +
          "; dtype and shape must match exactly");
  }

  // The tensor each argument is loaded from: its name, else the first of
  // its aliases the file holds. Other aliases in the file are not read.
  std::vector<std::string> source(manifest.args.size());
  for (const TensorSpec &arg : manifest.args) {
    if (arg.role != Role::Param && arg.role != Role::OptState)
      continue;
    for (const std::string &name : arg.fileNames())
      if (file->tensors.count(name)) {
        source[arg.index] = name;
        break;
      }
  }

  for (const TensorSpec &arg : manifest.args) {
    const std::string &name = source[arg.index];
    // A NaN or infinity would first show as step 1's non-finite loss,
    // which the driver blames on the learning rate.
    if (name.empty() || !isFloatDtype(arg.dtype))
      continue;
    const SafetensorsEntry &entry = file->tensors.at(name);
    int64_t elements = 1;
    for (int64_t extent : entry.shape)
      elements *= extent;
    int64_t bad = firstNonFinite(file->bytes(name), arg.dtype, elements);
    if (bad >= 0) {
      float value = floatElement(file->bytes(name), arg.dtype, bad);
      return Error("--load-params: tensor " + quoted(name) + " of " +
                   quoted(path) + " holds " +
                   (std::isnan(value) ? "a NaN"
                    : value > 0       ? "+inf"
                                      : "-inf") +
                   " at element " + std::to_string(bad) +
                   (entry.shape.size() > 1
                        ? " (" + coordinates(entry.shape, bad) + ")"
                        : "") +
                   ", the first of its " + std::to_string(elements) +
                   " elements that is not finite; training from it would "
                   "diverge at once. Load a file saved before the run "
                   "diverged");
    }
  }

  if (Status s = checkNothingMissing(path, manifest, source); !s)
    return Error(s.message());

  LoadedParams loaded;
  for (const TensorSpec &arg : manifest.args) {
    const std::string &name = source[arg.index];
    if (name.empty())
      continue;
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
  // A tied parameter again under each alias: safetensors entries cannot
  // share their bytes, so each is a copy.
  for (const TensorSpec &arg : manifest.args)
    if (arg.role == Role::Param)
      for (const std::string &name : arg.fileNames())
        tensors.push_back(
            {name, arg.dtype, arg.globalShape(), args[arg.index]});
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
