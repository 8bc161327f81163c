// The manifest of a compiled step (docs/RuntimeABI.md): model and parser.
#include "io/Manifest.h"
#include "core/Dtype.h"
#include "core/Init.h"
#include "io/TextRecords.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

namespace autoshard::rt {

const char *roleName(Role role) {
  switch (role) {
  case Role::Param:
    return "param";
  case Role::OptState:
    return "opt_state";
  case Role::Input:
    return "input";
  case Role::Label:
    return "label";
  case Role::Hyper:
    return "hyper";
  case Role::Loss:
    return "loss";
  case Role::Grad:
    return "grad";
  case Role::GradNormSq:
    return "grad_norm_sq";
  }
  return "?";
}

const char *memoryKindName(MemoryKind memory) {
  switch (memory) {
  case MemoryKind::Device:
    return "device";
  case MemoryKind::Host:
    return "host";
  case MemoryKind::Nvme:
    return "nvme";
  }
  return "?";
}

namespace {

bool isValidName(std::string_view name) {
  if (name.empty())
    return false;
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok)
      return false;
  }
  return true;
}

/// " full=5x3 shard_axes=1" for a sharded tensor, "" for a replicated one.
std::string shardingKeys(const TensorSpec &spec) {
  if (!spec.isSharded())
    return "";
  return " full=" + formatShape(spec.fullShape) +
         " shard_axes=" + std::to_string(spec.shardAxes);
}

/// "shape 4x8", or "full shape 5x3 (sharded)".
std::string globalShapeText(const TensorSpec &spec) {
  return (spec.isSharded() ? "full shape " : "shape ") +
         formatShape(spec.globalShape()) +
         (spec.isSharded() ? " (sharded)" : "");
}

/// Keys each kind of record accepts, in the order diagnostics list them.
std::vector<std::string_view> validKeys(bool isResult, Role role) {
  // Params, optimizer states and gradients are what ZeRO and FSDP shard;
  // params and optimizer states are what ZeRO-Offload and ZeRO-Infinity
  // move out of device memory.
  if (isResult) {
    if (role == Role::Loss || role == Role::GradNormSq)
      return {};
    if (role == Role::Grad)
      return {"of", "full", "shard_axes"};
    return {"updates", "full", "shard_axes", "memory"};
  }
  switch (role) {
  case Role::Param:
    return {"init", "full", "shard_axes", "memory", "aliases"};
  case Role::OptState:
    return {"init", "full", "shard_axes", "memory"};
  case Role::Hyper:
    return {"init"};
  case Role::Input:
    return {"batch_dim", "global", "classes"};
  case Role::Label:
    // ignore_index: the loss's, which the data may hold (HuggingFace's -100).
    return {"batch_dim", "global", "classes", "ignore_index"};
  case Role::Loss:
  case Role::Grad:
  case Role::GradNormSq:
    break;
  }
  return {};
}

std::string joinKeys(const std::vector<std::string_view> &keys) {
  if (keys.empty())
    return "none";
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i)
    out += (i ? ", " : "") + std::string(keys[i]);
  return out;
}

class Parser {
public:
  explicit Parser(std::string_view text) : text(text) {}
  Expected<Manifest> run();

private:
  Error lineError(int line, const std::string &message) const {
    return rt::lineError("manifest", line, message);
  }
  Status parseRecord(int line, const std::vector<std::string_view> &fields);
  Status parseSite(int line, const std::vector<std::string_view> &fields);
  Status parseTensor(int line, const std::vector<std::string_view> &fields,
                     bool isResult);
  Status parseSingleton(int line, const std::vector<std::string_view> &fields);
  Status checkWhole(int lastLine);
  Status checkGrad(const TensorSpec &grad, std::map<int, int> &gradientBy);
  Status checkSharding(const TensorSpec &spec) const;

  std::string_view text;
  Manifest manifest;
  std::map<std::string, int, std::less<>> singletonLines;
  bool sawHeader = false;
  int endLine = 0;
};

Expected<Manifest> Parser::run() {
  TextLines lines(text);
  while (lines.next()) {
    int line = lines.number();
    std::string_view content = lines.line();
    if (!content.empty() && content.back() == '\r')
      content.remove_suffix(1);
    if (endLine) {
      if (!content.empty())
        return lineError(line, "unexpected text after the 'end' record on "
                               "line " +
                                   std::to_string(endLine) + ": " +
                                   quoted(content));
      continue;
    }
    // Blank lines carry nothing; tolerating them keeps hand-written
    // manifests (tests, examples) easy to read.
    if (content.empty())
      continue;
    std::vector<std::string_view> fields = splitFields(content);
    for (std::string_view field : fields)
      if (field.empty())
        return lineError(line, "empty field in " + quoted(content) +
                                   "; fields are separated by single spaces");
    if (Status s = parseRecord(line, fields); !s)
      return Error(s.message());
  }
  if (!sawHeader)
    return Error("manifest is empty; expected 'autoshard-manifest " +
                 std::to_string(kManifestFormatVersion) +
                 "' as its first line");
  if (!endLine)
    return lineError(lines.number(), "manifest ends without an 'end' record");
  if (Status s = checkWhole(endLine); !s)
    return Error(s.message());
  return std::move(manifest);
}

