// Language-model batches: token files and synthetic Markov-chain text.
#include "data/TokenData.h"
#include "core/Dtype.h"
#include "data/Philox.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

namespace autoshard::rt {

namespace {

std::string quoted(const std::string &text) { return "'" + text + "'"; }

std::string namesOf(const std::vector<const TensorSpec *> &specs) {
  std::string out;
  for (const TensorSpec *spec : specs)
    out += (out.empty() ? "" : ", ") + spec->name;
  return out;
}

std::string countOf(const std::vector<const TensorSpec *> &specs,
                    const char *noun) {
  std::string out = std::to_string(specs.size()) + " " + noun +
                    (specs.size() == 1 ? "" : "s");
  if (!specs.empty())
    out += " (" + namesOf(specs) + ")";
  return out;
}

/// `layout` names what must be [B, T]: the input and label, or the input
/// alone.
Status checkTokenTensor(const TensorSpec &spec, const char *layout) {
  if (spec.dtype != ASRT_DTYPE_I32)
    return Error(spec.describe() + " is " + dtypeName(spec.dtype) +
                 "; token ids are i32");
  if (spec.shape.size() != 2 || spec.batchDim != 0)
    return Error(spec.describe() + " has shape " + formatShape(spec.shape) +
                 " and batch_dim " + std::to_string(spec.batchDim) +
                 "; a language model's " + layout + " [B, T] with batch_dim 0");
  return Status::success();
}

/// Copies T tokens starting at `first` into an i32 row; the file's uint16
/// ids widen exactly.
void copyWindow(const TokenFile &file, int64_t first, int64_t count,
                int32_t *out) {
  for (int64_t t = 0; t < count; ++t)
    out[t] = file.token(first + t);
}

/// The label's buffer in `args`; null when the model shifts its own labels.
int32_t *labelBuffer(const LanguageModelBatch &batch, void *const *args) {
  return batch.modelShiftsLabels()
             ? nullptr
             : static_cast<int32_t *>(args[batch.label->index]);
}

class SyntheticTextBatches : public BatchSource {
public:
  SyntheticTextBatches(const LanguageModelBatch &batch, uint64_t seed, int rank,
                       int worldSize)
      : batch(batch), seed(seed),
        rows(localRowRange(batch.input->globalRows, rank, worldSize)),
        next(syntheticNextTokens(seed, batch.vocab())) {}

  void fill(int64_t step, void *const *args) override {
    int64_t t = batch.seqLen();
    std::vector<int32_t> tokens(static_cast<size_t>(t + 1));
    auto *input = static_cast<int32_t *>(args[batch.input->index]);
    int32_t *label = labelBuffer(batch, args);
    for (int64_t r = 0; r < rows.count; ++r) {
      syntheticTokenRow(seed, next, step, rows.first + r, t, tokens.data());
      std::memcpy(input + r * t, tokens.data(), t * sizeof(int32_t));
      if (label)
        std::memcpy(label + r * t, tokens.data() + 1, t * sizeof(int32_t));
    }
  }

  std::string describe() const override {
    return "synthetic text (seed " + std::to_string(seed) + ", vocabulary " +
           std::to_string(batch.vocab()) + ")";
  }

private:
  LanguageModelBatch batch;
  uint64_t seed;
  RowRange rows;
  std::vector<int32_t> next;
};

class TokenFileBatches : public BatchSource {
public:
  TokenFileBatches(const LanguageModelBatch &batch,
                   std::unique_ptr<TokenFile> file, uint64_t seed, int rank,
                   int worldSize)
      : batch(batch), file(std::move(file)), seed(seed),
        rows(localRowRange(batch.input->globalRows, rank, worldSize)) {}

  void fill(int64_t step, void *const *args) override {
    int64_t t = batch.seqLen();
    int64_t windows = file->size() - t;
    auto *input = static_cast<int32_t *>(args[batch.input->index]);
    int32_t *label = labelBuffer(batch, args);
    for (int64_t r = 0; r < rows.count; ++r) {
      int64_t o = tokenWindowOffset(seed, step, rows.first + r, windows);
      copyWindow(*file, o, t, input + r * t);
      if (label)
        copyWindow(*file, o + 1, t, label + r * t);
    }
  }

