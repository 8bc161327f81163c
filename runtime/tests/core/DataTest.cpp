// Synthetic batches, the asdata reader and writer, and the data diagnostics.
#include "data/Data.h"
#include "core/Dtype.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

using namespace autoshard::rt;

namespace {

// Inputs and labels of several dtypes, per-row shapes and batch dims; G=16.
std::string manifestText(int world, bool withFloatInputs = true) {
  std::string l = std::to_string(16 / world);
  std::string text = "autoshard-manifest 1\nabi 6\nstep s\nstrategy ddp\n"
                     "grid " +
                     std::to_string(world) +
                     "\n"
                     "arg 0 param w f32 4x6 init=zeros\n";
  if (withFloatInputs)
    text += "arg 1 input x f32 " + l +
            "x6 batch_dim=0 global=16\n"
            "arg 2 input seq bf16 3x" +
            l + " batch_dim=1 global=16\n";
  else
    text += "arg 1 input a i32 " + l +
            " batch_dim=0 global=16 classes=7\n"
            "arg 2 input b i32 " +
            l + " batch_dim=0 global=16 classes=7\n";
  text += "arg 3 input tok i32 " + l +
          "x2 batch_dim=0 global=16 classes=50\n"
          "arg 4 label y i32 " +
          l +
          " batch_dim=0 global=16 classes=5\n"
          "arg 5 label y2 i64 " +
          l +
          "x2 batch_dim=0 global=16 classes=3\n"
          "result 0 param w f32 4x6 updates=0\n"
          "result 1 loss loss f32 scalar\nend\n";
  return text;
}

Manifest parse(const std::string &text) {
  Expected<Manifest> m = parseManifest(text);
  EXPECT_TRUE(m.ok()) << m.message();
  return *m;
}

/// Buffers for every argument of `m`.
struct Buffers {
  explicit Buffers(const Manifest &m) {
    for (const TensorSpec &arg : m.args)
      storage.emplace_back(static_cast<size_t>(arg.numBytes()));
    for (auto &s : storage)
      pointers.push_back(s.data());
  }
  std::vector<std::vector<char>> storage;
  std::vector<void *> pointers;
};

/// The bytes of local row `row` of a batched argument, gathered over the
/// dimensions outside the batch dimension.
std::string rowBytes(const TensorSpec &spec, const void *buffer, int64_t row) {
  int64_t size = dtypeSize(spec.dtype), outer = 1, inner = 1;
  for (int d = 0; d < spec.batchDim; ++d)
    outer *= spec.shape[d];
  for (size_t d = spec.batchDim + 1; d < spec.shape.size(); ++d)
    inner *= spec.shape[d];
  std::string out;
  const char *base = static_cast<const char *>(buffer);
  for (int64_t o = 0; o < outer; ++o)
    out.append(base + ((o * spec.localRows() + row) * inner) * size,
               static_cast<size_t>(inner * size));
  return out;
}

TEST(DataTest, LocalRowRanges) {
  EXPECT_EQ(localRowRange(16, 0, 1).count, 16);
  RowRange r = localRowRange(16, 3, 4);
  EXPECT_EQ(r.first, 12);
  EXPECT_EQ(r.count, 4);
  // Uneven splits still tile [0, G).
  int64_t next = 0;
  for (int rank = 0; rank < 3; ++rank) {
    RowRange part = localRowRange(10, rank, 3);
    EXPECT_EQ(part.first, next);
    next += part.count;
  }
  EXPECT_EQ(next, 10);
}

TEST(DataTest, SyntheticRowsDoNotDependOnTheSplit) {
  Manifest whole = parse(manifestText(1));
  Buffers reference(whole);
  auto one = makeSyntheticBatches(whole, 11, 0, 1);
  ASSERT_TRUE(one.ok()) << one.message();
  for (int64_t step : {0, 3}) {
    (*one)->fill(step, reference.pointers.data());
    for (int world : {2, 4, 8}) {
      Manifest m = parse(manifestText(world));
      for (int rank = 0; rank < world; ++rank) {
        Buffers local(m);
        auto source = makeSyntheticBatches(m, 11, rank, world);
        ASSERT_TRUE(source.ok()) << source.message();
        (*source)->fill(step, local.pointers.data());
        for (const TensorSpec &arg : m.args) {
          if (arg.batchDim < 0)
            continue;
          for (int64_t r = 0; r < arg.localRows(); ++r)
            ASSERT_EQ(rowBytes(arg, local.pointers[arg.index], r),
                      rowBytes(whole.args[arg.index],
                               reference.pointers[arg.index],
                               rank * 16 / world + r))
                << arg.name << " step " << step << " world " << world
                << " rank " << rank << " row " << r;
        }
      }
    }
  }
}

TEST(DataTest, SyntheticBatchesDependOnSeedAndStep) {
  Manifest m = parse(manifestText(1));
  Buffers a(m), b(m), c(m);
  (*makeSyntheticBatches(m, 1, 0, 1))->fill(0, a.pointers.data());
  (*makeSyntheticBatches(m, 1, 0, 1))->fill(1, b.pointers.data());
  (*makeSyntheticBatches(m, 2, 0, 1))->fill(0, c.pointers.data());
  EXPECT_NE(a.storage[1], b.storage[1]);
  EXPECT_NE(a.storage[1], c.storage[1]);
  Buffers again(m);
  (*makeSyntheticBatches(m, 1, 0, 1))->fill(0, again.pointers.data());
  EXPECT_EQ(a.storage, again.storage);
  // Float inputs are standard normal.
  double x = loadElement(a.pointers[1], ASRT_DTYPE_F32, 5);
  EXPECT_EQ(x, static_cast<float>(syntheticInputValue(1, m.args[1], 0, 0, 5)));
}

TEST(DataTest, TeacherLabelsAreInRangeAndVaried) {
  for (bool floats : {true, false}) {
    Manifest m = parse(manifestText(1, floats));
    auto source = makeSyntheticBatches(m, 0, 0, 1);
    ASSERT_TRUE(source.ok()) << source.message();
    Buffers b(m);
    std::set<int64_t> seenY, seenY2;
    for (int64_t step = 0; step < 20; ++step) {
      (*source)->fill(step, b.pointers.data());
      const auto *y = static_cast<const int32_t *>(b.pointers[4]);
      const auto *y2 = static_cast<const int64_t *>(b.pointers[5]);
      const auto *tok = static_cast<const int32_t *>(b.pointers[3]);
      for (int i = 0; i < 16; ++i) {
        ASSERT_GE(y[i], 0);
        ASSERT_LT(y[i], 5);
        seenY.insert(y[i]);
      }
      for (int i = 0; i < 32; ++i) {
        ASSERT_GE(y2[i], 0);
        ASSERT_LT(y2[i], 3);
        seenY2.insert(y2[i]);
        ASSERT_GE(tok[i], 0);
        ASSERT_LT(tok[i], 50);
      }
    }
    // A constant label would make the task trivial (or the teacher broken).
    EXPECT_GE(seenY.size(), 4u) << (floats ? "teacher" : "uniform");
    EXPECT_EQ(seenY2.size(), 3u);
  }
}

TEST(DataTest, TeacherLabelsAreTheArgmaxOfALinearFunction) {
  // With one float feature x, a linear teacher's argmax over classes
  // depends only on the sign of x: rows with equal signs share labels.
  Manifest m = parse("autoshard-manifest 1\nabi 6\nstep s\nstrategy none\n"
                     "grid 1\n"
                     "arg 0 input x f32 64x1 batch_dim=0 global=64\n"
                     "arg 1 label y i32 64 batch_dim=0 global=64 classes=6\n"
                     "result 0 loss loss f32 scalar\nend\n");
  Buffers b(m);
  (*makeSyntheticBatches(m, 5, 0, 1))->fill(0, b.pointers.data());
  const auto *x = static_cast<const float *>(b.pointers[0]);
  const auto *y = static_cast<const int32_t *>(b.pointers[1]);
  std::set<int32_t> positive, negative;
  for (int i = 0; i < 64; ++i)
    (x[i] > 0 ? positive : negative).insert(y[i]);
  EXPECT_EQ(positive.size(), 1u);
  EXPECT_EQ(negative.size(), 1u);
}

TEST(DataTest, SyntheticErrors) {
  std::string text = manifestText(1);
  size_t at = text.find(" classes=50");
  text.erase(at, std::string(" classes=50").size());
  Manifest m = parse(text);
  auto source = makeSyntheticBatches(m, 0, 0, 1);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.message().find("synthetic data for integer arg 3 (input "
                                  "tok) needs classes=C"),
            std::string::npos)
      << source.message();

