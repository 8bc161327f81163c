// The safetensors format: a file's head from its tensors, and a file's bytes
// checked and indexed. Files on disk: driver/Safetensors.h, ckpt/ShardFile.h.
#include "io/Safetensors.h"
#include "core/Dtype.h"
#include "io/Json.h"

#include <algorithm>
#include <set>

namespace autoshard::rt {

Expected<SafetensorsHead>
safetensorsHead(const std::vector<TensorView> &tensors,
                const std::map<std::string, std::string> &metadata) {
  JsonWriter json(JsonWriter::Layout::Compact);
  json.beginObject();
  if (!metadata.empty()) {
    json.key("__metadata__").beginObject();
    for (const auto &[key, value] : metadata)
      json.key(key).string(value);
    json.end();
  }
  SafetensorsHead head;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorView &t : tensors) {
    if (!names.insert(t.name).second || t.name == "__metadata__")
      return Error("tensor name '" + t.name + "' appears twice or is reserved");
    if (!isValidDtype(t.dtype))
      return Error("tensor '" + t.name + "' has no valid dtype");
    uint64_t elements = 1;
    for (int64_t dim : t.shape)
      elements *= static_cast<uint64_t>(dim);
    uint64_t bytes = elements * static_cast<uint64_t>(dtypeSize(t.dtype));
    json.key(t.name).beginObject();
    json.key("dtype").string(dtypeSafetensorsName(t.dtype));
    json.key("shape").beginArray();
    for (int64_t dim : t.shape)
      json.integer(dim);
    json.end();
    json.key("data_offsets").beginArray();
    json.integer(offset).integer(offset + bytes);
    json.end();
    json.end();
    offset += bytes;
    head.tensorBytes.push_back(bytes);
  }
  std::string header = json.end().take();
  header.append((8 - header.size() % 8) % 8, ' ');
  head.bytes.reserve(8 + header.size());
  for (int i = 0; i < 8; ++i)
    head.bytes +=
        static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  head.bytes += header;
  return head;
}

namespace {

int64_t safetensorsDtypeSize(const std::string &dtype) {
  static const std::map<std::string, int64_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

} // namespace

Expected<SafetensorsFile> parseSafetensors(const std::string &bytes,
                                           const std::string &source) {
  auto bad = [&](const std::string &what) {
    return Error("'" + source + "' is not a valid safetensors file: " + what);
  };

  if (bytes.size() < 8)
    return bad("it has " + std::to_string(bytes.size()) +
               " bytes, fewer than the 8-byte header length");
  uint64_t headerLength = 0;
  for (int i = 0; i < 8; ++i)
    headerLength |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i]))
                    << (8 * i);
  if (headerLength > bytes.size() - 8)
    return bad("the header length " + std::to_string(headerLength) +
               " exceeds the file's remaining " +
               std::to_string(bytes.size() - 8) + " bytes");

  Expected<Json> parsed =
      parseJson(std::string_view(bytes).substr(8, headerLength));
  if (!parsed)
    return bad("bad JSON header " + parsed.message());
  const Json &header = *parsed;
  if (!header.isObject())
    return bad("the header is not a JSON object");

  SafetensorsFile file;
  file.data = bytes.substr(8 + headerLength);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto &[name, entry] : header.members) {
    if (name == "__metadata__") {
      if (!entry.isObject())
        return bad("__metadata__ is not an object");
      for (const auto &[key, value] : entry.members) {
        if (!value.isString())
          return bad("__metadata__ value of '" + key + "' is not a string");
        file.metadata[key] = value.text;
      }
      continue;
    }
    if (file.tensors.count(name))
      return bad("tensor '" + name + "' appears twice");
    if (!entry.isObject())
      return bad("the entry of '" + name + "' is not an object");
    const Json *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
    for (const auto &[key, value] : entry.members) {
      if (key == "dtype")
        dtype = &value;
      else if (key == "shape")
        shape = &value;
      else if (key == "data_offsets")
        offsets = &value;
      else
        return bad("tensor '" + name + "' has an unknown key '" + key + "'");
    }
    if (!dtype || !shape || !offsets)
      return bad("tensor '" + name + "' needs dtype, shape and data_offsets");
    SafetensorsEntry out;
    if (!dtype->isString() || safetensorsDtypeSize(dtype->text) == 0)
      return bad("tensor '" + name + "' has an unknown dtype");
    out.dtype = dtype->text;
    if (!shape->isArray())
      return bad("the shape of '" + name + "' is not an array");
    uint64_t elements = 1;
    for (const Json &dim : shape->items) {
      std::optional<uint64_t> d = dim.toUint64();
      if (!d || *d > (uint64_t(1) << 48))
        return bad("the shape of '" + name +
                   "' holds something other than a dimension");
      out.shape.push_back(static_cast<int64_t>(*d));
      elements *= *d;
    }
    std::optional<uint64_t> begin, end;
    if (offsets->isArray() && offsets->items.size() == 2) {
      begin = offsets->items[0].toUint64();
      end = offsets->items[1].toUint64();
    }
    if (!begin || !end || *begin > *end)
      return bad("data_offsets of '" + name + "' is not [begin, end]");
    out.begin = *begin;
    out.end = *end;
    uint64_t expected =
        elements * static_cast<uint64_t>(safetensorsDtypeSize(out.dtype));
    if (out.end - out.begin != expected)
      return bad("'" + name + "' spans " + std::to_string(out.end - out.begin) +
                 " bytes but its " + out.dtype + " shape needs " +
                 std::to_string(expected));
    ranges.emplace_back(out.begin, out.end);
    file.tensors.emplace(name, std::move(out));
  }
  // The tensors must tile the data section: no gaps, no overlaps.
  std::sort(ranges.begin(), ranges.end());
  uint64_t next = 0;
  for (const auto &[begin, end] : ranges) {
    if (begin != next)
      return bad("data_offsets leave a gap or overlap at byte " +
                 std::to_string(std::min(begin, next)));
    next = end;
  }
  if (next != file.data.size())
    return bad("the tensors cover " + std::to_string(next) +
               " bytes but the data section has " +
               std::to_string(file.data.size()));
  return file;
}

} // namespace autoshard::rt
