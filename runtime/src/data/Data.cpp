// Batches for inputs and labels: synthetic, or read from a data file.
#include "data/Data.h"
#include "core/Dtype.h"
#include "data/Philox.h"
#include "io/RegularFile.h"
#include "data/TokenData.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <unistd.h>

namespace autoshard::rt {

RowRange localRowRange(int64_t globalRows, int rank, int worldSize) {
  // 128-bit products: r * G overflows int64 only for absurd batches, but a
  // wrong row range would silently train on the wrong data.
  auto boundary = [&](int64_t r) {
    return static_cast<int64_t>(static_cast<__int128>(r) * globalRows /
                                worldSize);
  };
  int64_t first = boundary(rank);
  return {first, boundary(rank + 1) - first};
}

namespace {

std::string quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

/// Copies one row (rowElements contiguous elements) into local row
/// `localRow` of a batched argument, whose batch dimension need not be the
/// outermost: the row is spread over `outer` runs of `inner` elements.
void scatterRow(void *dst, const TensorSpec &spec, int64_t localRow,
                const void *row) {
  int64_t size = dtypeSize(spec.dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < spec.batchDim; ++d)
    outer *= spec.shape[d];
  for (size_t d = spec.batchDim + 1; d < spec.shape.size(); ++d)
    inner *= spec.shape[d];
  int64_t rows = spec.localRows();
  auto *out = static_cast<char *>(dst);
  const auto *in = static_cast<const char *>(row);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + ((o * rows + localRow) * inner) * size,
                in + o * inner * size, static_cast<size_t>(inner * size));
}

uint64_t batchKey(std::string_view domain, std::string_view name,
                  int64_t step) {
  uint64_t h = fnv1a64(domain);
  h = fnv1a64(name, h);
  return fnv1a64(static_cast<uint64_t>(step), h);
}

// The teacher is materialised once; beyond this many weights (64 MiB) a data
// file is the better tool.
constexpr int64_t kMaxTeacherWeights = int64_t(1) << 24;

class SyntheticBatches : public BatchSource {
public:
  SyntheticBatches(const Manifest &manifest, uint64_t seed, int rank,
                   int worldSize)
      : manifest(manifest), seed(seed),
        rows(localRowRange(manifest.globalBatchRows(), rank, worldSize)) {}

  Status prepare() {
    for (const TensorSpec &arg : manifest.args) {
      if (arg.role == Role::Input && isIntegerDtype(arg.dtype) && !arg.classes)
        return Error("synthetic data for integer " + arg.describe() +
                     " needs classes=C in the manifest (its values lie in "
                     "[0, C)); or pass --data FILE");
      if (arg.role == Role::Input && isFloatDtype(arg.dtype))
        features += arg.rowElements();
    }
    for (const TensorSpec &arg : manifest.args) {
      if (arg.role != Role::Label || features == 0)
        continue;
      int64_t weights = arg.rowElements() * arg.classes * features;
      if (weights > kMaxTeacherWeights)
        return Error("the synthetic teacher for " + arg.describe() +
                     " would need " + std::to_string(weights) +
                     " weights (label elements x classes x input features), "
                     "more than " +
                     std::to_string(kMaxTeacherWeights) +
                     "; pass --data FILE instead");
      std::vector<float> &t = teachers[arg.index];
      t.resize(static_cast<size_t>(weights));
      PhiloxStream stream(batchKey("teacher/", arg.name, 0), seed);
      for (int64_t i = 0; i < weights; ++i)
        t[i] = static_cast<float>(stream.normal(static_cast<uint64_t>(i)));
    }
    return Status::success();
  }

  void fill(int64_t step, void *const *args) override {
    std::vector<char> row;
    std::vector<double> x;
    for (const TensorSpec &arg : manifest.args) {
      if (arg.role != Role::Input && arg.role != Role::Label)
        continue;
      row.resize(static_cast<size_t>(arg.rowElements() * dtypeSize(arg.dtype)));
      for (int64_t r = 0; r < rows.count; ++r) {
        int64_t g = rows.first + r;
        if (arg.role == Role::Input) {
          for (int64_t j = 0; j < arg.rowElements(); ++j)
            storeElement(row.data(), arg.dtype, j,
                         syntheticInputValue(seed, arg, step, g, j));
        } else {
          rowFeatures(step, g, x);
          labelRow(arg, step, g, x, row.data());
        }
        scatterRow(args[arg.index], arg, r, row.data());
      }
    }
  }

