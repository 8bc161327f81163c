// The MANIFEST of a sharded checkpoint: what it holds, where, and checksums.
#include "ckpt/CheckpointManifest.h"
#include "ckpt/Checksum.h"
#include "ckpt/Layout.h"
#include "core/Dtype.h"
#include "data/Philox.h"
#include "io/TextRecords.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sys/stat.h>

namespace autoshard::rt {

namespace {

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

bool parseRoleName(std::string_view text, Role &role) {
  if (text == "param")
    role = Role::Param;
  else if (text == "opt_state")
    role = Role::OptState;
  else
    return false;
  return true;
}

/// Names of files and tensors: no spaces or slashes, not empty, so that a
/// manifest cannot point outside its directory.
bool isSafeName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(" /\t\n\r") == std::string_view::npos;
}

/// The fields of a "data file bytes=N path=P" record; false if it is not one.
bool parseFileData(std::string_view data, uint64_t &bytes,
                   std::string_view &path) {
  constexpr std::string_view prefix = "file bytes=";
  if (data.substr(0, prefix.size()) != prefix)
    return false;
  size_t space = data.find(" path=", prefix.size());
  if (space == std::string_view::npos)
    return false;
  path = data.substr(space + 6);
  return parseInteger(data.substr(prefix.size(), space - prefix.size()),
                      bytes) &&
         !path.empty();
}

class Parser {
public:
  Parser(std::string_view text, const std::string &path)
      : text(text), path(path) {}

  Expected<CheckpointManifest> parse();

private:
  Error fail(int line, const std::string &what) const {
    return lineError("checkpoint manifest " + quoted(path), line, what);
  }
  Status parseRecord(int line, std::string_view record);
  Status finish();

