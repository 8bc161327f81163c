// Manifest parsing: the documented example, and one case per diagnostic.
#include "io/Manifest.h"

#include <gtest/gtest.h>

#include <string>

using namespace autoshard::rt;

namespace {

// docs/RuntimeABI.md's example, plus the momentum result it implies.
const char *kGood = "autoshard-manifest 1\n"
                    "abi 6\n"
                    "step train_step\n"
                    "strategy ddp\n"
                    "grid 2\n"
                    "arg 0 param fc1.weight f32 64x16 init=normal:0.25\n"
                    "arg 1 param fc1.bias f32 64 init=zeros\n"
                    "arg 2 opt_state fc1.weight.momentum f32 64x16 init=zeros\n"
                    "arg 3 input x f32 8x16 batch_dim=0 global=16\n"
                    "arg 4 label y i32 8 batch_dim=0 global=16 classes=4\n"
                    "arg 5 hyper lr f32 scalar init=constant:0.1\n"
                    "result 0 param fc1.weight f32 64x16 updates=0\n"
                    "result 1 loss loss f32 scalar\n"
                    "end\n";

// docs/RuntimeABI.md's second example: AdamW's i32 step counter and an
// exposed gradient.
const char *kAdamWithGrad =
    "autoshard-manifest 1\n"
    "abi 6\n"
    "step train_step\n"
    "strategy ddp\n"
    "grid 2\n"
    "arg 0 param w f32 4x8 init=normal:0.1\n"
    "arg 1 opt_state w.exp_avg f32 4x8 init=zeros\n"
    "arg 2 opt_state step i32 scalar init=zeros\n"
    "arg 3 input x f32 8x8 batch_dim=0 global=16\n"
    "arg 4 label y i32 8 batch_dim=0 global=16 classes=4\n"
    "result 0 param w f32 4x8 updates=0\n"
    "result 1 opt_state w.exp_avg f32 4x8 updates=1\n"
    "result 2 opt_state step i32 scalar updates=2\n"
    "result 3 grad w.grad f32 4x8 of=0\n"
    "result 4 loss loss f32 scalar\n"
    "end\n";

// Flat shards over one or both axes of a 2x2 grid, a sharded scalar, and a
// replicated gradient of a sharded param.
const char *kSharded =
    "autoshard-manifest 1\n"
    "abi 6\n"
    "step train_step\n"
    "strategy zero3\n"
    "grid 2x2\n"
    "arg 0 param w f32 8 init=normal:0.1 full=5x3 shard_axes=2\n"
    "arg 1 opt_state w.exp_avg f32 4 init=zeros full=5x3 shard_axes=3\n"
    "arg 2 param b f32 1 init=ones full=3 shard_axes=3\n"
    "arg 3 param scale f32 1 init=ones full=scalar shard_axes=1\n"
    "arg 4 input x f32 4x3 batch_dim=0 global=16\n"
    "result 0 param w f32 8 updates=0 full=5x3 shard_axes=2\n"
    "result 1 opt_state w.exp_avg f32 4 full=5x3 shard_axes=3 updates=1\n"
    "result 2 grad w.grad f32 8 of=0 full=5x3 shard_axes=2\n"
    "result 3 grad b.grad f32 3 of=2\n"
    "result 4 loss loss f32 scalar\n"
    "end\n";

// Offload: a host and an nvme optimizer state (sharded), an explicit
// device one, and the memory record's offload keys.
const char *kOffload =
    "autoshard-manifest 1\n"
    "abi 6\n"
    "step train_step\n"
    "strategy zero3\n"
    "grid 2\n"
    "arg 0 param w f32 4x8 init=normal:0.1\n"
    "arg 1 opt_state w.exp_avg f32 16 init=zeros full=4x8 shard_axes=1 "
    "memory=host\n"
    "arg 2 opt_state w.exp_avg_sq f32 16 init=zeros full=4x8 shard_axes=1 "
    "memory=nvme\n"
    "arg 3 opt_state step i32 scalar init=zeros memory=device\n"
    "arg 4 input x f32 8x8 batch_dim=0 global=16\n"
    "arg 5 label y i32 8 batch_dim=0 global=16 classes=4\n"
    "result 0 param w f32 4x8 updates=0\n"
    "result 1 opt_state w.exp_avg f32 16 updates=1 full=4x8 shard_axes=1 "
    "memory=host\n"
    "result 2 opt_state w.exp_avg_sq f32 16 memory=nvme updates=2 full=4x8 "
    "shard_axes=1\n"
    "result 3 opt_state step i32 scalar updates=3\n"
    "result 4 loss loss f32 scalar\n"
    "memory peak=300 persistent=132 arena=40 host_persistent=64 "
    "host_arena=32 nvme=64\n"
    "end\n";

/// `base` (kGood by default) with 1-based line `line` replaced by `text`
/// (or removed when `text` is null).
std::string withLine(int line, const char *text, const char *base = kGood) {
  std::string in = base, out;
  int number = 1;
  size_t start = 0;
  while (start < in.size()) {
    size_t end = in.find('\n', start);
    std::string current = in.substr(start, end - start);
    if (number != line)
      out += current + "\n";
    else if (text)
      out += std::string(text) + "\n";
    start = end + 1;
    ++number;
  }
  return out;
}

/// Parses `text`, expects failure, and returns the message.
std::string errorOf(const std::string &text) {
  Expected<Manifest> m = parseManifest(text);
  EXPECT_FALSE(m.ok()) << "parsed although it should not have:\n" << text;
  return m.ok() ? std::string() : m.message();
}

TEST(ManifestTest, ParsesTheDocumentedExample) {
  Expected<Manifest> parsed = parseManifest(kGood);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  const Manifest &m = *parsed;
  EXPECT_EQ(m.formatVersion, 1);
  EXPECT_EQ(m.abiVersion, ASRT_ABI_VERSION);
  EXPECT_EQ(m.step, "train_step");
  EXPECT_EQ(m.strategy, "ddp");
  EXPECT_EQ(m.grid, std::vector<int64_t>{2});
  EXPECT_EQ(m.worldSize(), 2);
  ASSERT_EQ(m.args.size(), 6u);
  ASSERT_EQ(m.results.size(), 2u);

  const TensorSpec &w = m.args[0];
  EXPECT_EQ(w.role, Role::Param);
  EXPECT_EQ(w.name, "fc1.weight");
  EXPECT_EQ(w.dtype, ASRT_DTYPE_F32);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{64, 16}));
  ASSERT_TRUE(w.init.has_value());
  EXPECT_EQ(w.init->kind, InitKind::Normal);
  EXPECT_DOUBLE_EQ(w.init->value, 0.25);
  EXPECT_EQ(w.numElements(), 1024);
  EXPECT_EQ(w.numBytes(), 4096);
  EXPECT_EQ(w.line, 6);

  EXPECT_EQ(m.args[2].role, Role::OptState);
  const TensorSpec &x = m.args[3];
  EXPECT_EQ(x.role, Role::Input);
  EXPECT_EQ(x.batchDim, 0);
  EXPECT_EQ(x.globalRows, 16);
  EXPECT_EQ(x.localRows(), 8);
  EXPECT_EQ(x.rowElements(), 16);
  EXPECT_EQ(x.rowShape(), std::vector<int64_t>{16});
  EXPECT_FALSE(x.init.has_value());

  const TensorSpec &y = m.args[4];
  EXPECT_EQ(y.role, Role::Label);
  EXPECT_EQ(y.classes, 4);
  EXPECT_EQ(y.rowShape(), std::vector<int64_t>{});

  const TensorSpec &lr = m.args[5];
  EXPECT_EQ(lr.role, Role::Hyper);
  EXPECT_TRUE(lr.shape.empty());
  EXPECT_EQ(lr.numElements(), 1);
  EXPECT_EQ(lr.init->kind, InitKind::Constant);
  EXPECT_FLOAT_EQ(static_cast<float>(lr.init->value), 0.1f);

  EXPECT_EQ(m.results[0].updates, 0);
  EXPECT_TRUE(m.results[0].isResult);
  EXPECT_EQ(m.results[1].role, Role::Loss);
  EXPECT_EQ(m.results[1].updates, -1);
  EXPECT_EQ(m.lossResult(), 1);
  EXPECT_EQ(m.globalBatchRows(), 16);
  EXPECT_EQ(m.findArg("lr"), &m.args[5]);
  EXPECT_EQ(m.findArg("nope"), nullptr);
  EXPECT_EQ(m.results[1].describe(), "result 1 (loss loss)");
}