  std::string describe() const override {
    return "synthetic (seed " + std::to_string(seed) + ")";
  }

private:
  /// The concatenated float inputs of global row g, in argument order.
  void rowFeatures(int64_t step, int64_t g, std::vector<double> &x) const {
    x.clear();
    for (const TensorSpec &arg : manifest.args)
      if (arg.role == Role::Input && isFloatDtype(arg.dtype))
        for (int64_t j = 0; j < arg.rowElements(); ++j)
          x.push_back(syntheticInputValue(seed, arg, step, g, j));
  }

  void labelRow(const TensorSpec &label, int64_t step, int64_t g,
                const std::vector<double> &x, void *row) const {
    int64_t elements = label.rowElements();
    if (x.empty()) {
      PhiloxStream stream(batchKey("label/", label.name, step), seed);
      for (int64_t l = 0; l < elements; ++l)
        storeElement(
            row, label.dtype, l,
            static_cast<double>(stream.uniformInt(
                static_cast<uint64_t>(g * elements + l), label.classes)));
      return;
    }
    const std::vector<float> &t = teachers.at(label.index);
    int64_t d = static_cast<int64_t>(x.size());
    for (int64_t l = 0; l < elements; ++l) {
      int64_t best = 0;
      double bestScore = 0;
      for (int64_t c = 0; c < label.classes; ++c) {
        const float *w = t.data() + (l * label.classes + c) * d;
        double score = 0;
        for (int64_t j = 0; j < d; ++j)
          score += w[j] * x[j];
        if (c == 0 || score > bestScore) {
          best = c;
          bestScore = score;
        }
      }
      storeElement(row, label.dtype, l, static_cast<double>(best));
    }
  }

  const Manifest &manifest;
  uint64_t seed;
  RowRange rows;
  int64_t features = 0;
  std::map<int, std::vector<float>> teachers;
};

class FileBatches : public BatchSource {
public:
  FileBatches(const Manifest &manifest, std::unique_ptr<AsdataFile> file,
              int rank, int worldSize)
      : manifest(manifest), file(std::move(file)),
        rows(localRowRange(manifest.globalBatchRows(), rank, worldSize)) {}

  Status validate() {
    for (const TensorSpec &arg : manifest.args) {
      if (arg.role != Role::Input && arg.role != Role::Label)
        continue;
      const AsdataField *field = file->find(arg.name);
      if (!field) {
        std::string names;
        for (const AsdataField &f : file->fields())
          names += (names.empty() ? "" : ", ") + f.name;
        return Error("data file " + quoted(file->path()) + " has no field " +
                     quoted(arg.name) + " for " + arg.describe() +
                     " (its fields: " + (names.empty() ? "none" : names) + ")");
      }
      if (field->dtype != arg.dtype)
        return Error("data file " + quoted(file->path()) + ": field " +
                     quoted(arg.name) + " has dtype " +
                     dtypeName(field->dtype) + " but " + arg.describe() +
                     " needs " + dtypeName(arg.dtype));
      if (field->rowShape != arg.rowShape())
        return Error("data file " + quoted(file->path()) + ": field " +
                     quoted(arg.name) + " has per-row shape " +
                     formatShape(field->rowShape) + " but " + arg.describe() +
                     " needs " + formatShape(arg.rowShape()) + " (its shape " +
                     formatShape(arg.shape) + " without batch_dim " +
                     std::to_string(arg.batchDim) + ")");
      if (arg.classes > 0) {
        if (Status s = checkRange(arg, *field); !s)
          return s;
      }
      fields.emplace(arg.index, field);
    }
    return Status::success();
  }

  void fill(int64_t step, void *const *args) override {
    auto fileRows = static_cast<unsigned __int128>(file->rows());
    auto batchRows = static_cast<unsigned __int128>(manifest.globalBatchRows());
    for (const auto &[index, field] : fields) {
      const TensorSpec &arg = manifest.args[index];
      int64_t rowBytes = arg.rowElements() * dtypeSize(arg.dtype);
      for (int64_t r = 0; r < rows.count; ++r) {
        // Step s reads global rows s*G ... s*G+G-1, wrapping around.
        auto g = static_cast<unsigned __int128>(rows.first + r);
        auto fileRow = static_cast<int64_t>(
            (static_cast<unsigned __int128>(step) * batchRows + g) % fileRows);
        scatterRow(args[index], arg, r,
                   static_cast<const char *>(field->data) + fileRow * rowBytes);
      }
    }
  }

