// Language-model batches: the batch rules, synthetic text, token files.
#include "data/TokenData.h"
#include "data/Data.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using namespace autoshard::rt;

namespace {

constexpr int64_t kVocab = 16, kSeq = 8, kGlobal = 8;

const char *const kInputRecord =
    "arg 1 input idx i32 {L}x8 batch_dim=0 global=8 classes=16";
const char *const kLabelRecord =
    "arg 2 label targets i32 {L}x8 batch_dim=0 global=8 classes=16";

/// A bigram language model's manifest for `world` ranks whose batch is
/// `records` ("{L}" is the local rows).
std::string manifestWithBatch(int world,
                              const std::vector<std::string> &records) {
  std::string l = std::to_string(kGlobal / world);
  std::string batch;
  for (std::string text : records) {
    for (size_t at; (at = text.find("{L}")) != std::string::npos;)
      text.replace(at, 3, l);
    batch += text + "\n";
  }
  return "autoshard-manifest 1\nabi 6\nstep lm\nstrategy ddp\ngrid " +
         std::to_string(world) +
         "\n"
         "arg 0 param wte f32 16x16 init=normal:0.02\n" +
         batch +
         "result 0 param wte f32 16x16 updates=0\n"
         "result 1 loss loss f32 scalar\nend\n";
}

/// The manifest of a step with an input and a label; `input` and `label`
/// replace their records when given.
std::string lmManifest(int world, std::string input = "",
                       std::string label = "") {
  return manifestWithBatch(world, {input.empty() ? kInputRecord : input,
                                   label.empty() ? kLabelRecord : label});
}

/// The manifest of a step whose model shifts its labels itself (HF's
/// labels=input_ids): its batch is the input alone, `input` when given.
std::string shiftingLmManifest(int world, std::string input = "") {
  return manifestWithBatch(world, {input.empty() ? kInputRecord : input});
}

Manifest parse(const std::string &text) {
  Expected<Manifest> m = parseManifest(text);
  EXPECT_TRUE(m.ok()) << m.message() << "\n" << text;
  return m.ok() ? *m : Manifest();
}

/// Buffers for the input (arg 1) and label (arg 2) of lmManifest.
struct LmBuffers {
  explicit LmBuffers(int64_t rows)
      : input(static_cast<size_t>(rows * kSeq)),
        label(static_cast<size_t>(rows * kSeq)),
        pointers{nullptr, input.data(), label.data()} {}
  std::vector<int32_t> input, label;
  std::vector<void *> pointers;
};

/// The buffer of the input (arg 1) of shiftingLmManifest; the manifest has
/// no arg 2, so a source that wrote a label would write through null.
struct InputBuffer {
  explicit InputBuffer(int64_t rows)
      : input(static_cast<size_t>(rows * kSeq)),
        pointers{nullptr, input.data(), nullptr} {}
  std::vector<int32_t> input;
  std::vector<void *> pointers;
};

std::string lmError(const std::string &text) {
  Expected<LanguageModelBatch> batch = findLanguageModelBatch(parse(text));
  EXPECT_FALSE(batch.ok());
  return batch.ok() ? std::string() : batch.message();
}

TEST(LanguageModelBatchTest, FindsInputAndLabel) {
  Manifest m = parse(lmManifest(2));
  Expected<LanguageModelBatch> batch = findLanguageModelBatch(m);
  ASSERT_TRUE(batch.ok()) << batch.message();
  EXPECT_EQ(batch->input, &m.args[1]);
  EXPECT_EQ(batch->label, &m.args[2]);
  EXPECT_EQ(batch->seqLen(), kSeq);
  EXPECT_EQ(batch->vocab(), kVocab);
}

TEST(LanguageModelBatchTest, NamesTheRuleABatchBreaks) {
  EXPECT_EQ(
      lmError(lmManifest(1, "",
                         "arg 2 input more i32 {L}x8 batch_dim=0 global=8 "
                         "classes=16")),
      "the step's batch has 2 inputs (idx, more) and 0 labels; a language "
      "model's batch is one input and one label, or one token input alone "
      "that the model shifts itself");
  EXPECT_EQ(lmError(manifestWithBatch(1, {"arg 1 label targets i32 {L}x8 "
                                          "batch_dim=0 global=8 classes=16"})),
            "the step's batch has 0 inputs and 1 label (targets); a language "
            "model's batch is one input and one label, or one token input "
            "alone that the model shifts itself");
  EXPECT_EQ(lmError(manifestWithBatch(
                1, {kInputRecord, kLabelRecord,
                    "arg 3 label more i32 {L}x8 batch_dim=0 global=8 "
                    "classes=16"})),
            "the step's batch has 1 input (idx) and 2 labels (targets, "
            "more); a language model's batch is one input and one label, "
            "or one token input alone that the model shifts itself");
  EXPECT_EQ(lmError(lmManifest(1, "arg 1 input idx f32 {L}x8 batch_dim=0 "
                                  "global=8")),
            "arg 1 (input idx) is f32; token ids are i32");
  EXPECT_EQ(lmError(lmManifest(1, "",
                               "arg 2 label targets i64 {L}x8 "
                               "batch_dim=0 global=8 classes=16")),
            "arg 2 (label targets) is i64; token ids are i32");
  EXPECT_EQ(lmError(lmManifest(1, "arg 1 input idx i32 {L} batch_dim=0 "
                                  "global=8 classes=16")),
            "arg 1 (input idx) has shape 8 and batch_dim 0; a language "
            "model's input and label are [B, T] with batch_dim 0");
  EXPECT_EQ(lmError(lmManifest(1,
                               "arg 1 input idx i32 8x{L} batch_dim=1 "
                               "global=8 classes=16",
                               "arg 2 label targets i32 8x{L} batch_dim=1 "
                               "global=8 classes=16")),
            "arg 1 (input idx) has shape 8x8 and batch_dim 1; a language "
            "model's input and label are [B, T] with batch_dim 0");
  EXPECT_EQ(lmError(lmManifest(1, "",
                               "arg 2 label targets i32 {L}x7 "
                               "batch_dim=0 global=8 classes=16")),
            "arg 2 (label targets) has shape 8x7 but arg 1 (input idx) has "
            "shape 8x8; the label holds the next token at every input "
            "position");
  EXPECT_EQ(lmError(lmManifest(1, "arg 1 input idx i32 {L}x8 batch_dim=0 "
                                  "global=8")),
            "arg 1 (input idx) has no classes=V; a language model's input "
            "needs its vocabulary size");
  EXPECT_EQ(lmError(lmManifest(1, "",
                               "arg 2 label targets i32 {L}x8 "
                               "batch_dim=0 global=8 classes=17")),
            "arg 1 (input idx) has classes=16 but arg 2 (label targets) has "
            "classes=17; input and label share one vocabulary");
}

TEST(LanguageModelBatchTest, FindsATokenInputAlone) {
  Manifest m = parse(shiftingLmManifest(2));
  Expected<LanguageModelBatch> batch = findLanguageModelBatch(m);
  ASSERT_TRUE(batch.ok()) << batch.message();
  EXPECT_EQ(batch->input, &m.args[1]);
  EXPECT_EQ(batch->label, nullptr);
  EXPECT_TRUE(batch->modelShiftsLabels());
  EXPECT_EQ(batch->seqLen(), kSeq);
  EXPECT_EQ(batch->vocab(), kVocab);
  EXPECT_FALSE(
      findLanguageModelBatch(parse(lmManifest(2)))->modelShiftsLabels());
}

TEST(LanguageModelBatchTest, NamesTheRuleATokenInputAloneBreaks) {
  EXPECT_EQ(lmError(shiftingLmManifest(1, "arg 1 input x f32 {L}x8 "
                                          "batch_dim=0 global=8")),
            "arg 1 (input x) is f32; token ids are i32");
  EXPECT_EQ(lmError(shiftingLmManifest(1, "arg 1 input idx i32 {L} "
                                          "batch_dim=0 global=8 classes=16")),
            "arg 1 (input idx) has shape 8 and batch_dim 0; a language "
            "model's token input alone is [B, T] with batch_dim 0");
  EXPECT_EQ(lmError(shiftingLmManifest(1, "arg 1 input idx i32 {L}x8x2 "
                                          "batch_dim=0 global=8 classes=16")),
            "arg 1 (input idx) has shape 8x8x2 and batch_dim 0; a language "
            "model's token input alone is [B, T] with batch_dim 0");
  EXPECT_EQ(lmError(shiftingLmManifest(1, "arg 1 input idx i32 {L}x8 "
                                          "batch_dim=0 global=8")),
            "arg 1 (input idx) has no classes=V; a language model's input "
            "needs its vocabulary size");
}

// ---- Synthetic text --------------------------------------------------------

TEST(SyntheticTextTest, NextIsASeededPermutation) {
  std::vector<int32_t> next = syntheticNextTokens(3, kVocab);
  std::vector<int32_t> sorted = next;
  std::sort(sorted.begin(), sorted.end());
  for (int32_t v = 0; v < kVocab; ++v)
    EXPECT_EQ(sorted[v], v);
  EXPECT_EQ(next, syntheticNextTokens(3, kVocab));
  EXPECT_NE(next, syntheticNextTokens(4, kVocab));
  int fixed = 0;
  for (int32_t v = 0; v < kVocab; ++v)
    fixed += next[v] == v;
  EXPECT_LT(fixed, kVocab / 2) << "hardly shuffled";
}

TEST(SyntheticTextTest, RowsDoNotDependOnTheSplit) {
  Manifest whole = parse(lmManifest(1));
  LmBuffers reference(kGlobal);
  auto one = makeSyntheticBatches(whole, 7, 0, 1);
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_EQ((*one)->describe(), "synthetic text (seed 7, vocabulary 16)");
  for (int64_t step : {0, 5}) {
    (*one)->fill(step, reference.pointers.data());
    for (int world : {2, 4}) {
      Manifest m = parse(lmManifest(world));
      int64_t rows = kGlobal / world;
      for (int rank = 0; rank < world; ++rank) {
        LmBuffers local(rows);
        auto source = makeSyntheticBatches(m, 7, rank, world);
        ASSERT_TRUE(source.ok()) << source.message();
        (*source)->fill(step, local.pointers.data());
        for (int64_t i = 0; i < rows * kSeq; ++i) {
          ASSERT_EQ(local.input[i], reference.input[rank * rows * kSeq + i])
              << "step " << step << " world " << world << " rank " << rank;
          ASSERT_EQ(local.label[i], reference.label[rank * rows * kSeq + i]);
        }
      }
    }
  }
}

TEST(SyntheticTextTest, FollowsTheChainAndShiftsTheLabel) {
  Manifest m = parse(lmManifest(1));
  const uint64_t seed = 11;
  auto source = makeSyntheticBatches(m, seed, 0, 1);
  ASSERT_TRUE(source.ok()) << source.message();
  std::vector<int32_t> next = syntheticNextTokens(seed, kVocab);
  LmBuffers b(kGlobal);
  int64_t transitions = 0, follows = 0;
  std::set<int32_t> firstTokens;
  for (int64_t step = 0; step < 50; ++step) {
    (*source)->fill(step, b.pointers.data());
    for (int64_t r = 0; r < kGlobal; ++r) {
      const int32_t *in = &b.input[r * kSeq];
      const int32_t *out = &b.label[r * kSeq];
      firstTokens.insert(in[0]);
      for (int64_t t = 0; t < kSeq; ++t) {
        ASSERT_GE(in[t], 0);
        ASSERT_LT(in[t], kVocab);
        ASSERT_GE(out[t], 0);
        ASSERT_LT(out[t], kVocab);
        // The label is the next token of the same sequence.
        if (t + 1 < kSeq)
          ASSERT_EQ(out[t], in[t + 1]);
        ++transitions;
        follows += out[t] == next[in[t]];
      }
    }
  }
  double rate = static_cast<double>(follows) / static_cast<double>(transitions);
  // 0.9 + 0.1 / V expected over 3200 transitions.
  EXPECT_GE(rate, 0.8);
  EXPECT_LE(rate, 0.97) << "the chain should not be deterministic";
  EXPECT_GE(firstTokens.size(), static_cast<size_t>(kVocab) - 2)
      << "first tokens are uniform";
}

TEST(SyntheticTextTest, InputAloneGetsThePairsInputRows) {
  const uint64_t seed = 7;
  for (int world : {1, 2, 4}) {
    Manifest pair = parse(lmManifest(world));
    Manifest alone = parse(shiftingLmManifest(world));
    int64_t rows = kGlobal / world;
    for (int rank = 0; rank < world; ++rank) {
      auto withLabel = makeSyntheticBatches(pair, seed, rank, world);
      auto shifting = makeSyntheticBatches(alone, seed, rank, world);
      ASSERT_TRUE(withLabel.ok()) << withLabel.message();
      ASSERT_TRUE(shifting.ok()) << shifting.message();
      EXPECT_EQ((*shifting)->describe(),
                "synthetic text (seed 7, vocabulary 16)");
      for (int64_t step : {0, 5}) {
        LmBuffers reference(rows);
        InputBuffer b(rows);
        (*withLabel)->fill(step, reference.pointers.data());
        (*shifting)->fill(step, b.pointers.data());
        EXPECT_EQ(b.input, reference.input)
            << "world " << world << " rank " << rank << " step " << step;
      }
    }
  }
}

TEST(SyntheticTextTest, DependsOnSeedAndStep) {
  std::vector<int32_t> next = syntheticNextTokens(1, kVocab);
  std::vector<int32_t> a(kSeq + 1), b(kSeq + 1), c(kSeq + 1), d(kSeq + 1);
  syntheticTokenRow(1, next, 0, 3, kSeq, a.data());
  syntheticTokenRow(1, next, 1, 3, kSeq, b.data());
  syntheticTokenRow(2, next, 0, 3, kSeq, c.data());
  syntheticTokenRow(1, next, 0, 3, kSeq, d.data());
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a, d);
}