TEST(ManifestTest, ParsesTheLossesIgnoreIndex) {
  EXPECT_FALSE(parseManifest(kGood)->args[4].ignoreIndex) << "optional";
  Expected<Manifest> m = parseManifest(
      withLine(10, "arg 4 label y i32 8 batch_dim=0 global=16 classes=4 "
                   "ignore_index=-100"));
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->args[4].ignoreIndex, std::optional<int64_t>(-100));
}

TEST(ManifestTest, ParsesTheStepFlops) {
  // Line 6 is the first arg; the record may stand anywhere before end.
  Expected<Manifest> flops = parseManifest(
      withLine(6, "flops 1171456\narg 0 param fc1.weight f32 64x16 "
                  "init=normal:0.25"));
  ASSERT_TRUE(flops.ok()) << flops.message();
  EXPECT_EQ(flops->stepFlops, 1171456);
  EXPECT_EQ(parseManifest(kGood)->stepFlops, 0) << "optional";
  EXPECT_EQ(errorOf(withLine(6, "flops -3")),
            "manifest line 6: 'flops' takes one field, the step's FLOPs (an "
            "integer >= 0)");
  EXPECT_EQ(errorOf(withLine(6, "flops 1 2")),
            "manifest line 6: 'flops' takes one field, the step's FLOPs (an "
            "integer >= 0)");
  EXPECT_EQ(errorOf(withLine(6, "flops 1\nflops 2")),
            "manifest line 7: duplicate 'flops' record (first on line 6)");
}

TEST(ManifestTest, ParsesSites) {
  Expected<Manifest> m = parseManifest(withLine(
      6, "site 0 op=train.linear layer=h.0 loc=gpt.mlir:16 "
         "shapes=8x16xf32,64x16xf32->8x64xf32\nsite 1 op=train.relu\n"
         "arg 0 param fc1.weight f32 64x16 init=normal:0.25"));
  ASSERT_TRUE(m.ok()) << m.message();
  ASSERT_EQ(m->sites.size(), 2u);
  EXPECT_EQ(m->sites[0].op, "train.linear");
  EXPECT_EQ(m->sites[0].layer, "h.0");
  EXPECT_EQ(m->sites[0].loc, "gpt.mlir:16");
  EXPECT_EQ(m->sites[0].shapes, "8x16xf32,64x16xf32->8x64xf32");
  EXPECT_EQ(m->sites[1].op, "train.relu");
  EXPECT_TRUE(m->sites[1].layer.empty() && m->sites[1].loc.empty());
  EXPECT_TRUE(parseManifest(kGood)->sites.empty()) << "optional";
  auto siteError = [](const std::string &site) {
    return errorOf(withLine(
        6, (site + "\narg 0 param fc1.weight f32 64x16 init=normal:0.25")
               .c_str()));
  };
  EXPECT_EQ(siteError("site 1 op=a"),
            "manifest line 6: site index 1 is out of order; expected 0");
  EXPECT_EQ(siteError("site 0 layer=h.0"),
            "manifest line 6: site 0 has no op=");
  EXPECT_EQ(siteError("site 0"),
            "manifest line 6: 'site' takes an index and op=NAME, then "
            "layer=, loc= and shapes= where known");
  EXPECT_EQ(siteError("site 0 op=a color=red"),
            "manifest line 6: unknown site field 'color=red'; expected op=, "
            "layer=, loc= or shapes=");
  EXPECT_EQ(siteError("site 0 op=a loc="),
            "manifest line 6: site field 'loc=' has no value");
  EXPECT_EQ(siteError("site 0 op=a op=b"),
            "manifest line 6: site field 'op' appears twice");
}