  std::string describe() const override {
    return "file " + quoted(file->path()) + " (" +
           std::to_string(file->rows()) + " rows)";
  }

private:
  Status checkRange(const TensorSpec &arg, const AsdataField &field) const {
    int64_t perRow = field.rowElements();
    int64_t total = file->rows() * perRow;
    for (int64_t i = 0; i < total; ++i) {
      double v = loadElement(field.data, field.dtype, i);
      // A position the loss ignores (HuggingFace's -100 padding).
      if (arg.ignoreIndex && v == static_cast<double>(*arg.ignoreIndex))
        continue;
      if (v < 0 || v >= static_cast<double>(arg.classes)) {
        std::string where = "row " + std::to_string(i / perRow);
        if (perRow > 1)
          where += ", element " + std::to_string(i % perRow);
        return Error("data file " + quoted(file->path()) + ": " +
                     roleName(arg.role) + " " + quoted(arg.name) + " in " +
                     where + " is " + std::to_string(static_cast<int64_t>(v)) +
                     ", outside [0, " + std::to_string(arg.classes) +
                     ") for classes=" + std::to_string(arg.classes) +
                     (arg.ignoreIndex ? " and not the ignore_index=" +
                                            std::to_string(*arg.ignoreIndex)
                                      : std::string()));
      }
    }
    return Status::success();
  }

  const Manifest &manifest;
  std::unique_ptr<AsdataFile> file;
  RowRange rows;
  std::map<int, const AsdataField *> fields;
};

/// Reads the header of a mapped asdata file with bounds checks, so that a
/// corrupt length never reads past the end.
class HeaderReader {
public:
  HeaderReader(const std::string &path, const char *data, size_t size)
      : path(path), data(data), size(size) {}

  Status check(size_t bytes, const char *what) const {
    if (bytes > size - offset)
      return Error("data file " + quoted(path) + " is truncated: reading " +
                   what + " at byte " + std::to_string(offset) + " needs " +
                   std::to_string(bytes) + " bytes but the file has " +
                   std::to_string(size) + " bytes");
    return Status::success();
  }

  Status read(void *out, size_t bytes, const char *what) {
    if (Status s = check(bytes, what); !s)
      return s;
    if (bytes > 0)
      std::memcpy(out, data + offset, bytes);
    offset += bytes;
    return Status::success();
  }
  size_t position() const { return offset; }

private:
  const std::string &path;
  const char *data;
  size_t size;
  size_t offset = 0;
};

/// True when `path` is a regular file that can be read and its first bytes
/// are not the asdata magic (a file shorter than the magic included).
/// Anything else (a directory, a FIFO: opened without blocking) is left to
/// the asdata reader, which names it.
bool startsWithoutAsdataMagic(const std::string &path) {
  Expected<RegularFile> in = RegularFile::open(path, "");
  if (!in)
    return false;
  char magic[8];
  ssize_t got = ::pread(in->fd(), magic, sizeof magic, 0);
  return got >= 0 && (static_cast<size_t>(got) < sizeof magic ||
                      std::memcmp(magic, kAsdataMagic, 8) != 0);
}

} // namespace

double syntheticInputValue(uint64_t seed, const TensorSpec &input, int64_t step,
                           int64_t globalRow, int64_t rowElement) {
  PhiloxStream stream(batchKey("input/", input.name, step), seed);
  auto index =
      static_cast<uint64_t>(globalRow * input.rowElements() + rowElement);
  if (isIntegerDtype(input.dtype))
    return static_cast<double>(stream.uniformInt(index, input.classes));
  return stream.normal(index);
}

Expected<std::unique_ptr<BatchSource>>
makeSyntheticBatches(const Manifest &manifest, uint64_t seed, int rank,
                     int worldSize) {
  // Uniform tokens would give a language model nothing to learn.
  if (Expected<LanguageModelBatch> lm = findLanguageModelBatch(manifest))
    return makeSyntheticTextBatches(*lm, seed, rank, worldSize);
  auto source =
      std::make_unique<SyntheticBatches>(manifest, seed, rank, worldSize);
  if (Status s = source->prepare(); !s)
    return Error(s.message());
  return std::unique_ptr<BatchSource>(std::move(source));
}