Status Parser::parseRecord(int line,
                           const std::vector<std::string_view> &fields) {
  std::string_view keyword = fields[0];
  if (!sawHeader) {
    if (keyword != "autoshard-manifest" || fields.size() != 2)
      return lineError(line, "expected 'autoshard-manifest " +
                                 std::to_string(kManifestFormatVersion) +
                                 "' as the first line, found " +
                                 quoted(fields.size() == 1
                                            ? keyword
                                            : std::string(keyword) + " ..."));
    int64_t version;
    if (!parseInteger(fields[1], version))
      return lineError(line, "manifest format version " + quoted(fields[1]) +
                                 " is not an integer");
    if (version != kManifestFormatVersion)
      return lineError(line, "manifest format version " +
                                 std::to_string(version) +
                                 " is not supported; this runtime reads "
                                 "version " +
                                 std::to_string(kManifestFormatVersion));
    manifest.formatVersion = static_cast<int>(version);
    sawHeader = true;
    return Status::success();
  }
  if (keyword == "arg" || keyword == "result")
    return parseTensor(line, fields, keyword == "result");
  if (keyword == "end") {
    if (fields.size() != 1)
      return lineError(line, "'end' takes no fields");
    endLine = line;
    return Status::success();
  }
  if (keyword == "abi" || keyword == "step" || keyword == "strategy" ||
      keyword == "grid")
    return parseSingleton(line, fields);
  if (keyword == "memory") {
    if (auto it = singletonLines.find(keyword); it != singletonLines.end())
      return lineError(line, "duplicate 'memory' record (first on line " +
                                 std::to_string(it->second) + ")");
    singletonLines.emplace(std::string(keyword), line);
    for (std::string_view field : std::vector<std::string_view>(
             fields.begin() + 1, fields.end())) {
      auto keyValue = splitKeyValue(field);
      int64_t bytes;
      if (!keyValue || !parseInteger(keyValue->second, bytes) || bytes < 0)
        return lineError(line, "memory field " + quoted(field) +
                                   " is not KEY=BYTES with BYTES >= 0");
      std::string key(keyValue->first);
      for (const auto &[existing, value] : manifest.memory)
        if (existing == key)
          return lineError(line, "memory field " + quoted(key) +
                                     " appears twice");
      manifest.memory.emplace_back(std::move(key), bytes);
    }
    return Status::success();
  }
  if (keyword == "flops") {
    if (auto it = singletonLines.find(keyword); it != singletonLines.end())
      return lineError(line, "duplicate 'flops' record (first on line " +
                                 std::to_string(it->second) + ")");
    singletonLines.emplace(std::string(keyword), line);
    int64_t flops;
    if (fields.size() != 2 || !parseInteger(fields[1], flops) || flops < 0)
      return lineError(line, "'flops' takes one field, the step's FLOPs (an "
                             "integer >= 0)");
    manifest.stepFlops = flops;
    return Status::success();
  }
  if (keyword == "site")
    return parseSite(line, fields);
  if (keyword == "autoshard-manifest")
    return lineError(line, "duplicate 'autoshard-manifest' record (it is only "
                           "valid on the first line)");
  return lineError(line, "unknown record " + quoted(keyword) +
                             "; expected one of abi, step, strategy, grid, "
                             "flops, memory, site, arg, result, end");
}

Status Parser::parseSite(int line,
                         const std::vector<std::string_view> &fields) {
  int64_t index;
  if (fields.size() < 3 || !parseInteger(fields[1], index))
    return lineError(line, "'site' takes an index and op=NAME, then "
                           "layer=, loc= and shapes= where known");
  if (index != static_cast<int64_t>(manifest.sites.size()))
    return lineError(line, "site index " + std::to_string(index) +
                               " is out of order; expected " +
                               std::to_string(manifest.sites.size()));
  OpSite site;
  for (size_t i = 2; i < fields.size(); ++i) {
    std::string_view field = fields[i];
    size_t eq = field.find('=');
    std::string_view key =
        eq == std::string_view::npos ? field : field.substr(0, eq);
    std::string *target = key == "op"       ? &site.op
                          : key == "layer"  ? &site.layer
                          : key == "loc"    ? &site.loc
                          : key == "shapes" ? &site.shapes
                                            : nullptr;
    if (!target)
      return lineError(line, "unknown site field " + quoted(field) +
                                 "; expected op=, layer=, loc= or shapes=");
    if (eq == std::string_view::npos || eq + 1 == field.size())
      return lineError(line, "site field " + quoted(field) + " has no value");
    if (!target->empty())
      return lineError(line, "site field " + quoted(key) + " appears twice");
    *target = std::string(field.substr(eq + 1));
  }
  if (site.op.empty())
    return lineError(line, "site " + std::to_string(index) + " has no op=");
  manifest.sites.push_back(std::move(site));
  return Status::success();
}