TEST(SyntheticTextTest, OtherIntegerStepsKeepUniformData) {
  // Two inputs: not a language model, so the old synthetic rules apply.
  Manifest m = parse(lmManifest(
      1, "", "arg 2 input more i32 {L}x8 batch_dim=0 global=8 classes=16"));
  auto source = makeSyntheticBatches(m, 0, 0, 1);
  ASSERT_TRUE(source.ok()) << source.message();
  EXPECT_EQ((*source)->describe(), "synthetic (seed 0)");
}

// ---- Token files -----------------------------------------------------------

class TokenFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    path = ::testing::TempDir() + "tokens_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() +
           ".bin";
  }
  void TearDown() override { std::remove(path.c_str()); }

  void writeTokens(const std::vector<uint16_t> &tokens,
                   const std::string &extra = "") const {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char *>(tokens.data()),
              static_cast<std::streamsize>(tokens.size() * 2));
    out << extra;
  }
  static std::vector<uint16_t> counting(int64_t n) {
    std::vector<uint16_t> tokens;
    for (int64_t i = 0; i < n; ++i)
      tokens.push_back(static_cast<uint16_t>((i * 7) % kVocab));
    return tokens;
  }
  std::string openError(const std::string &manifest = lmManifest(2),
                        DataFormat format = DataFormat::Auto) {
    Manifest m = parse(manifest);
    auto source = openDataFile(path, m, 0, 2, format, 0);
    EXPECT_FALSE(source.ok());
    return source.ok() ? std::string() : source.message();
  }

  std::string path;
};