  Manifest big = parse("autoshard-manifest 1\nabi 6\nstep s\nstrategy none\n"
                       "grid 1\n"
                       "arg 0 input x f32 2x4096 batch_dim=0 global=2\n"
                       "arg 1 label y i32 2x64 batch_dim=0 global=2 "
                       "classes=100\n"
                       "result 0 loss loss f32 scalar\nend\n");
  auto tooBig = makeSyntheticBatches(big, 0, 0, 1);
  ASSERT_FALSE(tooBig.ok());
  EXPECT_NE(tooBig.message().find("pass --data FILE instead"),
            std::string::npos);
}

// --data-format's words are dataFormatName's, read back exactly.
TEST(DataTest, DataFormatNamesParseBack) {
  for (DataFormat format :
       {DataFormat::Auto, DataFormat::Asdata, DataFormat::Tokens})
    EXPECT_EQ(parseDataFormat(dataFormatName(format)), format);
  EXPECT_EQ(parseDataFormat("Tokens"), std::nullopt);
  EXPECT_EQ(parseDataFormat(""), std::nullopt);
  EXPECT_EQ(parseDataFormat("npy"), std::nullopt);
}

// ---- asdata ----------------------------------------------------------------

class AsdataTest : public ::testing::Test {
protected:
  static constexpr int64_t kRows = 10;