Status Parser::parseSingleton(int line,
                              const std::vector<std::string_view> &fields) {
  std::string_view keyword = fields[0];
  if (auto it = singletonLines.find(keyword); it != singletonLines.end())
    return lineError(line, "duplicate " + quoted(keyword) +
                               " record (first on line " +
                               std::to_string(it->second) + ")");
  singletonLines.emplace(std::string(keyword), line);
  const char *expected = keyword == "abi"    ? "abi VERSION"
                         : keyword == "step" ? "step NAME"
                         : keyword == "grid" ? "grid D0xD1..."
                                             : "strategy NAME";
  if (fields.size() != 2)
    return lineError(line, quoted(keyword) + " takes one field (" + expected +
                               "), found " + std::to_string(fields.size() - 1));
  std::string_view value = fields[1];
  if (keyword == "abi") {
    int64_t version;
    if (!parseInteger(value, version))
      return lineError(line,
                       "ABI version " + quoted(value) + " is not an integer");
    if (version != ASRT_ABI_VERSION)
      return lineError(
          line, "the step was generated for runtime ABI version " +
                    std::to_string(version) +
                    " but this runtime implements version " +
                    std::to_string(ASRT_ABI_VERSION) +
                    "; build the step and the runtime from the same sources");
    manifest.abiVersion = static_cast<int>(version);
  } else if (keyword == "grid") {
    if (!parseShape(value, manifest.grid, 1) || manifest.grid.empty())
      return lineError(line, "bad grid " + quoted(value) +
                                 "; expected positive dims joined by 'x' "
                                 "(like 4 or 2x2)");
    // MPI numbers ranks with int, and masks name axes with 31 bits.
    if (manifest.worldSize() > INT32_MAX || manifest.grid.size() > 31)
      return lineError(line, "grid " + quoted(value) +
                                 " is too large; at most 31 axes and 2^31-1 "
                                 "ranks");
  } else {
    if (!isValidName(value))
      return lineError(line, "bad " + std::string(keyword) + " name " +
                                 quoted(value) +
                                 "; names use only [A-Za-z0-9_.]");
    (keyword == "step" ? manifest.step : manifest.strategy) =
        std::string(value);
  }
  return Status::success();
}