TEST_F(TokenFileTest, WindowOffsetsAreInRangeAndSpread) {
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 4; ++step)
    for (int64_t row = 0; row < 64; ++row) {
      int64_t o = tokenWindowOffset(5, step, row, 1000);
      ASSERT_GE(o, 0);
      ASSERT_LT(o, 1000);
      EXPECT_EQ(o, tokenWindowOffset(5, step, row, 1000));
      seen.insert(o);
    }
  EXPECT_GE(seen.size(), 200u);
  EXPECT_NE(tokenWindowOffset(5, 0, 0, 1000000),
            tokenWindowOffset(6, 0, 0, 1000000));
  EXPECT_EQ(tokenWindowOffset(5, 0, 0, 1), 0);
}

TEST_F(TokenFileTest, RowsAreRandomWindowsIndependentOfTheSplit) {
  std::vector<uint16_t> tokens = counting(500);
  writeTokens(tokens);
  const uint64_t seed = 9;
  for (int world : {1, 2, 4}) {
    Manifest m = parse(lmManifest(world));
    int64_t rows = kGlobal / world;
    for (int rank = 0; rank < world; ++rank) {
      auto source = openDataFile(path, m, rank, world, DataFormat::Auto, seed);
      ASSERT_TRUE(source.ok()) << source.message();
      EXPECT_EQ((*source)->describe(),
                "token file '" + path + "' (500 tokens)");
      LmBuffers b(rows);
      for (int64_t step : {0, 3}) {
        (*source)->fill(step, b.pointers.data());
        for (int64_t r = 0; r < rows; ++r) {
          int64_t g = rank * rows + r;
          int64_t o = tokenWindowOffset(seed, step, g, 500 - kSeq);
          for (int64_t t = 0; t < kSeq; ++t) {
            ASSERT_EQ(b.input[r * kSeq + t], tokens[o + t])
                << "world " << world << " step " << step << " row " << g;
            ASSERT_EQ(b.label[r * kSeq + t], tokens[o + t + 1]);
          }
        }
      }
    }
  }
}

