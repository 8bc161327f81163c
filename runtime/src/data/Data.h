// Batches for inputs and labels: synthetic, or read from a data file.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Expected.h"
#include "io/Manifest.h"
#include "io/MappedFile.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autoshard::rt {

/// Rows [first, first + count) of a global batch of `globalRows` rows that
/// rank `rank` of `worldSize` holds: [r*G/N, (r+1)*G/N) (docs/RuntimeABI.md).
struct RowRange {
  int64_t first = 0;
  int64_t count = 0;
};
RowRange localRowRange(int64_t globalRows, int rank, int worldSize);

/// Fills the input and label arguments of each step. A source refers to the
/// Manifest it was made for, which must outlive it.
class BatchSource {
public:
  virtual ~BatchSource() = default;
  /// Writes this rank's rows of step `step` (0-based) into the buffer of
  /// every input and label argument; `args` is indexed like the manifest's
  /// arguments, and other arguments are not touched.
  virtual void fill(int64_t step, void *const *args) = 0;
  /// Where the batches come from, for the driver's banner.
  virtual std::string describe() const = 0;
};

/// Synthetic batches (docs/RuntimeABI.md, "Batches"). A language-model step
/// (findLanguageModelBatch in data/TokenData.h) gets synthetic text, a
/// learnable Markov chain over its vocabulary. Otherwise float inputs are
/// standard normal, integer inputs uniform in [0, classes), each element a
/// pure function of (seed, step, global row, argument), and labels are the
/// argmax of a fixed random linear teacher over the row's concatenated float
/// inputs (uniform in [0, classes) when the step has no float input). Fails
/// for an integer input without classes=, or a teacher too large to hold.
Expected<std::unique_ptr<BatchSource>>
makeSyntheticBatches(const Manifest &manifest, uint64_t seed, int rank,
                     int worldSize);

/// How --data reads its file.
enum class DataFormat {
  /// asdata when the file starts with the asdata magic, else tokens.
  Auto,
  Asdata,
  /// A nanoGPT-style token file (data/TokenData.h).
  Tokens,
};
/// "auto", "asdata", "tokens".
const char *dataFormatName(DataFormat format);
/// The format dataFormatName names `text`; nullopt for any other word.
std::optional<DataFormat> parseDataFormat(std::string_view text);

/// Batches from a data file. Everything is checked here, before the first
/// step. For asdata: the header, the size, a field of the right name, dtype
/// and per-row shape for every input and label, and every label (and every
/// value of an integer input with classes=) inside [0, classes). For token
/// files: see openTokenFile; `seed` picks their random windows. In Auto
/// format a file without the asdata magic is a token file when the step is
/// a language model, and otherwise fails as a bad asdata file with a note
/// saying why it cannot be a token file.
Expected<std::unique_ptr<BatchSource>>
openDataFile(const std::string &path, const Manifest &manifest, int rank,
             int worldSize, DataFormat format = DataFormat::Auto,
             uint64_t seed = 0);

/// Element `rowElement` of global row `globalRow` of a synthetic input at
/// step `step`, before conversion to its dtype. Exposed for tests.
double syntheticInputValue(uint64_t seed, const TensorSpec &input, int64_t step,
                           int64_t globalRow, int64_t rowElement);

// ---- The asdata file format ---------------------------------------------

inline constexpr char kAsdataMagic[] = "ASDATA01";

/// One field: its per-row shape and, for a file being written or read, its
/// payload of rows * prod(rowShape) elements.
struct AsdataField {
  std::string name;
  asrt_dtype dtype = ASRT_DTYPE_F32;
  std::vector<int64_t> rowShape;
  const void *data = nullptr;

  int64_t rowElements() const;
};

/// An asdata file mapped into memory (read-only; ranks on a node share the
/// pages). The fields' `data` point into the mapping.
class AsdataFile {
public:
  /// Opens and validates the header and the total size. Errors name the
  /// file and what is wrong: missing, bad magic, truncated, an unknown
  /// dtype, zero rows, bytes after the payload.
  static Expected<std::unique_ptr<AsdataFile>> open(const std::string &path);
  AsdataFile(const AsdataFile &) = delete;
  AsdataFile &operator=(const AsdataFile &) = delete;

  const std::string &path() const { return filePath; }
  int64_t rows() const { return numRows; }
  const std::vector<AsdataField> &fields() const { return fieldList; }
  /// The field named `name`, or null.
  const AsdataField *find(std::string_view name) const;

private:
  AsdataFile() = default;
  std::string filePath;
  std::unique_ptr<MappedFile> mapping;
  int64_t numRows = 0;
  std::vector<AsdataField> fieldList;
};

/// Writes an asdata file of `rows` rows; every field's `data` holds
/// rows * prod(rowShape) elements.
Status writeAsdataFile(const std::string &path, int64_t rows,
                       const std::vector<AsdataField> &fields);

} // namespace autoshard::rt