const char *dataFormatName(DataFormat format) {
  switch (format) {
  case DataFormat::Auto:
    return "auto";
  case DataFormat::Asdata:
    return "asdata";
  case DataFormat::Tokens:
    return "tokens";
  }
  return "?";
}

std::optional<DataFormat> parseDataFormat(std::string_view text) {
  for (DataFormat format :
       {DataFormat::Auto, DataFormat::Asdata, DataFormat::Tokens})
    if (text == dataFormatName(format))
      return format;
  return std::nullopt;
}

Expected<std::unique_ptr<BatchSource>>
openDataFile(const std::string &path, const Manifest &manifest, int rank,
             int worldSize, DataFormat format, uint64_t seed) {
  // Why an Auto file without the magic is not read as tokens; empty when it
  // has the magic or could not be read (the asdata reader then says why).
  std::string notTokens;
  if (format == DataFormat::Auto) {
    format = DataFormat::Asdata;
    if (startsWithoutAsdataMagic(path)) {
      Expected<LanguageModelBatch> lm = findLanguageModelBatch(manifest);
      if (lm)
        format = DataFormat::Tokens;
      else
        notTokens = lm.message();
    }
  }
  if (format == DataFormat::Tokens)
    return openTokenFile(path, manifest, seed, rank, worldSize);

  Expected<std::unique_ptr<AsdataFile>> file = AsdataFile::open(path);
  if (!file)
    return Error(file.message() +
                 (notTokens.empty()
                      ? std::string()
                      : " (a file without that magic is read as a token "
                        "file, but " +
                            notTokens + ")"));
  auto source = std::make_unique<FileBatches>(manifest, std::move(*file), rank,
                                              worldSize);
  if (Status s = source->validate(); !s)
    return Error(s.message());
  return std::unique_ptr<BatchSource>(std::move(source));
}

int64_t AsdataField::rowElements() const {
  int64_t n = 1;
  for (int64_t d : rowShape)
    n *= d;
  return n;
}

Expected<std::unique_ptr<AsdataFile>>
AsdataFile::open(const std::string &path) {
  Expected<std::unique_ptr<MappedFile>> mapped =
      MappedFile::open(path, "data file");
  if (!mapped)
    return Error(mapped.message());
  std::unique_ptr<AsdataFile> file(new AsdataFile());
  file->filePath = path;
  file->mapping = std::move(*mapped);
  size_t mappingBytes = file->mapping->size();

  const char *bytes = file->mapping->data();
  HeaderReader in(path, bytes, mappingBytes);
  char magic[8];
  if (mappingBytes == 0)
    return Error("data file " + quoted(path) +
                 " is empty; an asdata file starts with the 8-byte magic "
                 "'ASDATA01'");
  if (mappingBytes < sizeof magic)
    return Error("data file " + quoted(path) + " is truncated: it has " +
                 std::to_string(mappingBytes) +
                 " bytes, fewer than the 8-byte magic 'ASDATA01'");
  (void)in.read(magic, sizeof magic, "the magic");
  if (std::memcmp(magic, kAsdataMagic, sizeof magic) != 0) {
    std::string found;
    for (char c : magic)
      found += (c >= 0x20 && c < 0x7f) ? c : '?';
    return Error("data file " + quoted(path) +
                 " is not an asdata file: it starts with " + quoted(found) +
                 " instead of 'ASDATA01'");
  }
  uint64_t rows;
  uint32_t numFields;
  if (Status s = in.read(&rows, sizeof rows, "the row count"); !s)
    return Error(s.message());
  if (Status s = in.read(&numFields, sizeof numFields, "the field count"); !s)
    return Error(s.message());
  if (rows == 0)
    return Error("data file " + quoted(path) +
                 " has 0 rows; it needs at least one");
  if (rows > (uint64_t(1) << 56))
    return Error("data file " + quoted(path) + " claims " +
                 std::to_string(rows) + " rows, more than any file can hold");

  std::vector<uint64_t> payloadBytes;
  for (uint32_t f = 0; f < numFields; ++f) {
    AsdataField field;
    uint32_t nameLength, dtype, rank;
    if (Status s =
            in.read(&nameLength, sizeof nameLength, "a field name length");
        !s)
      return Error(s.message());
    // Checked before resizing: a corrupt length must not allocate gigabytes.
    if (Status s = in.check(nameLength, "a field name"); !s)
      return Error(s.message());
    field.name.resize(nameLength);
    (void)in.read(field.name.data(), nameLength, "a field name");
    if (Status s = in.read(&dtype, sizeof dtype, "a field dtype"); !s)
      return Error(s.message());
    if (!isValidDtype(static_cast<int32_t>(dtype)))
      return Error("data file " + quoted(path) + ": field " +
                   quoted(field.name) + " has dtype code " +
                   std::to_string(dtype) + ", not an asrt_dtype (0.." +
                   std::to_string(ASRT_DTYPE_U16) + ")");
    field.dtype = static_cast<asrt_dtype>(dtype);
    if (Status s = in.read(&rank, sizeof rank, "a field rank"); !s)
      return Error(s.message());
    // Elements per row, capped so that rows * elements * 8 cannot overflow.
    unsigned __int128 elements = 1;
    for (uint32_t d = 0; d < rank; ++d) {
      uint64_t dim;
      if (Status s = in.read(&dim, sizeof dim, "a field dimension"); !s)
        return Error(s.message());
      elements *= dim;
      if (elements * rows > (uint64_t(1) << 60))
        return Error("data file " + quoted(path) + ": field " +
                     quoted(field.name) + " is larger than any file can hold");
      field.rowShape.push_back(static_cast<int64_t>(dim));
    }
    payloadBytes.push_back(static_cast<uint64_t>(elements) * rows *
                           static_cast<uint64_t>(dtypeSize(field.dtype)));
    file->fieldList.push_back(std::move(field));
  }

  uint64_t offset = in.position();
  for (size_t f = 0; f < file->fieldList.size(); ++f) {
    if (payloadBytes[f] > mappingBytes - offset)
      return Error("data file " + quoted(path) + " is truncated: field " +
                   quoted(file->fieldList[f].name) + " needs " +
                   std::to_string(payloadBytes[f]) + " bytes at byte " +
                   std::to_string(offset) + " but the file has " +
                   std::to_string(mappingBytes) + " bytes");
    file->fieldList[f].data = bytes + offset;
    offset += payloadBytes[f];
  }
  if (offset != mappingBytes)
    return Error("data file " + quoted(path) + " has " +
                 std::to_string(mappingBytes - offset) +
                 " bytes after the payload of its " +
                 std::to_string(file->fieldList.size()) +
                 " fields; the header does not describe the file");
  file->numRows = static_cast<int64_t>(rows);
  return file;
}