TEST_F(TokenFileTest, InputAloneReadsThePairsWindows) {
  std::vector<uint16_t> tokens = counting(500);
  writeTokens(tokens);
  for (uint64_t seed : {0, 9}) {
    for (int world : {1, 2, 4}) {
      Manifest pair = parse(lmManifest(world));
      Manifest alone = parse(shiftingLmManifest(world));
      int64_t rows = kGlobal / world;
      for (int rank = 0; rank < world; ++rank) {
        auto withLabel =
            openDataFile(path, pair, rank, world, DataFormat::Auto, seed);
        auto shifting =
            openDataFile(path, alone, rank, world, DataFormat::Auto, seed);
        ASSERT_TRUE(withLabel.ok()) << withLabel.message();
        ASSERT_TRUE(shifting.ok()) << shifting.message();
        EXPECT_EQ((*shifting)->describe(),
                  "token file '" + path + "' (500 tokens)");
        for (int64_t step : {0, 3}) {
          LmBuffers reference(rows);
          InputBuffer b(rows);
          (*withLabel)->fill(step, reference.pointers.data());
          (*shifting)->fill(step, b.pointers.data());
          EXPECT_EQ(b.input, reference.input)
              << "seed " << seed << " world " << world << " rank " << rank
              << " step " << step;
          // Row 0 is tokens[o, o + T), not merely what the pair reads.
          int64_t o = tokenWindowOffset(seed, step, rank * rows, 500 - kSeq);
          EXPECT_EQ(
              std::vector<int32_t>(b.input.begin(), b.input.begin() + kSeq),
              std::vector<int32_t>(tokens.begin() + o,
                                   tokens.begin() + o + kSeq));
        }
      }
    }
  }
}