  std::string_view text;
  const std::string &path;
  CheckpointManifest m;
  std::set<std::string> seen;
  std::map<std::string, size_t> tensorIndex;
  std::map<std::string, size_t> fileIndex;
};

Expected<CheckpointManifest> Parser::parse() {
  // The last line is "end crc32=X", X the CRC-32 of every byte before it:
  // checked first, so that a truncated or edited file fails here and not
  // on some later record.
  if (text.empty())
    return fail(0, "it is empty");
  if (text.back() != '\n')
    return fail(0, "it does not end with a newline; it is truncated");
  size_t lastStart = text.rfind('\n', text.size() - 2);
  lastStart = lastStart == std::string_view::npos ? 0 : lastStart + 1;
  std::string_view last = text.substr(lastStart, text.size() - 1 - lastStart);
  uint32_t stored;
  std::string_view crcText;
  if (last.substr(0, 4) != "end " ||
      !keyValue(last.substr(4), "crc32", crcText))
    return fail(0, "its last line is " + quoted(last) +
                       ", not 'end crc32=XXXXXXXX'; it is truncated");
  if (!parseCrc32(crcText, stored))
    return fail(0, "its end line has a malformed checksum " + quoted(crcText));
  uint32_t actual = crc32Of(text.substr(0, lastStart));
  if (actual != stored)
    return fail(0, "its contents have CRC-32 " + formatCrc32(actual) +
                       " but its end line records " + formatCrc32(stored) +
                       "; the file is corrupt");

  TextLines lines(text.substr(0, lastStart));
  while (lines.next()) {
    int line = lines.number();
    std::string_view record = lines.line();
    if (line == 1) {
      if (record !=
          "autoshard-checkpoint " + std::to_string(kCheckpointFormatVersion)) {
        std::string_view prefix = "autoshard-checkpoint ";
        if (record.substr(0, prefix.size()) == prefix)
          return fail(1, "format version " +
                             quoted(record.substr(prefix.size())) +
                             "; this runtime reads version " +
                             std::to_string(kCheckpointFormatVersion));
        return fail(1, "expected 'autoshard-checkpoint " +
                           std::to_string(kCheckpointFormatVersion) +
                           "', found " + quoted(record));
      }
      continue;
    }
    if (Status s = parseRecord(line, record); !s)
      return Error(s.message());
  }
  if (Status s = finish(); !s)
    return Error(s.message());
  return m;
}

Status Parser::parseRecord(int line, std::string_view record) {
  std::vector<std::string_view> f = splitFields(record);
  std::string kind(f[0]);
  static const std::set<std::string> once = {
      "step", "seed", "data", "strategy", "grid", "world", "plan", "model"};
  if (once.count(kind) && !seen.insert(kind).second)
    return fail(line, "a second '" + kind + "' record");
  auto arity = [&](size_t n, const char *form) -> Status {
    if (f.size() != n)
      return fail(line, "expected '" + std::string(form) + "', found " +
                            quoted(record));
    return Status::success();
  };

  if (kind == "step" || kind == "seed" || kind == "world") {
    std::string form = kind + " N";
    if (Status s = arity(2, form.c_str()); !s)
      return s;
    bool ok = kind == "seed"   ? parseInteger(f[1], m.seed)
              : kind == "step" ? parseInteger(f[1], m.step) && m.step >= 0
                               : parseInteger(f[1], m.world) && m.world >= 1;
    if (!ok)
      return fail(line, kind + " " + quoted(f[1]) + " is not a valid count");
    return Status::success();
  }
  if (kind == "plan" || kind == "model") {
    if (Status s = arity(2, (kind + " HEX16").c_str()); !s)
      return s;
    uint64_t &hash = kind == "plan" ? m.planHash : m.modelHash;
    if (f[1].size() != 16 || !parseInteger(f[1], hash, 16))
      return fail(line,
                  kind + " hash " + quoted(f[1]) + " is not 16 hex digits");
    return Status::success();
  }
  if (kind == "strategy" || kind == "grid") {
    if (Status s = arity(2, (kind + " NAME").c_str()); !s)
      return s;
    (kind == "strategy" ? m.strategy : m.grid) = std::string(f[1]);
    return Status::success();
  }
  if (kind == "data") {
    m.data = std::string(record.substr(5 < record.size() ? 5 : record.size()));
    uint64_t bytes;
    std::string_view file;
    if (m.data != "synthetic" && !parseFileData(m.data, bytes, file))
      return fail(line, "expected 'data synthetic' or 'data file bytes=N "
                        "path=P', found " +
                            quoted(record));
    return Status::success();
  }
  if (kind == "file") {
    if (Status s = arity(4, "file NAME bytes=N crc32=X"); !s)
      return s;
    CheckpointFile file;
    file.name = std::string(f[1]);
    std::string_view bytes, crc;
    if (!isSafeName(file.name))
      return fail(line, "file name " + quoted(file.name) +
                            " is not a plain file name");
    if (!keyValue(f[2], "bytes", bytes) || !parseInteger(bytes, file.bytes) ||
        !keyValue(f[3], "crc32", crc) || !parseCrc32(crc, file.crc))
      return fail(line, "expected 'file NAME bytes=N crc32=XXXXXXXX', found " +
                            quoted(record));
    if (!fileIndex.emplace(file.name, m.files.size()).second)
      return fail(line, "file " + quoted(file.name) + " is listed twice");
    m.files.push_back(std::move(file));
    return Status::success();
  }
  if (kind == "tensor") {
    if (f.size() != 6)
      if (Status s = arity(5, "tensor NAME ROLE DTYPE SHAPE [aliases=A,B]"); !s)
        return s;
    CheckpointTensor t;
    t.name = std::string(f[1]);
    if (!isSafeName(t.name))
      return fail(line, "tensor name " + quoted(t.name) + " is not valid");
    if (!parseRoleName(f[2], t.role))
      return fail(line, "tensor " + quoted(t.name) + " has role " +
                            quoted(f[2]) + "; expected param or opt_state");
    if (!parseDtype(f[3], t.dtype))
      return fail(line, "tensor " + quoted(t.name) + " has dtype " +
                            quoted(f[3]) + "; expected one of " + dtypeList());
    if (!parseShape(f[4], t.shape, 0))
      return fail(line, "tensor " + quoted(t.name) + " has shape " +
                            quoted(f[4]) + "; expected e.g. 8x16 or scalar");
    if (f.size() == 6) {
      std::string_view list;
      if (!keyValue(f[5], "aliases", list) || t.role != Role::Param)
        return fail(line, "expected 'tensor NAME ROLE DTYPE SHAPE' with "
                          "'aliases=A,B' only on a param, found " +
                              quoted(record));
      for (size_t start = 0; start <= list.size();) {
        size_t comma = std::min(list.find(',', start), list.size());
        std::string alias(list.substr(start, comma - start));
        if (!isSafeName(alias) || std::find(t.aliases.begin(), t.aliases.end(),
                                            alias) != t.aliases.end())
          return fail(line, "tensor " + quoted(t.name) + " has the alias " +
                                quoted(alias) +
                                ", which is not a name or is listed twice");
        t.aliases.push_back(std::move(alias));
        start = comma + 1;
      }
    }
    if (!tensorIndex.emplace(t.name, m.tensors.size()).second)
      return fail(line, "tensor " + quoted(t.name) + " is listed twice");
    m.tensors.push_back(std::move(t));
    return Status::success();
  }
  if (kind == "block") {
    if (Status s = arity(7, "block NAME begin=B count=C file=F offset=O "
                            "crc32=X");
        !s)
      return s;
    auto it = tensorIndex.find(std::string(f[1]));
    if (it == tensorIndex.end())
      return fail(line, "block of " + quoted(f[1]) +
                            ", which no earlier 'tensor' record declares");
    CheckpointTensor &t = m.tensors[it->second];
    CheckpointBlock b;
    std::string_view begin, count, file, offset, crc;
    if (!keyValue(f[2], "begin", begin) || !parseInteger(begin, b.begin) ||
        b.begin < 0 || !keyValue(f[3], "count", count) ||
        !parseInteger(count, b.count) || b.count < 1 ||
        !keyValue(f[4], "file", file) || !keyValue(f[5], "offset", offset) ||
        !parseInteger(offset, b.offset) || !keyValue(f[6], "crc32", crc) ||
        !parseCrc32(crc, b.crc))
      return fail(line, "expected 'block NAME begin=B count=C file=F "
                        "offset=O crc32=XXXXXXXX' (C >= 1), found " +
                            quoted(record));
    b.file = std::string(file);
    auto fileIt = fileIndex.find(b.file);
    if (fileIt == fileIndex.end())
      return fail(line, "block of " + quoted(t.name) + " is in file " +
                            quoted(b.file) + ", which no 'file' record lists");
    const CheckpointFile &inFile = m.files[fileIt->second];
    auto bytes = static_cast<unsigned __int128>(b.count) *
                 static_cast<uint64_t>(dtypeSize(t.dtype));
    if (b.offset > inFile.bytes || bytes > inFile.bytes - b.offset)
      return fail(line, "block of " + quoted(t.name) + " at offset " +
                            std::to_string(b.offset) +
                            " runs past the end of " + quoted(b.file) + " (" +
                            std::to_string(inFile.bytes) + " bytes)");
    t.blocks.push_back(std::move(b));
    return Status::success();
  }
  return fail(line, "unknown record " + quoted(f[0]));
}

Status Parser::finish() {
  for (const char *kind :
       {"step", "seed", "data", "strategy", "grid", "world", "plan", "model"})
    if (!seen.count(kind))
      return fail(0, std::string("it has no '") + kind + "' record");
  for (CheckpointTensor &t : m.tensors) {
    std::sort(t.blocks.begin(), t.blocks.end(),
              [](const CheckpointBlock &a, const CheckpointBlock &b) {
                return a.begin < b.begin;
              });
    std::vector<ElementRange> ranges;
    for (const CheckpointBlock &b : t.blocks)
      ranges.push_back({b.begin, b.count});
    if (Status s = checkTiling(ranges, t.numElements()); !s)
      return fail(0,
                  "the blocks of tensor " + quoted(t.name) + " " + s.message());
  }
  uint64_t hash = modelSignatureHash(m.tensors);
  if (hash != m.modelHash)
    return fail(0, "its tensors hash to " + hex64(hash) +
                       " but its model record says " + hex64(m.modelHash));
  return Status::success();
}

} // namespace

