//===- DeviceCatalog.cpp - device data files ------------------------------===//

#include "autoshard/CostModel/DeviceCatalog.h"
#include "autoshard/Support/InstallTree.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

using namespace autoshard::cost;
using llvm::StringRef;

// Both from lib/CostModel/CMakeLists.txt: the source tree's catalogue, and
// where an installed tree keeps it relative to its prefix.
#ifndef AUTOSHARD_DEVICE_DATA_DIR
#define AUTOSHARD_DEVICE_DATA_DIR "data/devices"
#endif
#ifndef AUTOSHARD_INSTALL_DEVICE_DIR
#define AUTOSHARD_INSTALL_DEVICE_DIR "share/autoshard/devices"
#endif

static constexpr StringRef kSchema = "autoshard-device/1";

static llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::vector<std::string> autoshard::cost::getDeviceDirectoryCandidates() {
  std::vector<std::string> candidates;
  if (std::optional<std::string> installed =
          autoshard::pathInInstallTree(AUTOSHARD_INSTALL_DEVICE_DIR))
    candidates.push_back(*installed);
  candidates.push_back(AUTOSHARD_DEVICE_DATA_DIR);
  return candidates;
}

llvm::Expected<std::string>
autoshard::cost::findDeviceDirectory(llvm::ArrayRef<std::string> candidates) {
  for (const std::string &dir : candidates)
    if (llvm::sys::fs::is_directory(dir))
      return dir;
  std::string looked;
  for (size_t i = 0; i < candidates.size(); ++i)
    looked += (i == 0                       ? "'"
               : i + 1 == candidates.size() ? "' and '"
                                            : "', '") +
              candidates[i];
  return error("cannot find the device catalogue (the shipped device "
               "files): looked for the directory " +
               looked +
               "', and none exists. An installed tree keeps it in "
               "share/autoshard/devices beside bin/ (cmake --install "
               "puts it there); a build finds the data/devices of its source "
               "tree. Install autoshard, copy data/devices there, or give "
               "--device the path of a device file");
}

std::string autoshard::cost::getDefaultDeviceDirectory() {
  llvm::Expected<std::string> dir =
      findDeviceDirectory(getDeviceDirectoryCandidates());
  if (dir)
    return *dir;
  llvm::consumeError(dir.takeError());
  return "";
}

namespace {

/// How a figure may be used: needed by every device, by GPUs only (host
/// link, host memory, NVMe), or optional (the network of a one-node CPU).
enum class Need { All, GPUOnly, Optional };

/// What a figure measures, which sets the range a real device's figure
/// lies in (figureRange).
enum class Unit {
  Count,
  Bytes,
  FlopPerSecond,
  BytesPerSecond,
  Seconds,
  Fraction
};

struct FigureField {
  const char *key;
  Need need;
  Unit unit;
  double DeviceSpec::*real = nullptr;
  int64_t DeviceSpec::*whole = nullptr;
  /// A figure that may also give "by_message_bytes": [[bytes, value], ...].
  DeviceSpec::BandwidthCurve DeviceSpec::*curve = nullptr;