TEST(ManifestTest, ParsesGradResultsAndAnIntegerStepCounter) {
  Expected<Manifest> parsed = parseManifest(kAdamWithGrad);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  const Manifest &m = *parsed;
  EXPECT_EQ(m.args[2].role, Role::OptState);
  EXPECT_EQ(m.args[2].dtype, ASRT_DTYPE_I32);
  EXPECT_TRUE(m.args[2].shape.empty());
  EXPECT_EQ(m.results[2].updates, 2);
  const TensorSpec &grad = m.results[3];
  EXPECT_EQ(grad.role, Role::Grad);
  EXPECT_EQ(grad.gradOf, 0);
  EXPECT_EQ(grad.updates, -1);
  EXPECT_EQ(grad.describe(), "result 3 (grad w.grad)");
  EXPECT_EQ(m.results[0].gradOf, -1);
  EXPECT_TRUE(m.hasGradResults());
  EXPECT_EQ(m.lossResult(), 4);
  EXPECT_EQ(m.gradNormSqResult(), -1);
  EXPECT_FALSE(parseManifest(kGood)->hasGradResults());

  // Under mixed precision the gradient may be bf16 for an f32 param.
  Expected<Manifest> bf16 = parseManifest(
      withLine(14, "result 3 grad w.grad bf16 4x8 of=0", kAdamWithGrad));
  ASSERT_TRUE(bf16.ok()) << bf16.message();
  EXPECT_EQ(bf16->results[3].dtype, ASRT_DTYPE_BF16);
}

TEST(ManifestTest, ParsesOffloadedArguments) {
  Expected<Manifest> parsed = parseManifest(kOffload);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  const Manifest &m = *parsed;
  EXPECT_EQ(m.args[0].memory, MemoryKind::Device);
  EXPECT_EQ(m.args[1].memory, MemoryKind::Host);
  EXPECT_EQ(m.args[2].memory, MemoryKind::Nvme);
  EXPECT_EQ(m.args[3].memory, MemoryKind::Device);
  EXPECT_EQ(m.args[4].memory, MemoryKind::Device);
  EXPECT_EQ(m.results[1].memory, MemoryKind::Host);
  EXPECT_EQ(m.results[2].memory, MemoryKind::Nvme);
  EXPECT_EQ(m.results[4].memory, MemoryKind::Device);
  EXPECT_EQ(m.countArgsIn(MemoryKind::Host), 1);
  EXPECT_EQ(m.countArgsIn(MemoryKind::Nvme), 1);
  EXPECT_EQ(m.argBytesIn(MemoryKind::Nvme), 64);
  EXPECT_EQ(m.argBytesIn(MemoryKind::Device), 128 + 4 + 256 + 32);
  EXPECT_EQ(m.plannedBytes("host_persistent"), 64);
  EXPECT_EQ(m.plannedBytes("host_arena"), 32);
  EXPECT_EQ(m.plannedBytes("nvme"), 64);
  EXPECT_EQ(m.plannedBytes("arena"), 40);
  EXPECT_STREQ(memoryKindName(MemoryKind::Nvme), "nvme");
  EXPECT_STREQ(memoryKindName(MemoryKind::Host), "host");
  EXPECT_STREQ(memoryKindName(MemoryKind::Device), "device");
  EXPECT_EQ(parseManifest(kGood)->countArgsIn(MemoryKind::Nvme), 0);
}

TEST(ManifestTest, ParsesTheDocumentedShardedExample) {
  const char *doc =
      "autoshard-manifest 1\n"
      "abi 6\n"
      "step train_step\n"
      "strategy zero3\n"
      "grid 2x2\n"
      "arg 0 param w f32 4 init=normal:0.1 full=5x3 shard_axes=3\n"
      "arg 1 param b f32 1 init=zeros full=3 shard_axes=3\n"
      "arg 2 opt_state w.momentum f32 4 init=zeros full=5x3 shard_axes=3\n"
      "arg 3 opt_state b.momentum f32 1 init=zeros full=3 shard_axes=3\n"
      "arg 4 input x f32 4x3 batch_dim=0 global=16\n"
      "arg 5 label y i32 4 batch_dim=0 global=16 classes=5\n"
      "result 0 param w f32 4 updates=0 full=5x3 shard_axes=3\n"
      "result 1 param b f32 1 updates=1 full=3 shard_axes=3\n"
      "result 2 opt_state w.momentum f32 4 updates=2 full=5x3 shard_axes=3\n"
      "result 3 opt_state b.momentum f32 1 updates=3 full=3 shard_axes=3\n"
      "result 4 grad w.grad f32 4 of=0 full=5x3 shard_axes=3\n"
      "result 5 loss loss f32 scalar\n"
      "end\n";
  Expected<Manifest> parsed = parseManifest(doc);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(parsed->args[0].globalElements(), 15);
  EXPECT_EQ(parsed->groupSize(parsed->args[0].shardAxes), 4);
}