Status Parser::parseTensor(int line,
                           const std::vector<std::string_view> &fields,
                           bool isResult) {
  const char *kind = isResult ? "result" : "arg";
  std::vector<TensorSpec> &list = isResult ? manifest.results : manifest.args;
  if (fields.size() < 6)
    return lineError(line, quoted(kind) + " needs at least 5 fields (" + kind +
                               " INDEX ROLE NAME DTYPE SHAPE [KEY=VALUE...]), "
                               "found " +
                               std::to_string(fields.size() - 1));
  TensorSpec spec;
  spec.line = line;
  spec.isResult = isResult;

  int64_t index;
  if (!parseInteger(fields[1], index))
    return lineError(line, std::string(kind) + " index " + quoted(fields[1]) +
                               " is not an integer");
  if (index != static_cast<int64_t>(list.size()))
    return lineError(line, "expected " + std::string(kind) + " " +
                               std::to_string(list.size()) + ", found " + kind +
                               " " + std::to_string(index) + " (" + kind +
                               "s are numbered 0, 1, 2, ... in order)");
  spec.index = static_cast<int>(index);

  std::string_view role = fields[2];
  if (!isResult && role == "param")
    spec.role = Role::Param;
  else if (!isResult && role == "opt_state")
    spec.role = Role::OptState;
  else if (!isResult && role == "input")
    spec.role = Role::Input;
  else if (!isResult && role == "label")
    spec.role = Role::Label;
  else if (!isResult && role == "hyper")
    spec.role = Role::Hyper;
  else if (isResult && role == "param")
    spec.role = Role::Param;
  else if (isResult && role == "opt_state")
    spec.role = Role::OptState;
  else if (isResult && role == "loss")
    spec.role = Role::Loss;
  else if (isResult && role == "grad")
    spec.role = Role::Grad;
  else if (isResult && role == "grad_norm_sq")
    spec.role = Role::GradNormSq;
  else
    return lineError(line,
                     "unknown " + std::string(kind) + " role " + quoted(role) +
                         (isResult ? "; expected param, opt_state, loss, grad "
                                     "or grad_norm_sq"
                                   : "; expected param, opt_state, input, "
                                     "label or hyper"));

  if (!isValidName(fields[3]))
    return lineError(line, "bad name " + quoted(fields[3]) +
                               "; names use only [A-Za-z0-9_.]");
  spec.name = std::string(fields[3]);

  if (!parseDtype(fields[4], spec.dtype))
    return lineError(line, "unknown dtype " + quoted(fields[4]) +
                               "; expected one of " + dtypeList());
  if (!parseShape(fields[5], spec.shape, 1))
    return lineError(line, "bad shape " + quoted(fields[5]) +
                               "; expected positive dims joined by 'x' (like "
                               "8x16) or 'scalar', with at most 2^56 "
                               "elements");

  std::vector<std::string_view> allowed = validKeys(isResult, spec.role);
  std::string what =
      std::string(roleName(spec.role)) + " " + (isResult ? "result" : "arg");
  std::set<std::string_view> seen;
  for (size_t i = 6; i < fields.size(); ++i) {
    std::string_view field = fields[i];
    auto keyValue = splitKeyValue(field);
    if (!keyValue)
      return lineError(line,
                       "bad field " + quoted(field) + "; expected KEY=VALUE");
    auto [key, value] = *keyValue;
    bool known = false;
    for (std::string_view k : allowed)
      known |= k == key;
    if (!known)
      return lineError(line, "key " + quoted(key) + " is not valid for " +
                                 what + "s; valid keys: " + joinKeys(allowed));
    if (!seen.insert(key).second)
      return lineError(line, "duplicate key " + quoted(key));

    int64_t number = 0;
    if (key != "init" && key != "full" && key != "memory" && key != "aliases" &&
        !parseInteger(value, number))
      return lineError(line, std::string(key) + "=" + std::string(value) +
                                 " is not an integer");
    if (key == "init") {
      Expected<InitSpec> init = parseInitSpec(value);
      if (!init)
        return lineError(line, init.message());
      if (Status s = checkInitForDtype(*init, spec.dtype); !s)
        return lineError(line, s.message());
      if (init->kind == InitKind::Load && spec.role == Role::Hyper)
        return lineError(line, "init=load is for params and opt_states, "
                               "which parameter files hold; hyper " +
                                   spec.name + " needs a value");
      spec.init = *init;
    } else if (key == "aliases") {
      size_t start = 0;
      while (start <= value.size()) {
        size_t comma = std::min(value.find(',', start), value.size());
        std::string_view alias = value.substr(start, comma - start);
        if (!isValidName(alias))
          return lineError(line, "bad alias " + quoted(alias) + " in " +
                                     quoted(field) +
                                     "; aliases are names ([A-Za-z0-9_.]) "
                                     "joined by ','");
        for (const std::string &earlier : spec.aliases)
          if (earlier == alias)
            return lineError(line, quoted(field) + " lists " + quoted(alias) +
                                       " twice");
        spec.aliases.emplace_back(alias);
        start = comma + 1;
      }
    } else if (key == "batch_dim") {
      if (number < 0 || number >= static_cast<int64_t>(spec.shape.size()))
        return lineError(
            line, "batch_dim=" + std::string(value) +
                      " is out of range for shape " + formatShape(spec.shape) +
                      (spec.shape.empty()
                           ? "; a batched tensor cannot be a scalar"
                           : "; expected 0.." +
                                 std::to_string(spec.shape.size() - 1)));
      spec.batchDim = static_cast<int>(number);
    } else if (key == "global") {
      if (number < 1)
        return lineError(line, "global=" + std::string(value) +
                                   " must be at least 1");
      spec.globalRows = number;
    } else if (key == "classes") {
      if (number < 1)
        return lineError(line, "classes=" + std::string(value) +
                                   " must be at least 1");
      if (!isIntegerDtype(spec.dtype))
        return lineError(line, "classes= needs an integer dtype but " +
                                   spec.name + " is " + dtypeName(spec.dtype));
      // Labels 0..classes-1 must fit the dtype (synthetic labels are
      // drawn through a double, exact up to 2^53).
      const int64_t most = spec.dtype == ASRT_DTYPE_I32   ? int64_t(1) << 31
                           : spec.dtype == ASRT_DTYPE_U16 ? int64_t(1) << 16
                                                          : int64_t(1) << 53;
      if (number > most)
        return lineError(line, "classes=" + std::string(value) +
                                   " is more than " + dtypeName(spec.dtype) +
                                   " labels hold; at most " +
                                   std::to_string(most));
      spec.classes = number;
    } else if (key == "ignore_index") {
      // Labels are int32: a wider value could not mark one.
      if (number < INT32_MIN || number > INT32_MAX)
        return lineError(line, "ignore_index=" + std::string(value) +
                                   " is outside the int32 range of labels");
      if (spec.dtype != ASRT_DTYPE_I32)
        return lineError(line, "ignore_index= needs an i32 label but " +
                                   spec.name + " is " + dtypeName(spec.dtype));
      spec.ignoreIndex = number;
    } else if (key == "updates" || key == "of") {
      // An argument index; one past int's range would wrap negative.
      if (number < 0 || number > std::numeric_limits<int>::max())
        return lineError(line, std::string(key) + "=" + std::string(value) +
                                   " must name an argument index >= 0 (at "
                                   "most 2147483647)");
      (key == "updates" ? spec.updates : spec.gradOf) =
          static_cast<int>(number);
    } else if (key == "full") {
      if (!parseShape(value, spec.fullShape, 1))
        return lineError(line, "bad full shape " + quoted(value) +
                                   "; expected the global shape: positive "
                                   "dims joined by 'x' (like 8x16) or "
                                   "'scalar', with at most 2^56 elements");
    } else if (key == "memory") {
      if (value == "device")
        spec.memory = MemoryKind::Device;
      else if (value == "host")
        spec.memory = MemoryKind::Host;
      else if (value == "nvme")
        spec.memory = MemoryKind::Nvme;
      else
        return lineError(line, "memory=" + std::string(value) +
                                   " is not valid; expected device, host "
                                   "(ZeRO-Offload) or nvme (ZeRO-Infinity)");
    } else if (key == "shard_axes") {
      // Mask 0 would shard over a group of one: a replicated tensor, which
      // the manifest spells without full= and shard_axes=.
      if (number < 1 || number > INT32_MAX)
        return lineError(line, "shard_axes=" + std::string(value) +
                                   " is not a grid axis mask; expected a "
                                   "mask >= 1 (bit i: grid axis i) naming "
                                   "the axes the tensor is sharded over");
      spec.shardAxes = static_cast<int32_t>(number);
    }
  }

  auto require = [&](std::string_view key, const char *form) -> Status {
    if (seen.count(key))
      return Status::success();
    return lineError(line, spec.describe() + " needs " + form);
  };
  if (seen.count("full") != seen.count("shard_axes"))
    return lineError(line, spec.describe() + " has " +
                               (seen.count("full") ? "full= but no "
                                                     "shard_axes=MASK"
                                                   : "shard_axes= but no "
                                                     "full=SHAPE") +
                               "; a sharded tensor needs both, a "
                               "replicated one neither");
  if (!isResult && (spec.role == Role::Param || spec.role == Role::OptState ||
                    spec.role == Role::Hyper)) {
    if (Status s = require("init", "init=KIND[:VALUE]"); !s)
      return s;
  }
  if (spec.role == Role::Input || spec.role == Role::Label) {
    if (Status s = require("batch_dim", "batch_dim=D"); !s)
      return s;
    if (Status s = require("global", "global=G"); !s)
      return s;
  }
  if (spec.role == Role::Label) {
    if (Status s = require("classes", "classes=C"); !s)
      return s;
  }
  if (isResult && spec.role == Role::Grad) {
    if (Status s = require("of", "of=J naming the param it is the gradient "
                                 "of");
        !s)
      return s;
  } else if (isResult && spec.role != Role::Loss &&
             spec.role != Role::GradNormSq) {
    if (Status s = require("updates", "updates=I naming the argument it "
                                      "replaces");
        !s)
      return s;
  }
  list.push_back(std::move(spec));
  return Status::success();
}

