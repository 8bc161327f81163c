// Language-model batches: token files and synthetic Markov-chain text.
#pragma once

#include "data/Data.h"
#include "core/Expected.h"
#include "io/Manifest.h"
#include "io/MappedFile.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

/// The batch of a language-model step, one of two forms:
///  - one input and one label, both i32 [B, T] with batch_dim 0 and the
///    same classes=V; row b of the label holds the tokens that follow row b
///    of the input;
///  - one i32 [B, T] input with batch_dim 0 and classes=V alone: the model
///    computes its loss with labels = the input and shifts them itself
///    (HuggingFace's labels=input_ids), so the last position of each row
///    predicts nothing. `label` is null.
/// Both read the same tokens into the input.
struct LanguageModelBatch {
  const TensorSpec *input = nullptr;
  /// Null when the model shifts its own labels.
  const TensorSpec *label = nullptr;

  bool modelShiftsLabels() const { return label == nullptr; }
  int64_t seqLen() const { return input->shape[1]; }
  int64_t vocab() const { return input->classes; }
};

/// The step's batch as a language model's, or an error naming the first
/// rule it breaks (counts of inputs and labels, dtype, shape, classes=).
Expected<LanguageModelBatch> findLanguageModelBatch(const Manifest &manifest);

// ---- Synthetic text ------------------------------------------------------

/// Probability that a synthetic token is its predecessor's successor.
inline constexpr double kSyntheticFollowProbability = 0.9;

/// The successor of each token in synthetic text: a permutation of [0, V)
/// that depends only on (seed, V).
std::vector<int32_t> syntheticNextTokens(uint64_t seed, int64_t vocab);

/// Writes the T + 1 tokens of global row `globalRow` of step `step` into
/// `tokens`: the first uniform in [0, V), each later one next[previous]
/// with probability kSyntheticFollowProbability, else uniform. A pure
/// function of (seed, step, globalRow), so any split of the batch over
/// ranks sees the same rows. `next` is syntheticNextTokens(seed, V).
void syntheticTokenRow(uint64_t seed, const std::vector<int32_t> &next,
                       int64_t step, int64_t globalRow, int64_t seqLen,
                       int32_t *tokens);

/// Synthetic text for a language-model step: input = tokens [0, T) of
/// each row, label (when the step has one) = tokens [1, T].
std::unique_ptr<BatchSource>
makeSyntheticTextBatches(const LanguageModelBatch &batch, uint64_t seed,
                         int rank, int worldSize);

// ---- Token files ---------------------------------------------------------

/// A nanoGPT-style token file: raw little-endian uint16 token ids, mapped
/// read-only.
class TokenFile {
public:
  /// Maps the file and checks that its size is even.
  static Expected<std::unique_ptr<TokenFile>> open(const std::string &path);

  const std::string &path() const { return mapping->path(); }
  int64_t size() const { return numTokens; }
  uint16_t token(int64_t i) const;
  /// Checks every token id against `vocab` once; the error names the first
  /// offending offset (in tokens) and its value.
  Status checkRange(int64_t vocab, const std::string &forWhat) const;
  /// Recognises a file of 4- or 8-byte values written where uint16 ids
  /// belong (numpy's default int64 or int32, float32 ids): among the first
  /// kWidthProbeTokens ids, those at odd offsets are all zero while some at
  /// even offsets are not (little-endian integers), or the other way round
  /// (floats, big-endian integers). Such files would otherwise pass the
  /// range check and train on every other "token" being 0. Files shorter
  /// than kMinWidthProbeTokens ids are not judged.
  Status checkWidth() const;
  static constexpr int64_t kWidthProbeTokens = 1 << 16;
  static constexpr int64_t kMinWidthProbeTokens = 64;

private:
  TokenFile() = default;
  std::unique_ptr<MappedFile> mapping;
  int64_t numTokens = 0;
};

/// The offset of global row `globalRow`'s window at step `step`: a
/// Philox-keyed hash of (seed, step, globalRow), reduced modulo `windows`
/// (the number of possible window starts, ntokens - T).
int64_t tokenWindowOffset(uint64_t seed, int64_t step, int64_t globalRow,
                          int64_t windows);

/// Batches of random windows from a token file: row r of step s reads
/// input = tokens[o, o + T) and, when the step has a label,
/// label = tokens[o + 1, o + T + 1), with
/// o = tokenWindowOffset(seed, s, r, ntokens - T) in both forms, so that
/// the input rows are the same whether or not the model shifts its own
/// labels (a window is T + 1 tokens either way). Everything is checked
/// here, before the first step: the manifest's batch, the file's size
/// (even, at least T + 1 tokens) and every token id (< V).
Expected<std::unique_ptr<BatchSource>> openTokenFile(const std::string &path,
                                                     const Manifest &manifest,
                                                     uint64_t seed, int rank,
                                                     int worldSize);

} // namespace autoshard::rt