TEST_F(TokenFileTest, ExactlyOneWindow) {
  // T + 1 tokens: every row reads the whole file.
  std::vector<uint16_t> tokens = counting(kSeq + 1);
  writeTokens(tokens);
  Manifest m = parse(lmManifest(1));
  auto source = openDataFile(path, m, 0, 1, DataFormat::Tokens, 3);
  ASSERT_TRUE(source.ok()) << source.message();
  LmBuffers b(kGlobal);
  (*source)->fill(2, b.pointers.data());
  for (int64_t r = 0; r < kGlobal; ++r)
    for (int64_t t = 0; t < kSeq; ++t) {
      EXPECT_EQ(b.input[r * kSeq + t], tokens[t]);
      EXPECT_EQ(b.label[r * kSeq + t], tokens[t + 1]);
    }
}

TEST_F(TokenFileTest, TooShort) {
  writeTokens(counting(kSeq));
  EXPECT_EQ(openError(), "token file '" + path +
                             "' holds 8 tokens, fewer than the T + 1 = 9 "
                             "that one window needs (T = 8, the sequence "
                             "length of arg 1 (input idx))");
  writeTokens({});
  EXPECT_EQ(openError(), "token file '" + path +
                             "' is empty; it needs at least T + 1 = 9 uint16 "
                             "token ids (T = 8, the sequence length of arg 1 "
                             "(input idx))");
}