Status Parser::checkWhole(int lastLine) {
  for (const char *keyword : {"abi", "step", "strategy", "grid"})
    if (!singletonLines.count(std::string_view(keyword)))
      return lineError(lastLine,
                       "the manifest has no " + quoted(keyword) + " record");

  std::map<std::string, int, std::less<>> argNames;
  for (const TensorSpec &arg : manifest.args) {
    auto [it, inserted] = argNames.emplace(arg.name, arg.index);
    if (!inserted)
      return lineError(
          arg.line, "duplicate argument name " + quoted(arg.name) +
                        " (first on line " +
                        std::to_string(manifest.args[it->second].line) + ")");
  }
  // A name in a parameter file stands for one tensor.
  std::map<std::string, int, std::less<>> aliasOwners;
  for (const TensorSpec &arg : manifest.args)
    for (const std::string &alias : arg.aliases) {
      auto named = argNames.find(alias);
      auto [owner, inserted] = aliasOwners.emplace(alias, arg.index);
      if (named == argNames.end() && inserted)
        continue;
      const TensorSpec &other =
          manifest
              .args[named != argNames.end() ? named->second : owner->second];
      return lineError(
          arg.line, arg.describe() + " has the alias " + quoted(alias) +
                        (named != argNames.end() ? ", the name of " : " of ") +
                        other.describe() +
                        "; a name in a parameter file stands for one "
                        "tensor");
    }

  for (const std::vector<TensorSpec> *list :
       {&manifest.args, &manifest.results})
    for (const TensorSpec &spec : *list)
      if (Status s = checkSharding(spec); !s)
        return s;

  int64_t world = manifest.worldSize();
  const TensorSpec *firstBatched = nullptr;
  for (const TensorSpec &arg : manifest.args) {
    if (arg.batchDim < 0)
      continue;
    if (firstBatched && arg.globalRows != firstBatched->globalRows)
      return lineError(
          arg.line,
          arg.describe() + " has global=" + std::to_string(arg.globalRows) +
              " but " + firstBatched->describe() +
              " has global=" + std::to_string(firstBatched->globalRows) +
              "; all inputs and labels share one global batch");
    if (!firstBatched)
      firstBatched = &arg;
    // Rank r holds rows [r*G/N, (r+1)*G/N); static shapes need N | G.
    if (arg.globalRows % world != 0 ||
        arg.globalRows / world != arg.localRows())
      return lineError(
          arg.line,
          arg.describe() + " holds " + std::to_string(arg.localRows()) +
              " rows along batch_dim " + std::to_string(arg.batchDim) +
              ", but global=" + std::to_string(arg.globalRows) +
              " over world size " + std::to_string(world) + " (grid " +
              manifest.gridString() + ") needs " +
              (arg.globalRows % world == 0
                   ? std::to_string(arg.globalRows / world) + " per rank"
                   : "a multiple of the world size"));
  }

  int lossLine = 0, gradNormLine = 0;
  std::map<int, int> updatedBy, gradientBy;
  std::set<std::string, std::less<>> resultNames;
  for (const TensorSpec &result : manifest.results) {
    if (!resultNames.insert(result.name).second)
      return lineError(result.line,
                       "duplicate result name " + quoted(result.name));
    // One-element f32 results, each at most once: the loss (required
    // below) and the squared gradient norm of a clipping step.
    if (result.role == Role::Loss || result.role == Role::GradNormSq) {
      const bool loss = result.role == Role::Loss;
      int &seen = loss ? lossLine : gradNormLine;
      if (seen)
        return lineError(result.line,
                         std::string("a second ") + roleName(result.role) +
                             " result (the first is on line " +
                             std::to_string(seen) + "); a step has " +
                             (loss ? "exactly one loss" : "at most one"));
      seen = result.line;
      if (result.dtype != ASRT_DTYPE_F32 || result.numElements() != 1)
        return lineError(
            result.line,
            std::string(loss ? "the loss" : "the squared gradient norm") +
                " must be one f32 element, found " + dtypeName(result.dtype) +
                " " + formatShape(result.shape));
      continue;
    }
    if (result.role == Role::Grad) {
      if (Status s = checkGrad(result, gradientBy); !s)
        return s;
      continue;
    }
    if (result.updates >= static_cast<int>(manifest.args.size()))
      return lineError(result.line,
                       "updates=" + std::to_string(result.updates) +
                           " names no argument; the step has " +
                           std::to_string(manifest.args.size()) +
                           " arguments (0.." +
                           std::to_string(manifest.args.size() - 1) + ")");
    const TensorSpec &arg = manifest.args[result.updates];
    if (arg.role != result.role || arg.dtype != result.dtype ||
        arg.shape != result.shape || arg.fullShape != result.fullShape ||
        arg.shardAxes != result.shardAxes)
      return lineError(result.line,
                       result.describe() + " is " + dtypeName(result.dtype) +
                           " " + formatShape(result.shape) +
                           shardingKeys(result) + " but updates " +
                           arg.describe() + ", which is " + roleName(arg.role) +
                           " " + dtypeName(arg.dtype) + " " +
                           formatShape(arg.shape) + shardingKeys(arg) +
                           "; a result must match the argument it replaces");
    // The step writes an offloaded state where it read it from: the driver
    // donates the argument's host buffer, or its NVMe file.
    if (arg.memory != result.memory)
      return lineError(result.line,
                       result.describe() +
                           " has memory=" + memoryKindName(result.memory) +
                           " but updates " + arg.describe() +
                           ", which has memory=" + memoryKindName(arg.memory) +
                           "; a result lives where the argument it replaces "
                           "lives");
    auto [it, inserted] = updatedBy.emplace(result.updates, result.line);
    if (!inserted)
      return lineError(result.line,
                       "argument " + std::to_string(result.updates) +
                           " is already updated by the result on line " +
                           std::to_string(it->second));
  }
  if (!lossLine)
    return lineError(lastLine, "the manifest has no loss result");
  return Status::success();
}