  void SetUp() override {
    path = ::testing::TempDir() + "asdata_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() +
           ".bin";
    for (int64_t i = 0; i < kRows * 6; ++i)
      x.push_back(0.5f * static_cast<float>(i));
    for (int64_t i = 0; i < kRows * 3; ++i)
      seq.push_back(floatToBf16(static_cast<float>(-i)));
    for (int64_t i = 0; i < kRows * 2; ++i) {
      tok.push_back(static_cast<int32_t>(i % 50));
      y2.push_back(i % 3);
    }
    for (int64_t i = 0; i < kRows; ++i)
      y.push_back(static_cast<int32_t>(i % 5));
    extra.assign(kRows, 7);
  }
  void TearDown() override { std::remove(path.c_str()); }

  std::vector<AsdataField> fields() const {
    return {{"x", ASRT_DTYPE_F32, {6}, x.data()},
            {"seq", ASRT_DTYPE_BF16, {3}, seq.data()},
            {"unused", ASRT_DTYPE_U16, {}, extra.data()},
            {"tok", ASRT_DTYPE_I32, {2}, tok.data()},
            {"y", ASRT_DTYPE_I32, {}, y.data()},
            {"y2", ASRT_DTYPE_I64, {2}, y2.data()}};
  }
  void write(const std::vector<AsdataField> &f, int64_t rows = kRows) {
    Status s = writeAsdataFile(path, rows, f);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  std::string bytes() const {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void setBytes(const std::string &b) const {
    std::ofstream(path, std::ios::binary) << b;
  }
  /// Opens the file for the 2-rank manifest and returns the error.
  std::string openError() {
    static Manifest m = parse(manifestText(2));
    auto source = openDataFile(path, m, 0, 2);
    EXPECT_FALSE(source.ok());
    return source.ok() ? std::string() : source.message();
  }

  std::string path;
  std::vector<float> x;
  std::vector<uint16_t> seq, extra;
  std::vector<int32_t> tok, y;
  std::vector<int64_t> y2;
};

TEST_F(AsdataTest, RoundTrip) {
  write(fields());
  auto file = AsdataFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ((*file)->rows(), kRows);
  ASSERT_EQ((*file)->fields().size(), 6u);
  const AsdataField *f = (*file)->find("y2");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->dtype, ASRT_DTYPE_I64);
  EXPECT_EQ(f->rowShape, std::vector<int64_t>{2});
  EXPECT_EQ(std::memcmp(f->data, y2.data(), y2.size() * 8), 0);
  EXPECT_EQ(std::memcmp((*file)->find("x")->data, x.data(), x.size() * 4), 0);
  EXPECT_EQ((*file)->find("unused")->rowShape, std::vector<int64_t>{});
  EXPECT_EQ((*file)->find("nope"), nullptr);
}

TEST_F(AsdataTest, StepsReadConsecutiveRowsAndWrapAround) {
  write(fields());
  Manifest m = parse(manifestText(2));
  auto source = openDataFile(path, m, 1, 2);
  ASSERT_TRUE(source.ok()) << source.message();
  EXPECT_NE((*source)->describe().find("(10 rows)"), std::string::npos);
  Buffers b(m);
  for (int64_t step : {0, 1, 7}) {
    (*source)->fill(step, b.pointers.data());
    const auto *gotX = static_cast<const float *>(b.pointers[1]);
    const auto *gotSeq = static_cast<const uint16_t *>(b.pointers[2]);
    const auto *gotY = static_cast<const int32_t *>(b.pointers[4]);
    for (int64_t r = 0; r < 8; ++r) {
      // Rank 1 holds global rows 8..15 of step s: file rows (16 s + 8 + r)
      // mod 10.
      int64_t fileRow = (16 * step + 8 + r) % kRows;
      EXPECT_EQ(gotY[r], y[fileRow]) << "step " << step << " row " << r;
      EXPECT_EQ(gotX[r * 6 + 5], x[fileRow * 6 + 5]);
      // seq is 3x8 with batch_dim 1: element (o, r) is file (row, o).
      for (int o = 0; o < 3; ++o)
        EXPECT_EQ(gotSeq[o * 8 + r], seq[fileRow * 3 + o]);
    }
  }
}

TEST_F(AsdataTest, MissingFile) {
  path = ::testing::TempDir() + "no/such/file.asdata";
  EXPECT_EQ(openError(),
            "cannot open data file '" + path + "': No such file or directory");
}

TEST_F(AsdataTest, Directory) {
  path = ::testing::TempDir();
  EXPECT_NE(openError().find("is not a regular file (it is a directory)"),
            std::string::npos);
  path = ::testing::TempDir() + "unused.bin"; // for TearDown
}

// A FIFO without a writer (mkfifo f; ./train --data f) is refused at once;
// the format sniffing and the open used to wait for a writer forever.
TEST_F(AsdataTest, Fifo) {
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(openError(),
            "data file '" + path + "' is not a regular file (it is a FIFO)");
}

TEST_F(AsdataTest, BadMagic) {
  write(fields());
  std::string b = bytes();
  b.replace(0, 8, "NOTDATA!");
  setBytes(b);
  EXPECT_NE(openError().find("is not an asdata file: it starts with "
                             "'NOTDATA!' instead of 'ASDATA01'"),
            std::string::npos);
}

TEST_F(AsdataTest, TooShortForMagic) {
  setBytes("ASD");
  EXPECT_NE(openError().find("is truncated: it has 3 bytes"),
            std::string::npos);
}

TEST_F(AsdataTest, EmptyFile) {
  setBytes("");
  EXPECT_EQ(openError().rfind("data file '" + path +
                                  "' is empty; an asdata file starts with the "
                                  "8-byte magic 'ASDATA01'",
                              0),
            0u);
}

TEST_F(AsdataTest, TruncatedHeader) {
  write(fields());
  setBytes(bytes().substr(0, 22));
  std::string error = openError();
  EXPECT_NE(error.find("is truncated: reading a field name length at byte 20 "
                       "needs 4 bytes but the file has 22 bytes"),
            std::string::npos)
      << error;
}

TEST_F(AsdataTest, TruncatedPayload) {
  write(fields());
  std::string b = bytes();
  setBytes(b.substr(0, b.size() - 1));
  std::string error = openError();
  EXPECT_NE(error.find("is truncated: field 'y2' needs 160 bytes"),
            std::string::npos)
      << error;
}

TEST_F(AsdataTest, TrailingBytes) {
  write(fields());
  setBytes(bytes() + "xx");
  EXPECT_NE(openError().find("has 2 bytes after the payload"),
            std::string::npos);
}

TEST_F(AsdataTest, ZeroRows) {
  write(fields(), 0);
  EXPECT_NE(openError().find("has 0 rows; it needs at least one"),
            std::string::npos);
}

TEST_F(AsdataTest, UnknownDtypeCode) {
  write({{"x", static_cast<asrt_dtype>(9), {6}, x.data()}});
  EXPECT_NE(openError().find("field 'x' has dtype code 9, not an asrt_dtype"),
            std::string::npos);
}

TEST_F(AsdataTest, MissingField) {
  std::vector<AsdataField> f = fields();
  f.erase(f.begin() + 4); // y
  write(f);
  EXPECT_EQ(openError(),
            "data file '" + path +
                "' has no field 'y' for arg 4 (label y) (its fields: x, seq, "
                "unused, tok, y2)");
}

TEST_F(AsdataTest, WrongDtype) {
  std::vector<AsdataField> f = fields();
  f[4] = {"y", ASRT_DTYPE_I64, {}, y2.data()};
  write(f);
  EXPECT_NE(openError().find("field 'y' has dtype i64 but arg 4 (label y) "
                             "needs i32"),
            std::string::npos);
}

TEST_F(AsdataTest, WrongRowShape) {
  std::vector<AsdataField> f = fields();
  f[0] = {"x", ASRT_DTYPE_F32, {5}, x.data()};
  write(f);
  EXPECT_NE(openError().find("field 'x' has per-row shape 5 but arg 1 (input "
                             "x) needs 6 (its shape 8x6 without batch_dim "
                             "0)"),
            std::string::npos);
}

TEST_F(AsdataTest, LabelOutOfRange) {
  y[7] = 5;
  write(fields());
  EXPECT_NE(openError().find("label 'y' in row 7 is 5, outside [0, 5) for "
                             "classes=5"),
            std::string::npos);
}

TEST_F(AsdataTest, NegativeLabelElement) {
  y2[9] = -1;
  write(fields());
  EXPECT_NE(openError().find("label 'y2' in row 4, element 1 is -1, outside "
                             "[0, 3)"),
            std::string::npos);
}

/// The 2-rank manifest whose label y ignores positions labelled -100.
Manifest ignoringManifest() {
  std::string text = manifestText(2);
  const std::string y = " global=16 classes=5\n";
  size_t at = text.find(y);
  EXPECT_NE(at, std::string::npos);
  text.replace(at, y.size(), " global=16 classes=5 ignore_index=-100\n");
  return parse(text);
}

TEST_F(AsdataTest, LabelsMayHoldTheLossesIgnoreIndex) {
  // HuggingFace pads labels with -100, which the loss ignores.
  y[3] = -100;
  write(fields());
  Manifest m = ignoringManifest();
  ASSERT_EQ(m.args[4].ignoreIndex, std::optional<int64_t>(-100));
  auto source = openDataFile(path, m, 0, 2);
  ASSERT_TRUE(source.ok()) << source.message();
  Buffers b(m);
  (*source)->fill(0, b.pointers.data());
  EXPECT_EQ(static_cast<const int32_t *>(b.pointers[4])[3], -100);
  // Without the key it is a label outside [0, classes) like any other.
  EXPECT_NE(openError().find("label 'y' in row 3 is -100, outside [0, 5) for "
                             "classes=5"),
            std::string::npos);
}

TEST_F(AsdataTest, TheIgnoreIndexExcusesOnlyItself) {
  y[3] = -100;
  y[7] = -1;
  write(fields());
  auto source = openDataFile(path, ignoringManifest(), 0, 2);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.message().find("label 'y' in row 7 is -1, outside [0, 5) "
                                  "for classes=5 and not the "
                                  "ignore_index=-100"),
            std::string::npos)
      << source.message();
}

TEST_F(AsdataTest, IntegerInputOutOfRange) {
  tok[0] = 50;
  write(fields());
  EXPECT_NE(openError().find("input 'tok' in row 0, element 0 is 50"),
            std::string::npos);
}

} // namespace