int64_t CheckpointTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string CheckpointTensor::describe() const {
  return std::string(roleName(role)) + " " + name + " " + dtypeName(dtype) +
         " " + formatShape(shape);
}

const CheckpointTensor *
CheckpointManifest::findTensor(std::string_view name) const {
  for (const CheckpointTensor &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

const CheckpointFile *
CheckpointManifest::findFile(std::string_view name) const {
  for (const CheckpointFile &f : files)
    if (f.name == name)
      return &f;
  return nullptr;
}

std::vector<CheckpointTensor> modelSignature(const Manifest &manifest) {
  std::vector<CheckpointTensor> tensors;
  for (const TensorSpec &arg : manifest.args) {
    if (arg.role != Role::Param && arg.role != Role::OptState)
      continue;
    CheckpointTensor t;
    t.name = arg.name;
    t.role = arg.role;
    t.dtype = arg.dtype;
    t.shape = arg.globalShape();
    t.aliases = arg.aliases;
    tensors.push_back(std::move(t));
  }
  return tensors;
}

uint64_t modelSignatureHash(const std::vector<CheckpointTensor> &tensors) {
  uint64_t hash = kFnv1aOffset;
  for (const CheckpointTensor &t : tensors)
    hash = fnv1a64(t.name + " " + roleName(t.role) + " " + dtypeName(t.dtype) +
                       " " + formatShape(t.shape) + "\n",
                   hash);
  return hash;
}

std::string formatCheckpointManifest(const CheckpointManifest &m) {
  std::string out =
      "autoshard-checkpoint " + std::to_string(kCheckpointFormatVersion) + "\n";
  out += "step " + std::to_string(m.step) + "\n";
  out += "seed " + std::to_string(m.seed) + "\n";
  out += "data " + m.data + "\n";
  out += "strategy " + m.strategy + "\n";
  out += "grid " + m.grid + "\n";
  out += "world " + std::to_string(m.world) + "\n";
  out += "plan " + hex64(m.planHash) + "\n";
  out += "model " + hex64(m.modelHash) + "\n";
  for (const CheckpointFile &f : m.files)
    out += "file " + f.name + " bytes=" + std::to_string(f.bytes) +
           " crc32=" + formatCrc32(f.crc) + "\n";
  for (const CheckpointTensor &t : m.tensors) {
    out += "tensor " + t.name + " " + roleName(t.role) + " " +
           dtypeName(t.dtype) + " " + formatShape(t.shape);
    for (size_t i = 0; i < t.aliases.size(); ++i)
      out += (i ? "," : " aliases=") + t.aliases[i];
    out += "\n";
    for (const CheckpointBlock &b : t.blocks)
      out += "block " + t.name + " begin=" + std::to_string(b.begin) +
             " count=" + std::to_string(b.count) + " file=" + b.file +
             " offset=" + std::to_string(b.offset) +
             " crc32=" + formatCrc32(b.crc) + "\n";
  }
  out += "end crc32=" + formatCrc32(crc32Of(out)) + "\n";
  return out;
}

Expected<CheckpointManifest> parseCheckpointManifest(std::string_view text,
                                                     const std::string &path) {
  return Parser(text, path).parse();
}

Expected<std::string> describeDataSource(const std::string &dataFile) {
  if (dataFile.empty())
    return std::string("synthetic");
  if (dataFile.find('\n') != std::string::npos)
    return Error("data file " + quoted(dataFile) +
                 " has a newline in its name, which a checkpoint's MANIFEST "
                 "cannot record; rename it");
  struct stat info;
  if (::stat(dataFile.c_str(), &info) != 0)
    return Error("cannot read data file " + quoted(dataFile) + ": " +
                 std::strerror(errno));
  return "file bytes=" + std::to_string(info.st_size) + " path=" + dataFile;
}

Status checkResumable(const CheckpointManifest &checkpoint,
                      const std::string &where, const Manifest &manifest,
                      uint64_t seed, const std::string &data) {
  std::string prefix = "checkpoint " + quoted(where) + " ";
  std::vector<CheckpointTensor> wanted = modelSignature(manifest);
  std::vector<std::string> missing, extra, different;
  for (const CheckpointTensor &t : wanted) {
    const CheckpointTensor *found = checkpoint.findTensor(t.name);
    if (!found)
      missing.push_back(t.name);
    else if (found->role != t.role || found->dtype != t.dtype ||
             found->shape != t.shape)
      different.push_back(found->describe() + " (the step has " + t.describe() +
                          ")");
  }
  for (const CheckpointTensor &t : checkpoint.tensors)
    if (std::none_of(
            wanted.begin(), wanted.end(),
            [&](const CheckpointTensor &w) { return w.name == t.name; }))
      extra.push_back(t.name);
  auto list = [](const std::vector<std::string> &names) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < 5; ++i)
      out += (i ? ", " : "") + names[i];
    if (names.size() > 5)
      out += " and " + std::to_string(names.size() - 5) + " more";
    return out;
  };
  if (!missing.empty() || !extra.empty() || !different.empty()) {
    std::string why;
    if (!different.empty())
      why += "it holds " + list(different);
    if (!missing.empty())
      why += std::string(why.empty() ? "" : "; ") + "it lacks " +
             std::to_string(missing.size()) +
             " of the step's tensors: " + list(missing);
    if (!extra.empty())
      why += std::string(why.empty() ? "" : "; ") + "it holds " +
             std::to_string(extra.size()) +
             " tensors the step does not have: " + list(extra);
    return Error(prefix + "is of another model than step '" + manifest.step +
                 "' (strategy " + manifest.strategy + ", grid " +
                 manifest.gridString() + "): " + why +
                 ". A checkpoint resumes the same model (any strategy or "
                 "world size) with the same optimizer");
  }
  if (checkpoint.seed != seed)
    return Error(prefix + "was written by a run with --seed " +
                 std::to_string(checkpoint.seed) + " but this run has --seed " +
                 std::to_string(seed) +
                 "; batches depend on the seed, so resume with --seed " +
                 std::to_string(checkpoint.seed));
  if (checkpoint.data != data) {
    uint64_t bytesA, bytesB;
    std::string_view pathA, pathB;
    bool bothFiles = parseFileData(checkpoint.data, bytesA, pathA) &&
                     parseFileData(data, bytesB, pathB);
    if (!(bothFiles && bytesA == bytesB))
      return Error(prefix + "was written by a run reading data '" +
                   checkpoint.data + "' but this run reads '" + data +
                   "'; resume on the same data (--data) so that the next "
                   "batches are the ones the interrupted run would have "
                   "read");
  }
  return Status::success();
}

} // namespace autoshard::rt