TEST(ManifestTest, ParsesShardedTensors) {
  Expected<Manifest> parsed = parseManifest(kSharded);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  const Manifest &m = *parsed;
  const TensorSpec &w = m.args[0];
  EXPECT_TRUE(w.isSharded());
  EXPECT_EQ(w.shardAxes, 2);
  EXPECT_EQ(w.fullShape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(w.globalShape(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(w.globalElements(), 15);
  EXPECT_EQ(w.shape, std::vector<int64_t>{8}) << "ceil(15 / 2)";
  EXPECT_EQ(w.numElements(), 8);
  EXPECT_EQ(w.numBytes(), 32) << "a rank allocates its shard";
  EXPECT_EQ(m.groupSize(w.shardAxes), 2);
  EXPECT_EQ(m.args[1].shape, std::vector<int64_t>{4}) << "ceil(15 / 4)";
  EXPECT_EQ(m.groupSize(m.args[1].shardAxes), 4);
  // Fewer elements than ranks: one element per shard, some all padding.
  EXPECT_EQ(m.args[2].shape, std::vector<int64_t>{1});
  const TensorSpec &scale = m.args[3];
  EXPECT_TRUE(scale.isSharded());
  EXPECT_TRUE(scale.globalShape().empty());
  EXPECT_EQ(scale.globalElements(), 1);
  EXPECT_FALSE(m.args[4].isSharded());
  EXPECT_EQ(m.args[4].globalShape(), m.args[4].shape);
  EXPECT_EQ(m.results[0].fullShape, w.fullShape);
  EXPECT_EQ(m.results[2].shardAxes, 2);
  EXPECT_FALSE(m.results[3].isSharded());
  EXPECT_EQ(m.results[3].gradOf, 2);
}

TEST(ManifestTest, AcceptsCrLfBlankLinesAndAnyBatchDim) {
  std::string text = withLine(6, "\narg 0 param fc1.weight f32 64x16 "
                                 "init=uniform:0.5\r");
  text = text.replace(text.find("arg 3 input x f32 8x16 batch_dim=0"),
                      std::string("arg 3 input x f32 8x16 batch_dim=0").size(),
                      "arg 3 input x f32 16x8 batch_dim=1");
  Expected<Manifest> m = parseManifest(text);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->args[0].init->kind, InitKind::Uniform);
  EXPECT_EQ(m->args[3].batchDim, 1);
  EXPECT_EQ(m->args[3].localRows(), 8);
  EXPECT_EQ(m->args[3].rowShape(), std::vector<int64_t>{16});
}

TEST(ManifestTest, ParsesTwoDimensionalGrids) {
  std::string text = withLine(5, "grid 2x1");
  Expected<Manifest> m = parseManifest(text);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->grid, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(m->gridString(), "2x1");
}

TEST(ManifestTest, InitSpecs) {
  EXPECT_EQ(parseInitSpec("zeros")->kind, InitKind::Zeros);
  EXPECT_EQ(parseInitSpec("ones")->kind, InitKind::Ones);
  EXPECT_DOUBLE_EQ(parseInitSpec("uniform:0.5")->value, 0.5);
  EXPECT_DOUBLE_EQ(parseInitSpec("constant:-3")->value, -3.0);
  EXPECT_EQ(formatInitSpec(*parseInitSpec("normal:0.02")), "normal:0.02");
  EXPECT_NE(parseInitSpec("gaussian:1")
                .message()
                .find("unknown init kind 'gaussian'"),
            std::string::npos);
  EXPECT_NE(parseInitSpec("zeros:1").message().find("takes no value"),
            std::string::npos);
  EXPECT_NE(
      parseInitSpec("normal").message().find("needs a value (normal:STD)"),
      std::string::npos);
  EXPECT_NE(parseInitSpec("normal:abc").message().find("not a finite number"),
            std::string::npos);
  EXPECT_NE(parseInitSpec("constant:inf").message().find("not a finite number"),
            std::string::npos);
  EXPECT_NE(parseInitSpec("normal:-1")
                .message()
                .find("standard deviation must not be negative"),
            std::string::npos);
  EXPECT_NE(
      parseInitSpec("uniform:-1").message().find("bound must not be negative"),
      std::string::npos);
}

// A model imported from PyTorch: values from a file, a tied weight saved
// under its second name too.
TEST(ManifestTest, LoadInitAndAliases) {
  std::string text = withLine(6, "arg 0 param fc1.weight f32 64x16 "
                                 "init=load aliases=head.weight,tied");
  text = withLine(8, "arg 2 opt_state fc1.weight.momentum f32 64x16 init=load",
                  text.c_str());
  Expected<Manifest> m = parseManifest(text);
  ASSERT_TRUE(m.ok()) << m.message();
  const TensorSpec &w = m->args[0];
  EXPECT_EQ(w.init->kind, InitKind::Load);
  EXPECT_TRUE(w.initFromFile());
  EXPECT_TRUE(m->args[2].initFromFile());
  EXPECT_FALSE(m->args[1].initFromFile());
  EXPECT_EQ(w.aliases, (std::vector<std::string>{"head.weight", "tied"}));
  EXPECT_EQ(w.fileNames(),
            (std::vector<std::string>{"fc1.weight", "head.weight", "tied"}));
  EXPECT_EQ(m->args[1].fileNames(), std::vector<std::string>{"fc1.bias"});
  EXPECT_EQ(m->findArgByFileName("tied"), &w);
  EXPECT_EQ(m->findArgByFileName("fc1.weight"), &w);
  EXPECT_EQ(m->findArgByFileName("fc1.bias"), &m->args[1]);
  EXPECT_EQ(m->findArg("tied"), nullptr);
  EXPECT_EQ(m->findArgByFileName("head"), nullptr);
  EXPECT_EQ(formatInitSpec(*w.init), "load");
  EXPECT_NE(parseInitSpec("load:1").message().find(
                "init=load takes no value, found 'load:1'"),
            std::string::npos);
}

struct BadCase {
  const char *label;
  std::string text;
  const char *message;
};

std::ostream &operator<<(std::ostream &os, const BadCase &c) {
  return os << c.label;
}

class ManifestErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ManifestErrorTest, NamesLineAndProblem) {
  const BadCase &c = GetParam();
  std::string message = errorOf(c.text);
  EXPECT_NE(message.find(c.message), std::string::npos)
      << "message: " << message << "\nexpected to contain: " << c.message;
}

// One case per diagnostic of the parser.
INSTANTIATE_TEST_SUITE_P(
    Diagnostics, ManifestErrorTest,
    ::testing::Values(
        BadCase{"Empty", "", "manifest is empty"},
        BadCase{"NotAManifest", "hello world\n",
                "manifest line 1: expected 'autoshard-manifest 1' as the "
                "first line"},
        BadCase{"VersionNotInteger", withLine(1, "autoshard-manifest one"),
                "manifest line 1: manifest format version 'one' is not an "
                "integer"},
        BadCase{"UnsupportedVersion", withLine(1, "autoshard-manifest 2"),
                "manifest line 1: manifest format version 2 is not "
                "supported; this runtime reads version 1"},
        BadCase{"EmptyField", withLine(3, "step  train_step"),
                "manifest line 3: empty field"},
        BadCase{"TextAfterEnd", std::string(kGood) + "arg 9\n",
                "manifest line 15: unexpected text after the 'end' record"},
        BadCase{"NoEnd", withLine(14, nullptr),
                "manifest ends without an 'end' record"},
        BadCase{"EndWithFields", withLine(14, "end now"),
                "manifest line 14: 'end' takes no fields"},
        BadCase{"SecondHeader", withLine(2, "autoshard-manifest 1"),
                "manifest line 2: duplicate 'autoshard-manifest' record"},
        BadCase{"UnknownRecord", withLine(4, "stratagem ddp"),
                "manifest line 4: unknown record 'stratagem'"},
        BadCase{"DuplicateGrid",
                withLine(6, "grid 2\narg 0 param fc1.weight f32 64x16 "
                            "init=normal:0.25"),
                "manifest line 6: duplicate 'grid' record (first on line 5)"},
        BadCase{"StepFieldCount", withLine(3, "step a b"),
                "manifest line 3: 'step' takes one field (step NAME), found "
                "2"},
        BadCase{"AbiNotInteger", withLine(2, "abi x"),
                "manifest line 2: ABI version 'x' is not an integer"},
        BadCase{"AbiMismatch", withLine(2, "abi 1"),
                "manifest line 2: the step was generated for runtime ABI "
                "version 1 but this runtime implements version 6"},
        BadCase{"BadGrid", withLine(5, "grid 2x0"),
                "manifest line 5: bad grid '2x0'"},
        BadCase{"HugeGrid", withLine(5, "grid 65536x65536"),
                "manifest line 5: grid '65536x65536' is too large"},
        BadCase{"BadStepName", withLine(3, "step train/step"),
                "manifest line 3: bad step name 'train/step'"},
        BadCase{"TooFewFields", withLine(7, "arg 1 param fc1.bias f32"),
                "manifest line 7: 'arg' needs at least 5 fields"},
        BadCase{"IndexNotInteger",
                withLine(7, "arg one param fc1.bias f32 64 init=zeros"),
                "manifest line 7: arg index 'one' is not an integer"},
        BadCase{"IndexOutOfOrder",
                withLine(7, "arg 2 param fc1.bias f32 64 init=zeros"),
                "manifest line 7: expected arg 1, found arg 2"},
        BadCase{"UnknownArgRole",
                withLine(7, "arg 1 weight fc1.bias f32 64 init=zeros"),
                "manifest line 7: unknown arg role 'weight'; expected param, "
                "opt_state, input, label or hyper"},
        BadCase{"UnknownResultRole",
                withLine(13, "result 1 input loss f32 scalar"),
                "manifest line 13: unknown result role 'input'; expected "
                "param, opt_state, loss, grad or grad_norm_sq"},
        BadCase{"BadName",
                withLine(7, "arg 1 param fc1/bias f32 64 init=zeros"),
                "manifest line 7: bad name 'fc1/bias'"},
        BadCase{"UnknownDtype",
                withLine(7, "arg 1 param fc1.bias f33 64 init=zeros"),
                "manifest line 7: unknown dtype 'f33'; expected one of f32, "
                "i32, bf16, f16, i64, u16"},
        BadCase{"BadShape",
                withLine(7, "arg 1 param fc1.bias f32 64x init=zeros"),
                "manifest line 7: bad shape '64x'"},
        BadCase{"ZeroDim", withLine(7, "arg 1 param fc1.bias f32 0 init=zeros"),
                "manifest line 7: bad shape '0'"},
        BadCase{"FieldWithoutEquals",
                withLine(7, "arg 1 param fc1.bias f32 64 zeros"),
                "manifest line 7: bad field 'zeros'; expected KEY=VALUE"},
        BadCase{"KeyNotValidForRole",
                withLine(7, "arg 1 param fc1.bias f32 64 init=zeros "
                            "classes=3"),
                "manifest line 7: key 'classes' is not valid for param args; "
                "valid keys: init"},
        BadCase{"KeyOnLoss",
                withLine(13, "result 1 loss loss f32 scalar updates=1"),
                "manifest line 13: key 'updates' is not valid for loss "
                "results; valid keys: none"},
        BadCase{"DuplicateKey",
                withLine(7, "arg 1 param fc1.bias f32 64 init=zeros "
                            "init=ones"),
                "manifest line 7: duplicate key 'init'"},
        BadCase{"IntegerKeyNotInteger",
                withLine(9, "arg 3 input x f32 8x16 batch_dim=0 global=many"),
                "manifest line 9: global=many is not an integer"},
        BadCase{"BadInit",
                withLine(7, "arg 1 param fc1.bias f32 64 init=gaussian:1"),
                "manifest line 7: unknown init kind 'gaussian'"},
        BadCase{"NormalInitOnInteger",
                withLine(7, "arg 1 param fc1.bias i32 64 init=normal:1"),
                "manifest line 7: init=normal:1 needs a float dtype but the "
                "dtype is i32"},
        BadCase{"FractionalConstantOnInteger",
                withLine(7, "arg 1 param fc1.bias i64 64 init=constant:0.5"),
                "manifest line 7: init=constant:0.5 is not an integer"},
        BadCase{"BatchDimOutOfRange",
                withLine(9, "arg 3 input x f32 8x16 batch_dim=2 global=16"),
                "manifest line 9: batch_dim=2 is out of range for shape 8x16; "
                "expected 0..1"},
        BadCase{"ScalarBatch",
                withLine(9, "arg 3 input x f32 scalar batch_dim=0 global=16"),
                "a batched tensor cannot be a scalar"},
        BadCase{"GlobalZero",
                withLine(9, "arg 3 input x f32 8x16 batch_dim=0 global=0"),
                "manifest line 9: global=0 must be at least 1"},
        BadCase{"ClassesZero",
                withLine(10, "arg 4 label y i32 8 batch_dim=0 global=16 "
                             "classes=0"),
                "manifest line 10: classes=0 must be at least 1"},
        BadCase{"ClassesOnFloat",
                withLine(10, "arg 4 label y f32 8 batch_dim=0 global=16 "
                             "classes=4"),
                "manifest line 10: classes= needs an integer dtype but y is "
                "f32"},
        BadCase{"IgnoreIndexOnInput",
                withLine(9, "arg 3 input x f32 8x16 batch_dim=0 global=16 "
                            "ignore_index=-100"),
                "manifest line 9: key 'ignore_index' is not valid for input "
                "args; valid keys: batch_dim, global, classes"},
        BadCase{"IgnoreIndexBeyondInt32",
                withLine(10, "arg 4 label y i32 8 batch_dim=0 global=16 "
                             "classes=4 ignore_index=2147483648"),
                "manifest line 10: ignore_index=2147483648 is outside the "
                "int32 range of labels"},
        BadCase{"IgnoreIndexOnI64Label",
                withLine(10, "arg 4 label y i64 8 batch_dim=0 global=16 "
                             "classes=4 ignore_index=-100"),
                "manifest line 10: ignore_index= needs an i32 label but y is "
                "i64"},
        BadCase{"NegativeUpdates",
                withLine(12, "result 0 param fc1.weight f32 64x16 "
                             "updates=-1"),
                "manifest line 12: updates=-1 must name an argument index"},
        // Found by asrt-fuzz-manifest: an index past int's range wrapped
        // negative and was read before the argument list.
        BadCase{"UpdatesPastIntRange",
                withLine(12, "result 0 param fc1.weight f32 64x16 "
                             "updates=8000996621730"),
                "manifest line 12: updates=8000996621730 must name an "
                "argument index >= 0 (at most 2147483647)"},
        // Found by asrt-fuzz-manifest: the synthetic batches drew labels
        // past int32's range and stored them into the i32 label.
        BadCase{"ClassesPastTheLabelDtype",
                withLine(10, "arg 4 label y i32 8 batch_dim=0 global=16 "
                             "classes=2555555555555555555"),
                "manifest line 10: classes=2555555555555555555 is more than "
                "i32 labels hold; at most 2147483648"},
        BadCase{"MissingInit", withLine(7, "arg 1 param fc1.bias f32 64"),
                "manifest line 7: arg 1 (param fc1.bias) needs "
                "init=KIND[:VALUE]"},
        BadCase{"MissingBatchDim",
                withLine(9, "arg 3 input x f32 8x16 global=16"),
                "manifest line 9: arg 3 (input x) needs batch_dim=D"},
        BadCase{"MissingGlobal",
                withLine(9, "arg 3 input x f32 8x16 batch_dim=0"),
                "manifest line 9: arg 3 (input x) needs global=G"},
        BadCase{"MissingClasses",
                withLine(10, "arg 4 label y i32 8 batch_dim=0 global=16"),
                "manifest line 10: arg 4 (label y) needs classes=C"},
        BadCase{"MissingUpdates",
                withLine(12, "result 0 param fc1.weight f32 64x16"),
                "manifest line 12: result 0 (param fc1.weight) needs "
                "updates=I"},
        BadCase{"MissingStrategy", withLine(4, nullptr),
                "manifest line 13: the manifest has no 'strategy' record"},
        BadCase{"LoadInitOnHyper",
                withLine(11, "arg 5 hyper lr f32 scalar init=load"),
                "manifest line 11: init=load is for params and opt_states, "
                "which parameter files hold; hyper lr needs a value"},
        BadCase{"AliasesOnOptState",
                withLine(8, "arg 2 opt_state fc1.weight.momentum f32 64x16 "
                            "init=zeros aliases=m"),
                "manifest line 8: key 'aliases' is not valid for opt_state "
                "args; valid keys: init, full, shard_axes, memory"},
        BadCase{"BadAlias",
                withLine(6, "arg 0 param fc1.weight f32 64x16 init=zeros "
                            "aliases=a,,b"),
                "manifest line 6: bad alias '' in 'aliases=a,,b'; aliases "
                "are names ([A-Za-z0-9_.]) joined by ','"},
        BadCase{"AliasListedTwice",
                withLine(6, "arg 0 param fc1.weight f32 64x16 init=zeros "
                            "aliases=a,b,a"),
                "manifest line 6: 'aliases=a,b,a' lists 'a' twice"},
        BadCase{"AliasIsAName",
                withLine(6, "arg 0 param fc1.weight f32 64x16 init=zeros "
                            "aliases=fc1.bias"),
                "manifest line 6: arg 0 (param fc1.weight) has the alias "
                "'fc1.bias', the name of arg 1 (param fc1.bias); a name in a "
                "parameter file stands for one tensor"},
        BadCase{"AliasOfTwoParams",
                withLine(7, "arg 1 param fc1.bias f32 64 init=zeros aliases=t",
                         withLine(6, "arg 0 param fc1.weight f32 64x16 "
                                     "init=zeros aliases=t")
                             .c_str()),
                "manifest line 7: arg 1 (param fc1.bias) has the alias 't' "
                "of arg 0 (param fc1.weight); a name in a parameter file "
                "stands for one tensor"},
        BadCase{"DuplicateArgName",
                withLine(7, "arg 1 param fc1.weight f32 64 init=zeros"),
                "manifest line 7: duplicate argument name 'fc1.weight' "
                "(first on line 6)"},
        BadCase{"DifferentGlobalBatches",
                withLine(10, "arg 4 label y i32 8 batch_dim=0 global=32 "
                             "classes=4"),
                "all inputs and labels share one global batch"},
        BadCase{"LocalBatchDoesNotMatchWorld",
                withLine(9, "arg 3 input x f32 16x16 batch_dim=0 global=16"),
                "manifest line 9: arg 3 (input x) holds 16 rows along "
                "batch_dim 0, but global=16 over world size 2 (grid 2) "
                "needs 8 per rank"},
        BadCase{"GlobalNotDivisible",
                withLine(9, "arg 3 input x f32 8x16 batch_dim=0 global=15"),
                "needs a multiple of the world size"},
        BadCase{"DuplicateResultName",
                withLine(13, "result 1 loss fc1.weight f32 scalar"),
                "manifest line 13: duplicate result name 'fc1.weight'"},
        BadCase{"SecondLoss", withLine(12, "result 0 loss loss0 f32 scalar"),
                "manifest line 13: a second loss result (the first is on "
                "line 12)"},
        BadCase{"LossNotScalarF32", withLine(13, "result 1 loss loss f32 2"),
                "manifest line 13: the loss must be one f32 element, found "
                "f32 2"},
        BadCase{"SecondGradNormSq",
                withLine(13, "result 1 loss loss f32 scalar\n"
                             "result 2 grad_norm_sq grad_norm_sq f32 scalar\n"
                             "result 3 grad_norm_sq again f32 scalar"),
                "manifest line 15: a second grad_norm_sq result (the first "
                "is on line 14); a step has at most one"},
        BadCase{"GradNormSqNotScalarF32",
                withLine(13, "result 1 loss loss f32 scalar\n"
                             "result 2 grad_norm_sq grad_norm_sq bf16 scalar"),
                "manifest line 14: the squared gradient norm must be one f32 "
                "element, found bf16 scalar"},
        BadCase{"GradNormSqIsAResult",
                withLine(6, "arg 0 grad_norm_sq fc1.weight f32 64x16"),
                "manifest line 6: unknown arg role 'grad_norm_sq'"},
        BadCase{"UpdatesNamesNoArgument",
                withLine(12, "result 0 param fc1.weight f32 64x16 "
                             "updates=6"),
                "manifest line 12: updates=6 names no argument; the step has "
                "6 arguments (0..5)"},
        BadCase{"UpdatesMismatch",
                withLine(12, "result 0 param fc1.weight f32 64x16 "
                             "updates=1"),
                "a result must match the argument it replaces"},
        BadCase{"UpdatedTwice",
                withLine(13, "result 1 param fc1.weight2 f32 64x16 updates=0\n"
                             "result 2 loss loss f32 scalar"),
                "manifest line 13: argument 0 is already updated by the "
                "result on line 12"},
        BadCase{"NoLoss", withLine(13, nullptr),
                "manifest line 13: the manifest has no loss result"},
        // Gradient results (kAdamWithGrad, line 14 is the grad result).
        BadCase{"GradWithoutOf",
                withLine(14, "result 3 grad w.grad f32 4x8", kAdamWithGrad),
                "manifest line 14: result 3 (grad w.grad) needs of=J naming "
                "the param it is the gradient of"},
        BadCase{"GradWithUpdates",
                withLine(14, "result 3 grad w.grad f32 4x8 updates=0",
                         kAdamWithGrad),
                "manifest line 14: key 'updates' is not valid for grad "
                "results; valid keys: of"},
        BadCase{"OfOnParamResult",
                withLine(11, "result 0 param w f32 4x8 updates=0 of=0",
                         kAdamWithGrad),
                "manifest line 11: key 'of' is not valid for param results; "
                "valid keys: updates"},
        BadCase{
            "NegativeOf",
            withLine(14, "result 3 grad w.grad f32 4x8 of=-1", kAdamWithGrad),
            "manifest line 14: of=-1 must name an argument index >= 0"},
        BadCase{"OfPastIntRange",
                withLine(14, "result 3 grad w.grad f32 4x8 of=4294967296",
                         kAdamWithGrad),
                "manifest line 14: of=4294967296 must name an argument index "
                ">= 0 (at most 2147483647)"},
        BadCase{
            "OfNamesNoArgument",
            withLine(14, "result 3 grad w.grad f32 4x8 of=5", kAdamWithGrad),
            "manifest line 14: of=5 names no argument; the step has 5 "
            "arguments (0..4)"},
        BadCase{
            "OfNamesAnOptState",
            withLine(14, "result 3 grad w.grad f32 4x8 of=1", kAdamWithGrad),
            "manifest line 14: result 3 (grad w.grad) has of=1, but arg 1 "
            "(opt_state w.exp_avg) is not a param; gradients are exposed "
            "for params only"},
        BadCase{
            "GradShapeMismatch",
            withLine(14, "result 3 grad w.grad f32 8x4 of=0", kAdamWithGrad),
            "manifest line 14: result 3 (grad w.grad) has shape 8x4 but "
            "arg 0 (param w) has shape 4x8; a gradient has the shape of "
            "its param"},
        BadCase{
            "GradNotFloat",
            withLine(14, "result 3 grad w.grad i32 4x8 of=0", kAdamWithGrad),
            "manifest line 14: result 3 (grad w.grad) is i32; a gradient "
            "has a float dtype (f32, bf16 or f16)"},
        BadCase{"GradTwice",
                withLine(15,
                         "result 4 grad w.grad2 f32 4x8 of=0\n"
                         "result 5 loss loss f32 scalar",
                         kAdamWithGrad),
                "manifest line 15: the gradient of arg 0 (param w) is already "
                "exposed by the result on line 14"},
        // Sharded tensors (kSharded).
        BadCase{
            "FullWithoutShardAxes",
            withLine(6, "arg 0 param w f32 8 init=zeros full=5x3", kSharded),
            "manifest line 6: arg 0 (param w) has full= but no "
            "shard_axes=MASK; a sharded tensor needs both, a replicated "
            "one neither"},
        BadCase{"ShardAxesWithoutFull",
                withLine(11, "result 0 param w f32 8 updates=0 shard_axes=2",
                         kSharded),
                "manifest line 11: result 0 (param w) has shard_axes= but no "
                "full=SHAPE"},
        BadCase{"BadFullShape",
                withLine(6,
                         "arg 0 param w f32 8 init=zeros full=5x "
                         "shard_axes=2",
                         kSharded),
                "manifest line 6: bad full shape '5x'; expected the global "
                "shape"},
        BadCase{"ShardAxesZero",
                withLine(6,
                         "arg 0 param w f32 15 init=zeros full=5x3 "
                         "shard_axes=0",
                         kSharded),
                "manifest line 6: shard_axes=0 is not a grid axis mask; "
                "expected a mask >= 1"},
        BadCase{"ShardAxesNotInteger",
                withLine(6,
                         "arg 0 param w f32 8 init=zeros full=5x3 "
                         "shard_axes=x",
                         kSharded),
                "manifest line 6: shard_axes=x is not an integer"},
        BadCase{"ShardAxesOutsideTheGrid",
                withLine(6,
                         "arg 0 param w f32 8 init=zeros full=5x3 "
                         "shard_axes=4",
                         kSharded),
                "manifest line 6: arg 0 (param w) has shard_axes=4, which "
                "names an axis the grid 2x2 does not have; valid masks are "
                "1..3"},
        BadCase{"WrongShardSize",
                withLine(6,
                         "arg 0 param w f32 7 init=zeros full=5x3 "
                         "shard_axes=2",
                         kSharded),
                "manifest line 6: arg 0 (param w) has full=5x3 (15 elements) "
                "sharded over 2 ranks (shard_axes=2 of grid 2x2), so its "
                "shape must be the flat shard 8 = ceil(15 / 2), found 7"},
        BadCase{"ShardNotFlat",
                withLine(12,
                         "result 1 opt_state w.exp_avg f32 2x2 updates=1 "
                         "full=5x3 shard_axes=3",
                         kSharded),
                "manifest line 12: result 1 (opt_state w.exp_avg) has "
                "full=5x3 (15 elements) sharded over 4 ranks (shard_axes=3 "
                "of grid 2x2), so its shape must be the flat shard 4 = "
                "ceil(15 / 4), found 2x2"},
        BadCase{"ShardedInput",
                withLine(10,
                         "arg 4 input x f32 4x3 batch_dim=0 global=16 "
                         "full=16x3",
                         kSharded),
                "manifest line 10: key 'full' is not valid for input args; "
                "valid keys: batch_dim, global, classes"},
        BadCase{"ShardedHyper",
                withLine(11,
                         "arg 5 hyper lr f32 scalar init=ones "
                         "full=scalar shard_axes=1",
                         kGood),
                "manifest line 11: key 'full' is not valid for hyper args; "
                "valid keys: init"},
        BadCase{"UpdatesShardingMismatch",
                withLine(11, "result 0 param w f32 8 updates=0", kSharded),
                "manifest line 11: result 0 (param w) is f32 8 but updates "
                "arg 0 (param w), which is param f32 8 full=5x3 "
                "shard_axes=2; a result must match the argument it "
                "replaces"},
        BadCase{"GradFullShapeMismatch",
                withLine(13,
                         "result 2 grad w.grad f32 8 of=0 full=3x5 "
                         "shard_axes=2",
                         kSharded),
                "manifest line 13: result 2 (grad w.grad) has full shape 3x5 "
                "(sharded) but arg 0 (param w) has full shape 5x3 (sharded); "
                "a gradient has the shape of its param (the full shape where "
                "either is sharded)"},
        BadCase{"ReplicatedGradOfShardedParamShape",
                withLine(13, "result 2 grad w.grad f32 8 of=0", kSharded),
                "manifest line 13: result 2 (grad w.grad) has shape 8 but "
                "arg 0 (param w) has full shape 5x3 (sharded)"}),
    [](const ::testing::TestParamInfo<BadCase> &info) {
      return std::string(info.param.label);
    });

// One case per offload diagnostic (kOffload: line 7 is the host state's
// arg, 8 the nvme one's; 13 and 14 their results).
INSTANTIATE_TEST_SUITE_P(
    OffloadDiagnostics, ManifestErrorTest,
    ::testing::Values(
        BadCase{"UnknownMemory",
                withLine(7,
                         "arg 1 opt_state w.exp_avg f32 16 init=zeros "
                         "full=4x8 shard_axes=1 memory=gpu",
                         kOffload),
                "manifest line 7: memory=gpu is not valid; expected device, "
                "host (ZeRO-Offload) or nvme (ZeRO-Infinity)"},
        BadCase{"MemoryOnInput",
                withLine(10,
                         "arg 4 input x f32 8x8 batch_dim=0 global=16 "
                         "memory=host",
                         kOffload),
                "manifest line 10: key 'memory' is not valid for input args; "
                "valid keys: batch_dim, global, classes"},
        BadCase{"MemoryOnLabel",
                withLine(11,
                         "arg 5 label y i32 8 batch_dim=0 global=16 "
                         "classes=4 memory=nvme",
                         kOffload),
                "manifest line 11: key 'memory' is not valid for label args"},
        BadCase{"MemoryOnHyper",
                withLine(11, "arg 5 hyper lr f32 scalar init=constant:0.1 "
                             "memory=host"),
                "manifest line 11: key 'memory' is not valid for hyper args; "
                "valid keys: init"},
        BadCase{
            "MemoryOnLoss",
            withLine(16, "result 4 loss loss f32 scalar memory=host", kOffload),
            "manifest line 16: key 'memory' is not valid for loss "
            "results; valid keys: none"},
        BadCase{"MemoryOnGrad",
                withLine(14, "result 3 grad w.grad f32 4x8 of=0 memory=host",
                         kAdamWithGrad),
                "manifest line 14: key 'memory' is not valid for grad "
                "results; valid keys: of, full, shard_axes"},
        BadCase{"ResultInDeviceMemoryUpdatesAnNvmeArg",
                withLine(14,
                         "result 2 opt_state w.exp_avg_sq f32 16 updates=2 "
                         "full=4x8 shard_axes=1",
                         kOffload),
                "manifest line 14: result 2 (opt_state w.exp_avg_sq) has "
                "memory=device but updates arg 2 (opt_state w.exp_avg_sq), "
                "which has memory=nvme; a result lives where the argument it "
                "replaces lives"},
        BadCase{"ResultInNvmeUpdatesAHostArg",
                withLine(13,
                         "result 1 opt_state w.exp_avg f32 16 updates=1 "
                         "full=4x8 shard_axes=1 memory=nvme",
                         kOffload),
                "manifest line 13: result 1 (opt_state w.exp_avg) has "
                "memory=nvme but updates arg 1 (opt_state w.exp_avg), which "
                "has memory=host"},
        BadCase{"ResultInHostUpdatesADeviceArg",
                withLine(12, "result 0 param w f32 4x8 updates=0 memory=host",
                         kOffload),
                "manifest line 12: result 0 (param w) has memory=host but "
                "updates arg 0 (param w), which has memory=device"}),
    [](const ::testing::TestParamInfo<BadCase> &info) {
      return std::string(info.param.label);
    });

} // namespace