TEST_F(TokenFileTest, InputAloneStillNeedsTPlusOneTokens) {
  // Its windows are the pair's, which start in [0, ntokens - T).
  writeTokens(counting(kSeq));
  EXPECT_EQ(openError(shiftingLmManifest(2)),
            "token file '" + path +
                "' holds 8 tokens, fewer than the T + 1 = 9 that one window "
                "needs (T = 8, the sequence length of arg 1 (input idx))");
  writeTokens(counting(kSeq + 1));
  Manifest m = parse(shiftingLmManifest(1));
  auto source = openDataFile(path, m, 0, 1, DataFormat::Tokens, 3);
  ASSERT_TRUE(source.ok()) << source.message();
  InputBuffer b(kGlobal);
  (*source)->fill(0, b.pointers.data());
  for (int64_t r = 0; r < kGlobal; ++r)
    for (int64_t t = 0; t < kSeq; ++t)
      EXPECT_EQ(b.input[r * kSeq + t], counting(kSeq + 1)[t]);
}

// ids.astype(np.int32).tofile(path) instead of uint16: every second 2-byte
// value is the zero high half. The range check alone would accept it.
TEST_F(TokenFileTest, WiderIntegersAreNotTokenIds) {
  std::vector<uint16_t> tokens;
  for (uint16_t id : counting(100)) {
    tokens.push_back(static_cast<uint16_t>(id | 1));
    tokens.push_back(0);
  }
  writeTokens(tokens);
  EXPECT_EQ(openError(), "token file '" + path +
                             "' does not hold uint16 token ids: among its "
                             "first 200 2-byte values, every one at an odd "
                             "offset is 0, which is how little-endian 32- or "
                             "64-bit integers look; write the ids as "
                             "little-endian uint16 (numpy: "
                             "ids.astype(np.uint16).tofile(path))");
}

TEST_F(TokenFileTest, FloatIdsAreNotTokenIds) {
  // float32 3.0 is 0x40400000: a zero low half, then 0x4040.
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 100; ++i) {
    tokens.push_back(0);
    tokens.push_back(0x4040);
  }
  writeTokens(tokens);
  EXPECT_NE(openError().find("every one at an even offset is 0, which is how "
                             "32-bit floats or big-endian integers look"),
            std::string::npos);
}

TEST_F(TokenFileTest, ShortOrZeroFilesAreNotJudgedByWidth) {
  // Below the probe's minimum the pattern proves nothing.
  std::vector<uint16_t> shortFile;
  for (int i = 0; i < 20; ++i) {
    shortFile.push_back(static_cast<uint16_t>(1 + i % 15));
    shortFile.push_back(0);
  }
  writeTokens(shortFile);
  Manifest m = parse(lmManifest(1));
  EXPECT_TRUE(openDataFile(path, m, 0, 1, DataFormat::Tokens, 0).ok());
  // All zeros is a (dull) valid file: neither half stands out.
  writeTokens(std::vector<uint16_t>(200, 0));
  EXPECT_TRUE(openDataFile(path, m, 0, 1, DataFormat::Tokens, 0).ok());
}

TEST_F(TokenFileTest, OddByteSize) {
  writeTokens(counting(100), "x");
  EXPECT_EQ(openError(), "token file '" + path +
                             "' has 201 bytes, an odd number; a token file "
                             "holds 2-byte little-endian (uint16) token ids");
}