/// A grad result is the gradient of one param: of= names a param argument
/// of the same shape, and no other grad result exposes the same param. The
/// dtype may differ from the param's (a bf16 gradient of an f32 master
/// weight) but is a float.
Status Parser::checkGrad(const TensorSpec &grad,
                         std::map<int, int> &gradientBy) {
  int numArgs = static_cast<int>(manifest.args.size());
  if (grad.gradOf >= numArgs)
    return lineError(
        grad.line,
        "of=" + std::to_string(grad.gradOf) +
            " names no argument; the step has " + std::to_string(numArgs) +
            " arguments" +
            (numArgs ? " (0.." + std::to_string(numArgs - 1) + ")" : ""));
  const TensorSpec &param = manifest.args[grad.gradOf];
  if (param.role != Role::Param)
    return lineError(grad.line, grad.describe() +
                                    " has of=" + std::to_string(grad.gradOf) +
                                    ", but " + param.describe() +
                                    " is not a param; gradients are exposed "
                                    "for params only");
  // ZeRO-2 shards gradients of replicated params: only the global shapes
  // must agree.
  if (grad.globalShape() != param.globalShape())
    return lineError(
        grad.line, grad.describe() + " has " + globalShapeText(grad) + " but " +
                       param.describe() + " has " + globalShapeText(param) +
                       "; a gradient has the shape of its param (the full "
                       "shape where either is sharded)");
  if (!isFloatDtype(grad.dtype))
    return lineError(grad.line, grad.describe() + " is " +
                                    dtypeName(grad.dtype) +
                                    "; a gradient has a float dtype (f32, "
                                    "bf16 or f16)");
  auto [it, inserted] = gradientBy.emplace(grad.gradOf, grad.line);
  if (!inserted)
    return lineError(grad.line, "the gradient of " + param.describe() +
                                    " is already exposed by the result on "
                                    "line " +
                                    std::to_string(it->second));
  return Status::success();
}