const AsdataField *AsdataFile::find(std::string_view name) const {
  for (const AsdataField &field : fieldList)
    if (field.name == name)
      return &field;
  return nullptr;
}

Status writeAsdataFile(const std::string &path, int64_t rows,
                       const std::vector<AsdataField> &fields) {
  if (rows < 0)
    return Error("cannot write " + quoted(path) + ": row count " +
                 std::to_string(rows) + " is negative");
  std::FILE *out = std::fopen(path.c_str(), "wb");
  if (!out)
    return Error("cannot create data file " + quoted(path) + ": " +
                 std::strerror(errno));
  bool ok = true;
  auto put = [&](const void *data, size_t bytes) {
    ok = ok && (bytes == 0 || std::fwrite(data, 1, bytes, out) == bytes);
  };
  // The format is little-endian, as is every host the runtime targets.
  put(kAsdataMagic, 8);
  auto rowCount = static_cast<uint64_t>(rows);
  put(&rowCount, sizeof rowCount);
  auto numFields = static_cast<uint32_t>(fields.size());
  put(&numFields, sizeof numFields);
  for (const AsdataField &field : fields) {
    auto nameLength = static_cast<uint32_t>(field.name.size());
    put(&nameLength, sizeof nameLength);
    put(field.name.data(), field.name.size());
    auto dtype = static_cast<uint32_t>(field.dtype);
    put(&dtype, sizeof dtype);
    auto rank = static_cast<uint32_t>(field.rowShape.size());
    put(&rank, sizeof rank);
    for (int64_t d : field.rowShape) {
      auto dim = static_cast<uint64_t>(d);
      put(&dim, sizeof dim);
    }
  }
  for (const AsdataField &field : fields)
    put(field.data, static_cast<size_t>(rows * field.rowElements() *
                                        dtypeSize(field.dtype)));
  if (std::fclose(out) != 0)
    ok = false;
  if (!ok)
    return Error("cannot write data file " + quoted(path) + ": " +
                 std::strerror(errno));
  return Status::success();
}

} // namespace autoshard::rt