  bool integer() const { return unit == Unit::Count || unit == Unit::Bytes; }
};

/// The closed range of plausible values of a figure in `unit`, and the
/// unit's name. The bounds are orders of magnitude beyond any device the
/// cost model is meant for, in both directions: they catch a wrong unit or
/// a typo in the exponent (a peak of 1e-300 FLOP/s made every plan's step
/// "INF ms" and the choice meaningless), not a slow or a future machine.
struct FigureRange {
  double min, max;
  const char *unitName;
};

FigureRange figureRange(Unit unit) {
  switch (unit) {
  case Unit::Count:
    return {1, 1e6, ""};
  case Unit::Bytes:
    // A page at least: tests model devices of a few hundred KiB.
    return {4096, 1e18, " bytes"};
  case Unit::FlopPerSecond:
    return {1e6, 1e18, " FLOP/s"};
  case Unit::BytesPerSecond:
    return {1e6, 1e15, " bytes/s"};
  case Unit::Seconds:
    return {1e-9, 10, " s"};
  case Unit::Fraction:
    return {1e-3, 1, ""};
  }
  return {0, 0, ""};
}

/// %g: exponents stay visible (formatv's default is fixed-point).
std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// Why `value` of figure `key` (in `unit`) is implausible, or "".
std::string checkFigureRange(StringRef key, Unit unit, double value) {
  FigureRange range = figureRange(unit);
  if (value >= range.min && value <= range.max)
    return "";
  return ("figure \"" + key + "\" is " + formatNumber(value) + range.unitName +
          ", outside [" + formatNumber(range.min) + ", " +
          formatNumber(range.max) + "]" + range.unitName +
          ", the range of any real device's; check its unit and exponent")
      .str();
}

const FigureField kFields[] = {
    {"devices_per_node", Need::All, Unit::Count, nullptr,
     &DeviceSpec::devicesPerNode},
    {"memory_bytes", Need::All, Unit::Bytes, nullptr, &DeviceSpec::memoryBytes},
    {"peak_bf16_flop_per_s", Need::All, Unit::FlopPerSecond,
     &DeviceSpec::peakFlopsBF16},
    {"peak_f32_flop_per_s", Need::All, Unit::FlopPerSecond,
     &DeviceSpec::peakFlopsF32},
    {"memory_bandwidth_bytes_per_s", Need::All, Unit::BytesPerSecond,
     &DeviceSpec::memoryBandwidth},
    {"intra_node_bandwidth_bytes_per_s", Need::All, Unit::BytesPerSecond,
     &DeviceSpec::intraNodeBandwidth},
    {"inter_node_bandwidth_bytes_per_s", Need::Optional, Unit::BytesPerSecond,
     &DeviceSpec::interNodeBandwidth},
    {"collective_launch_latency_s", Need::All, Unit::Seconds,
     &DeviceSpec::collectiveLaunchLatency},
    {"ring_step_latency_intra_node_s", Need::All, Unit::Seconds,
     &DeviceSpec::ringStepLatencyIntraNode},
    {"ring_step_latency_inter_node_s", Need::Optional, Unit::Seconds,
     &DeviceSpec::ringStepLatencyInterNode},
    {"tree_step_latency_intra_node_s", Need::All, Unit::Seconds,
     &DeviceSpec::treeStepLatencyIntraNode},
    {"tree_step_latency_inter_node_s", Need::Optional, Unit::Seconds,
     &DeviceSpec::treeStepLatencyInterNode},
    {"intra_node_all_reduce_bandwidth_bytes_per_s", Need::Optional,
     Unit::BytesPerSecond, &DeviceSpec::intraNodeAllReduceBandwidth, nullptr,
     &DeviceSpec::intraNodeAllReduceCurve},
    {"intra_node_reduce_scatter_bandwidth_bytes_per_s", Need::Optional,
     Unit::BytesPerSecond, &DeviceSpec::intraNodeReduceScatterBandwidth,
     nullptr, &DeviceSpec::intraNodeReduceScatterCurve},
    {"intra_node_all_gather_bandwidth_bytes_per_s", Need::Optional,
     Unit::BytesPerSecond, &DeviceSpec::intraNodeAllGatherBandwidth, nullptr,
     &DeviceSpec::intraNodeAllGatherCurve},
    {"cores", Need::Optional, Unit::Count, nullptr, &DeviceSpec::cores},
    {"compute_efficiency", Need::Optional, Unit::Fraction,
     &DeviceSpec::computeEfficiency},
    {"host_link_bandwidth_bytes_per_s", Need::GPUOnly, Unit::BytesPerSecond,
     &DeviceSpec::hostLinkBandwidth},
    {"host_memory_bytes", Need::GPUOnly, Unit::Bytes, nullptr,
     &DeviceSpec::hostMemoryBytes},
    {"host_memory_bandwidth_bytes_per_s", Need::GPUOnly, Unit::BytesPerSecond,
     &DeviceSpec::hostMemoryBandwidth},
    {"nvme_bandwidth_bytes_per_s", Need::GPUOnly, Unit::BytesPerSecond,
     &DeviceSpec::nvmeBandwidth},
    {"nvme_bytes", Need::GPUOnly, Unit::Bytes, nullptr, &DeviceSpec::nvmeBytes},
};

std::string knownFigures() {
  std::string text;
  for (const FigureField &field : kFields)
    text += (text.empty() ? "" : ", ") + std::string(field.key);
  return text;
}

bool validName(StringRef name) {
  return !name.empty() && llvm::all_of(name, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

} // namespace

/// The deepest nesting of arrays and objects a device file may have. Its
/// own is 5 (the top-level object, "figures", a figure, "by_message_bytes"
/// and its pairs); llvm::json's parser recurses once per level without a
/// limit of its own, and 50,000 nested '[' overflowed the stack.
static constexpr unsigned kMaxJsonNesting = 32;

/// The offset of the first '[' or '{' of `json` nested more than `limit`
/// levels deep (outside strings), or nullopt. Every closer counts as
/// closing: a mismatched one ends the parse before it goes deeper.
static std::optional<size_t> findTooDeepJson(StringRef json, unsigned limit) {
  unsigned depth = 0;
  for (size_t i = 0, e = json.size(); i < e; ++i) {
    char c = json[i];
    if (c == '"') {
      for (++i; i < e && json[i] != '"'; ++i)
        if (json[i] == '\\')
          ++i;
    } else if (c == '[' || c == '{') {
      if (depth == limit)
        return i;
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

llvm::Expected<DeviceSpec> autoshard::cost::parseDeviceSpec(StringRef json,
                                                            StringRef origin) {
  if (std::optional<size_t> at = findTooDeepJson(json, kMaxJsonNesting)) {
    StringRef before = json.take_front(*at);
    size_t lineStart = before.rfind('\n');
    size_t column =
        *at - (lineStart == StringRef::npos ? 0 : lineStart + 1) + 1;
    return error(origin + ": arrays and objects nest more than " +
                 llvm::Twine(kMaxJsonNesting) + " levels deep (at line " +
                 llvm::Twine(before.count('\n') + 1) + ", column " +
                 llvm::Twine(column) +
                 "), which the JSON parser cannot read without overflowing "
                 "its stack; a device file nests 5 (the top-level object, "
                 "\"figures\", a figure, \"by_message_bytes\" and its "
                 "[bytes, value] pairs)");
  }
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed)
    return error(origin +
                 ": not valid JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return error(origin + ": the top level must be a JSON object");

  std::optional<StringRef> schema = root->getString("schema");
  if (!schema || *schema != kSchema)
    return error(origin + ": \"schema\" must be \"" + kSchema + "\"");
  for (const auto &entry : *root) {
    StringRef key = entry.first;
    if (key != "schema" && key != "name" && key != "description" &&
        key != "kind" && key != "figures" && key != "notes")
      return error(origin + ": unknown key \"" + key +
                   "\" (expected schema, name, description, kind, figures, "
                   "notes)");
  }

  DeviceSpec device;
  std::optional<StringRef> name = root->getString("name");
  if (!name || !validName(*name))
    return error(origin + ": \"name\" must be a non-empty string of "
                          "lower-case letters, digits and '-'");
  device.name = name->str();
  if (std::optional<StringRef> description = root->getString("description"))
    device.description = description->str();
  std::optional<StringRef> kind = root->getString("kind");
  if (kind && *kind == "gpu")
    device.kind = DeviceKind::GPU;
  else if (kind && *kind == "cpu")
    device.kind = DeviceKind::CPU;
  else
    return error(origin + ": \"kind\" must be \"gpu\" or \"cpu\"");

  const llvm::json::Object *figures = root->getObject("figures");
  if (!figures)
    return error(origin + ": \"figures\" must be an object of figures");
  for (const auto &entry : *figures) {
    StringRef key = entry.first;
    if (!llvm::any_of(kFields, [&](const FigureField &field) {
          return key == field.key;
        }))
      return error(origin + ": unknown figure \"" + key +
                   "\" (known: " + knownFigures() + ")");
  }
  bool gpu = device.kind == DeviceKind::GPU;
  for (const FigureField &field : kFields) {
    const llvm::json::Value *value = figures->get(field.key);
    if (!value) {
      if (field.need == Need::All || (field.need == Need::GPUOnly && gpu))
        return error(origin + ": figure \"" + field.key + "\" is missing");
      continue;
    }
    if (field.need == Need::GPUOnly && !gpu)
      return error(origin + ": figure \"" + field.key +
                   "\" describes a GPU's host; a cpu device's memory is its "
                   "host memory and it does not offload");
    const llvm::json::Object *figure = value->getAsObject();
    if (!figure)
      return error(origin + ": figure \"" + field.key +
                   "\" must be an object with \"value\" and \"source\"");
    for (const auto &part : *figure) {
      StringRef partKey = part.first;
      if (partKey == "by_message_bytes" && field.curve)
        continue;
      if (partKey != "value" && partKey != "source" && partKey != "published" &&
          partKey != "assumption")
        return error(origin + ": figure \"" + field.key +
                     "\" has unknown "
                     "key \"" +
                     partKey + "\" (expected value, source, published, " +
                     (field.curve ? "assumption, by_message_bytes)"
                                  : "assumption)"));
    }
    if (const llvm::json::Value *points = figure->get("by_message_bytes")) {
      const llvm::json::Array *list = points->getAsArray();
      std::string what = origin.str() + ": figure \"" + field.key +
                         "\": \"by_message_bytes\" must be a list of "
                         "[bytes, value] pairs of positive numbers in "
                         "increasing bytes";
      if (!list || list->empty())
        return error(what);
      DeviceSpec::BandwidthCurve curve;
      for (const llvm::json::Value &point : *list) {
        const llvm::json::Array *pair = point.getAsArray();
        std::optional<double> bytes, rate;
        if (pair && pair->size() == 2) {
          bytes = (*pair)[0].getAsNumber();
          rate = (*pair)[1].getAsNumber();
        }
        if (!bytes || !rate || !std::isfinite(*bytes) ||
            !std::isfinite(*rate) || *bytes <= 0 || *rate <= 0 ||
            (!curve.empty() && *bytes <= curve.back().first))
          return error(what);
        if (std::string outside =
                checkFigureRange(field.key, field.unit, *rate);
            !outside.empty())
          return error(origin + ": \"by_message_bytes\" of " + outside);
        curve.push_back({*bytes, *rate});
      }
      device.*field.curve = std::move(curve);
    }
    std::optional<StringRef> source = figure->getString("source");
    if (!source || source->trim().empty())
      return error(origin + ": figure \"" + field.key +
                   "\" has no \"source\": every figure names where it comes "
                   "from");
    std::optional<double> number = figure->getNumber("value");
    if (!number || !std::isfinite(*number) || *number <= 0)
      return error(origin + ": figure \"" + field.key +
                   "\" needs a positive number as \"value\"");
    if (field.integer() && *number != std::floor(*number))
      return error(origin + ": figure \"" + field.key +
                   "\" must be a whole number");
    if (std::string outside = checkFigureRange(field.key, field.unit, *number);
        !outside.empty())
      return error(origin + ": " + outside);
    if (field.integer()) {
      device.*field.whole = int64_t(*number);
    } else {
      device.*field.real = *number;
    }
  }
  bool network = figures->get("inter_node_bandwidth_bytes_per_s");
  bool ringInter = figures->get("ring_step_latency_inter_node_s");
  bool treeInter = figures->get("tree_step_latency_inter_node_s");
  if (network != ringInter || network != treeInter)
    return error(origin + ": inter_node_bandwidth_bytes_per_s, "
                          "ring_step_latency_inter_node_s and "
                          "tree_step_latency_inter_node_s come together: "
                          "give all three or none");
  if (gpu && !network)
    return error(origin + ": figure \"inter_node_bandwidth_bytes_per_s\" is "
                          "missing (a GPU node has a network)");
  if (device.kind == DeviceKind::CPU && device.devicesPerNode != 1)
    return error(origin + ": a cpu device is one node: devices_per_node must "
                          "be 1");
  if (device.peakFlopsBF16 < device.peakFlopsF32 && gpu)
    return error(origin + ": peak_bf16_flop_per_s is below "
                          "peak_f32_flop_per_s; tensor cores run bf16 faster");
  return device;
}

llvm::Expected<DeviceSpec> autoshard::cost::loadDeviceFile(StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return error("cannot read device file '" + path +
                 "': " + buffer.getError().message());
  llvm::Expected<DeviceSpec> device =
      parseDeviceSpec((*buffer)->getBuffer(), path);
  if (!device)
    return device.takeError();
  StringRef stem = llvm::sys::path::stem(path);
  if (device->name != stem)
    return error(path + ": the device is named '" + device->name +
                 "' but the file is '" + stem +
                 ".json'; name the file after "
                 "the device");
  return device;
}

llvm::Expected<std::vector<DeviceSpec>>
autoshard::cost::loadDeviceDirectory(StringRef directory) {
  std::string found;
  if (directory.empty()) {
    // The default catalogue: looked for, or an error saying where.
    llvm::Expected<std::string> dir =
        findDeviceDirectory(getDeviceDirectoryCandidates());
    if (!dir)
      return dir.takeError();
    found = std::move(*dir);
    directory = found;
  }
  std::error_code ec;
  std::vector<std::string> paths;
  for (llvm::sys::fs::directory_iterator it(directory, ec), end;
       it != end && !ec; it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".json")
      paths.push_back(it->path());
  if (ec)
    return error("cannot read the device directory '" + directory +
                 "': " + ec.message());
  if (paths.empty())
    return error("the device directory '" + directory +
                 "' has no *.json device files");
  std::sort(paths.begin(), paths.end());
  std::vector<DeviceSpec> devices;
  for (const std::string &path : paths) {
    llvm::Expected<DeviceSpec> device = loadDeviceFile(path);
    if (!device)
      return device.takeError();
    devices.push_back(std::move(*device));
  }
  std::sort(
      devices.begin(), devices.end(),
      [](const DeviceSpec &a, const DeviceSpec &b) { return a.name < b.name; });
  return devices;
}

llvm::Expected<DeviceSpec> autoshard::cost::lookupDevice(StringRef name,
                                                         StringRef directory) {
  if (name.ends_with(".json") ||
      name.find(llvm::sys::path::get_separator()) != StringRef::npos)
    return loadDeviceFile(name);
  std::string dir =
      directory.empty() ? getDefaultDeviceDirectory() : directory.str();
  llvm::Expected<std::vector<DeviceSpec>> devices = loadDeviceDirectory(dir);
  if (!devices)
    return devices.takeError();
  std::string known;
  for (DeviceSpec &device : *devices) {
    if (device.name == name)
      return std::move(device);
    known += (known.empty() ? "" : ", ") + device.name;
  }
  return error("unknown device '" + name + "'; known devices: " + known +
               " (from " + dir +
               "), or the path of a device file of your "
               "own (NAME.json, as those are)");
}