/// A sharded tensor names only axes of the grid, and its local shape is the
/// 1-D flat shard of its full shape over the group of those axes.
Status Parser::checkSharding(const TensorSpec &spec) const {
  if (!spec.isSharded())
    return Status::success();
  size_t axes = manifest.grid.size();
  uint32_t valid = axes >= 32 ? ~0u : (1u << axes) - 1u;
  if (static_cast<uint32_t>(spec.shardAxes) & ~valid)
    return lineError(
        spec.line,
        spec.describe() + " has shard_axes=" + std::to_string(spec.shardAxes) +
            ", which names an axis the grid " + manifest.gridString() +
            " does not have; valid masks are 1.." + std::to_string(valid));
  int64_t n = manifest.groupSize(spec.shardAxes);
  int64_t numel = spec.globalElements();
  int64_t k = (numel + n - 1) / n;
  if (spec.shape != std::vector<int64_t>{k})
    return lineError(
        spec.line,
        spec.describe() + " has full=" + formatShape(spec.fullShape) + " (" +
            std::to_string(numel) + " elements) sharded over " +
            std::to_string(n) + (n == 1 ? " rank" : " ranks") +
            " (shard_axes=" + std::to_string(spec.shardAxes) + " of grid " +
            manifest.gridString() + "), so its shape must be the flat shard " +
            std::to_string(k) + " = ceil(" + std::to_string(numel) + " / " +
            std::to_string(n) + "), found " + formatShape(spec.shape));
  return Status::success();
}

} // namespace

Expected<InitSpec> parseInitSpec(std::string_view text) {
  size_t colon = text.find(':');
  std::string_view kind = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos
                               ? std::string_view()
                               : text.substr(colon + 1);
  InitSpec spec;
  bool needsValue = true;
  if (kind == "zeros") {
    spec.kind = InitKind::Zeros;
    needsValue = false;
  } else if (kind == "load") {
    spec.kind = InitKind::Load;
    needsValue = false;
  } else if (kind == "ones") {
    spec.kind = InitKind::Ones;
    needsValue = false;
  } else if (kind == "normal") {
    spec.kind = InitKind::Normal;
  } else if (kind == "uniform") {
    spec.kind = InitKind::Uniform;
  } else if (kind == "constant") {
    spec.kind = InitKind::Constant;
  } else {
    return Error("unknown init kind " + quoted(kind) +
                 "; expected zeros, ones, normal:STD, uniform:BOUND, "
                 "constant:VALUE or load");
  }
  if (!needsValue) {
    if (colon != std::string_view::npos)
      return Error("init=" + std::string(kind) + " takes no value, found " +
                   quoted(text));
    return spec;
  }
  if (colon == std::string_view::npos)
    return Error("init=" + std::string(kind) + " needs a value (" +
                 std::string(kind) + ":" +
                 (spec.kind == InitKind::Normal    ? "STD"
                  : spec.kind == InitKind::Uniform ? "BOUND"
                                                   : "VALUE") +
                 ")");
  if (!parseFiniteDouble(value, spec.value))
    return Error("init value " + quoted(value) + " in " + quoted(text) +
                 " is not a finite number");
  if ((spec.kind == InitKind::Normal || spec.kind == InitKind::Uniform) &&
      spec.value < 0)
    return Error(
        std::string("init=") + std::string(text) + ": the " +
        (spec.kind == InitKind::Normal ? "standard deviation" : "bound") +
        " must not be negative");
  return spec;
}