TEST_F(TokenFileTest, TokenOutsideTheVocabulary) {
  std::vector<uint16_t> tokens = counting(100);
  tokens[37] = 16;
  tokens[60] = 999;
  writeTokens(tokens);
  EXPECT_EQ(openError(), "token file '" + path +
                             "': the token at offset 37 is 16, outside [0, "
                             "16) for classes=16 of arg 1 (input idx)");
}

TEST_F(TokenFileTest, StepIsNotALanguageModel) {
  writeTokens(counting(100));
  EXPECT_EQ(openError(lmManifest(2, "",
                                 "arg 2 label targets i32 {L}x7 "
                                 "batch_dim=0 global=8 classes=16"),
                      DataFormat::Tokens),
            "token file '" + path +
                "' cannot feed step 'lm': arg 2 (label targets) has shape "
                "4x7 but arg 1 (input idx) has shape 4x8; the label holds "
                "the next token at every input position");
}

TEST_F(TokenFileTest, StepWithTwoInputsAndNoLabelIsNotALanguageModel) {
  writeTokens(counting(100));
  EXPECT_EQ(openError(manifestWithBatch(2, {kInputRecord,
                                            "arg 2 input more i32 {L}x8 "
                                            "batch_dim=0 global=8 classes=16"}),
                      DataFormat::Tokens),
            "token file '" + path +
                "' cannot feed step 'lm': the step's batch has 2 inputs (idx, "
                "more) and 0 labels; a language model's batch is one input "
                "and one label, or one token input alone that the model "
                "shifts itself");
}

TEST_F(TokenFileTest, AutoReadsAFileWithoutMagicAsAsdataForOtherSteps) {
  writeTokens(counting(100));
  std::string error = openError(
      lmManifest(2, "arg 1 input idx f32 {L}x8 batch_dim=0 global=8", ""));
  EXPECT_NE(error.find("is not an asdata file: it starts with"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("(a file without that magic is read as a token file, "
                       "but arg 1 (input idx) is f32; token ids are i32)"),
            std::string::npos)
      << error;
}

TEST_F(TokenFileTest, ExplicitAsdataFormatDoesNotReadTokens) {
  writeTokens(counting(100));
  std::string error = openError(lmManifest(2), DataFormat::Asdata);
  EXPECT_NE(error.find("is not an asdata file"), std::string::npos) << error;
  EXPECT_EQ(error.find("token file"), std::string::npos) << error;
}

TEST_F(TokenFileTest, AutoReadsAsdataByItsMagic) {
  std::vector<int32_t> idx(4 * kSeq, 1), targets(4 * kSeq, 2);
  ASSERT_TRUE(
      writeAsdataFile(path, 4,
                      {{"idx", ASRT_DTYPE_I32, {kSeq}, idx.data()},
                       {"targets", ASRT_DTYPE_I32, {kSeq}, targets.data()}})
          .ok());
  Manifest m = parse(lmManifest(2));
  auto source = openDataFile(path, m, 0, 2);
  ASSERT_TRUE(source.ok()) << source.message();
  EXPECT_NE((*source)->describe().find("(4 rows)"), std::string::npos);
}

TEST_F(TokenFileTest, MissingFileAndDirectory) {
  path = ::testing::TempDir() + "no/such/tokens.bin";
  EXPECT_EQ(openError(lmManifest(2), DataFormat::Tokens),
            "cannot open token file '" + path + "': No such file or directory");
  // Auto leaves an unreadable path to the asdata reader's message.
  EXPECT_EQ(openError(),
            "cannot open data file '" + path + "': No such file or directory");
  path = ::testing::TempDir();
  EXPECT_NE(openError(lmManifest(2), DataFormat::Tokens)
                .find("is not a regular file (it is a directory)"),
            std::string::npos);
  path = ::testing::TempDir() + "unused.bin"; // for TearDown
}

TEST_F(TokenFileTest, FifoIsRefusedNotWaitedOn) {
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(openError(lmManifest(2), DataFormat::Tokens),
            "token file '" + path + "' is not a regular file (it is a FIFO)");
  EXPECT_EQ(openError(),
            "data file '" + path + "' is not a regular file (it is a FIFO)");
}

} // namespace