  std::string describe() const override {
    return "token file " + quoted(file->path()) + " (" +
           std::to_string(file->size()) + " tokens)";
  }

private:
  LanguageModelBatch batch;
  std::unique_ptr<TokenFile> file;
  uint64_t seed;
  RowRange rows;
};

} // namespace

Expected<LanguageModelBatch> findLanguageModelBatch(const Manifest &manifest) {
  std::vector<const TensorSpec *> inputs, labels;
  for (const TensorSpec &arg : manifest.args) {
    if (arg.role == Role::Input)
      inputs.push_back(&arg);
    else if (arg.role == Role::Label)
      labels.push_back(&arg);
  }
  if (inputs.size() != 1 || labels.size() > 1)
    return Error("the step's batch has " + countOf(inputs, "input") + " and " +
                 countOf(labels, "label") +
                 "; a language model's batch is one input and one label, or "
                 "one token input alone that the model shifts itself");
  LanguageModelBatch batch{inputs[0], labels.empty() ? nullptr : labels[0]};
  const char *layout = batch.modelShiftsLabels() ? "token input alone is"
                                                 : "input and label are";
  for (const TensorSpec *spec : {batch.input, batch.label}) {
    if (!spec)
      continue;
    if (Status s = checkTokenTensor(*spec, layout); !s)
      return Error(s.message());
  }
  if (!batch.modelShiftsLabels() && batch.label->shape != batch.input->shape)
    return Error(batch.label->describe() + " has shape " +
                 formatShape(batch.label->shape) + " but " +
                 batch.input->describe() + " has shape " +
                 formatShape(batch.input->shape) +
                 "; the label holds the next token at every input position");
  if (batch.input->classes == 0)
    return Error(batch.input->describe() +
                 " has no classes=V; a language model's input needs its "
                 "vocabulary size");
  if (!batch.modelShiftsLabels() &&
      batch.input->classes != batch.label->classes)
    return Error(batch.input->describe() +
                 " has classes=" + std::to_string(batch.input->classes) +
                 " but " + batch.label->describe() +
                 " has classes=" + std::to_string(batch.label->classes) +
                 "; input and label share one vocabulary");
  return batch;
}

std::vector<int32_t> syntheticNextTokens(uint64_t seed, int64_t vocab) {
  std::vector<int32_t> next(static_cast<size_t>(vocab));
  std::iota(next.begin(), next.end(), 0);
  // Fisher-Yates, drawing the swap partner of position i from word i.
  PhiloxStream stream(fnv1a64("text/next"), seed);
  for (int64_t i = vocab - 1; i > 0; --i)
    std::swap(next[i],
              next[stream.uniformInt(static_cast<uint64_t>(i), i + 1)]);
  return next;
}

void syntheticTokenRow(uint64_t seed, const std::vector<int32_t> &next,
                       int64_t step, int64_t globalRow, int64_t seqLen,
                       int32_t *tokens) {
  auto vocab = static_cast<int64_t>(next.size());
  PhiloxStream stream(
      fnv1a64(static_cast<uint64_t>(step), fnv1a64("text/tokens")), seed);
  // Token t of row g owns words 2 (g (T+1) + t) (follow or not) and the
  // one after it (the uniform alternative).
  auto base =
      static_cast<uint64_t>(globalRow) * static_cast<uint64_t>(seqLen + 1) * 2;
  for (int64_t t = 0; t <= seqLen; ++t) {
    uint64_t word = base + 2 * static_cast<uint64_t>(t);
    int64_t uniform = stream.uniformInt(word + 1, vocab);
    bool follows = t > 0 && stream.uniform(word) < kSyntheticFollowProbability;
    tokens[t] = follows ? next[tokens[t - 1]] : static_cast<int32_t>(uniform);
  }
}

std::unique_ptr<BatchSource>
makeSyntheticTextBatches(const LanguageModelBatch &batch, uint64_t seed,
                         int rank, int worldSize) {
  return std::make_unique<SyntheticTextBatches>(batch, seed, rank, worldSize);
}

Expected<std::unique_ptr<TokenFile>> TokenFile::open(const std::string &path) {
  Expected<std::unique_ptr<MappedFile>> mapped =
      MappedFile::open(path, "token file");
  if (!mapped)
    return Error(mapped.message());
  if ((*mapped)->size() % 2 != 0)
    return Error("token file " + quoted(path) + " has " +
                 std::to_string((*mapped)->size()) +
                 " bytes, an odd number; a token file holds 2-byte "
                 "little-endian (uint16) token ids");
  std::unique_ptr<TokenFile> file(new TokenFile());
  file->numTokens = static_cast<int64_t>((*mapped)->size() / 2);
  file->mapping = std::move(*mapped);
  return file;
}

uint16_t TokenFile::token(int64_t i) const {
  // Little-endian on disk, as on every host the runtime targets.
  uint16_t id;
  std::memcpy(&id, mapping->data() + 2 * i, sizeof id);
  return id;
}

Status TokenFile::checkRange(int64_t vocab, const std::string &forWhat) const {
  if (vocab > UINT16_MAX)
    return Status::success();
  for (int64_t i = 0; i < numTokens; ++i) {
    uint16_t id = token(i);
    if (id >= vocab)
      return Error("token file " + quoted(path()) + ": the token at offset " +
                   std::to_string(i) + " is " + std::to_string(id) +
                   ", outside [0, " + std::to_string(vocab) +
                   ") for classes=" + std::to_string(vocab) + " of " + forWhat);
  }
  return Status::success();
}

Status TokenFile::checkWidth() const {
  int64_t probe = std::min(numTokens, kWidthProbeTokens);
  if (probe < kMinWidthProbeTokens)
    return Status::success();
  bool evenNonZero = false, oddNonZero = false;
  for (int64_t i = 0; i < probe; ++i)
    if (token(i) != 0)
      (i % 2 == 0 ? evenNonZero : oddNonZero) = true;
  if (evenNonZero == oddNonZero)
    return Status::success();
  return Error("token file " + quoted(path()) +
               " does not hold uint16 token ids: " + "among its first " +
               std::to_string(probe) + " 2-byte values, every one at an " +
               (evenNonZero ? "odd" : "even") + " offset is 0, which is how " +
               (evenNonZero ? "little-endian 32- or 64-bit integers"
                            : "32-bit floats or big-endian integers") +
               " look; write the ids as little-endian uint16 (numpy: "
               "ids.astype(np.uint16).tofile(path))");
}

int64_t tokenWindowOffset(uint64_t seed, int64_t step, int64_t globalRow,
                          int64_t windows) {
  PhiloxStream stream(
      fnv1a64(static_cast<uint64_t>(step), fnv1a64("tokens/window")), seed);
  // 64 random bits: the modulo bias is at most windows / 2^64.
  auto g = static_cast<uint64_t>(globalRow);
  uint64_t bits = static_cast<uint64_t>(stream.word(2 * g)) |
                  static_cast<uint64_t>(stream.word(2 * g + 1)) << 32;
  return static_cast<int64_t>(bits % static_cast<uint64_t>(windows));
}

Expected<std::unique_ptr<BatchSource>> openTokenFile(const std::string &path,
                                                     const Manifest &manifest,
                                                     uint64_t seed, int rank,
                                                     int worldSize) {
  Expected<LanguageModelBatch> batch = findLanguageModelBatch(manifest);
  if (!batch)
    return Error("token file " + quoted(path) + " cannot feed step '" +
                 manifest.step + "': " + batch.message());
  Expected<std::unique_ptr<TokenFile>> file = TokenFile::open(path);
  if (!file)
    return Error(file.message());
  int64_t t = batch->seqLen();
  if ((*file)->size() == 0)
    return Error(
        "token file " + quoted(path) + " is empty; it needs at least T + 1 = " +
        std::to_string(t + 1) + " uint16 token ids (T = " + std::to_string(t) +
        ", the sequence length of " + batch->input->describe() + ")");
  if ((*file)->size() < t + 1)
    return Error("token file " + quoted(path) + " holds " +
                 std::to_string((*file)->size()) +
                 " tokens, fewer than the T + 1 = " + std::to_string(t + 1) +
                 " that one window needs (T = " + std::to_string(t) +
                 ", the sequence length of " + batch->input->describe() + ")");
  if (Status s = (*file)->checkWidth(); !s)
    return Error(s.message());
  if (Status s = (*file)->checkRange(batch->vocab(), batch->input->describe());
      !s)
    return Error(s.message());
  return std::unique_ptr<BatchSource>(std::make_unique<TokenFileBatches>(
      *batch, std::move(*file), seed, rank, worldSize));
}

} // namespace autoshard::rt