std::string formatInitSpec(const InitSpec &init) {
  char value[32];
  std::snprintf(value, sizeof value, "%.9g", init.value);
  switch (init.kind) {
  case InitKind::Zeros:
    return "zeros";
  case InitKind::Ones:
    return "ones";
  case InitKind::Normal:
    return std::string("normal:") + value;
  case InitKind::Uniform:
    return std::string("uniform:") + value;
  case InitKind::Constant:
    return std::string("constant:") + value;
  case InitKind::Load:
    return "load";
  }
  return "?";
}

int64_t TensorSpec::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t TensorSpec::numBytes() const {
  return numElements() * dtypeSize(dtype);
}

const std::vector<int64_t> &TensorSpec::globalShape() const {
  return isSharded() ? fullShape : shape;
}

int64_t TensorSpec::globalElements() const {
  int64_t n = 1;
  for (int64_t d : globalShape())
    n *= d;
  return n;
}

std::string TensorSpec::describe() const {
  return std::string(isResult ? "result " : "arg ") + std::to_string(index) +
         " (" + roleName(role) + " " + name + ")";
}

int64_t TensorSpec::rowElements() const {
  return numElements() / shape[batchDim];
}

std::vector<int64_t> TensorSpec::rowShape() const {
  std::vector<int64_t> row = shape;
  row.erase(row.begin() + batchDim);
  return row;
}

int64_t Manifest::plannedBytes(std::string_view key) const {
  for (const auto &[name, bytes] : memory)
    if (name == key)
      return bytes;
  return -1;
}

int64_t Manifest::worldSize() const {
  int64_t n = 1;
  for (int64_t d : grid)
    n *= d;
  return n;
}

std::string Manifest::gridString() const { return formatShape(grid); }

int64_t Manifest::groupSize(int32_t mask) const {
  int64_t n = 1;
  for (size_t i = 0; i < grid.size(); ++i)
    if (mask & (1 << i))
      n *= grid[i];
  return n;
}

const TensorSpec *Manifest::findArg(std::string_view name) const {
  for (const TensorSpec &arg : args)
    if (arg.name == name)
      return &arg;
  return nullptr;
}

const TensorSpec *Manifest::findArgByFileName(std::string_view name) const {
  if (const TensorSpec *named = findArg(name))
    return named;
  for (const TensorSpec &arg : args)
    for (const std::string &alias : arg.aliases)
      if (alias == name)
        return &arg;
  return nullptr;
}

std::vector<std::string> TensorSpec::fileNames() const {
  std::vector<std::string> names{name};
  names.insert(names.end(), aliases.begin(), aliases.end());
  return names;
}

int Manifest::lossResult() const {
  for (const TensorSpec &result : results)
    if (result.role == Role::Loss)
      return result.index;
  return -1;
}

int Manifest::gradNormSqResult() const {
  for (const TensorSpec &result : results)
    if (result.role == Role::GradNormSq)
      return result.index;
  return -1;
}

bool Manifest::hasGradResults() const {
  for (const TensorSpec &result : results)
    if (result.role == Role::Grad)
      return true;
  return false;
}

int Manifest::countArgsIn(MemoryKind memory) const {
  int n = 0;
  for (const TensorSpec &arg : args)
    n += arg.memory == memory;
  return n;
}

int64_t Manifest::argBytesIn(MemoryKind memory) const {
  int64_t bytes = 0;
  for (const TensorSpec &arg : args)
    if (arg.memory == memory)
      bytes += arg.numBytes();
  return bytes;
}

int64_t Manifest::globalBatchRows() const {
  for (const TensorSpec &arg : args)
    if (arg.batchDim >= 0)
      return arg.globalRows;
  return 0;
}

Expected<Manifest> parseManifest(std::string_view text) {
  return Parser(text).run();
}

std::string formatShape(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "x" : "") + std::to_string(shape[i]);
  return out;
}

} // namespace autoshard::rt
