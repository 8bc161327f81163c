// --load-params, --save-params and --save-grads on plain buffers.
#include "driver/Params.h"
#include "core/Dtype.h"
#include "driver/Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace autoshard::rt;

namespace {

const char *kManifest = "autoshard-manifest 1\n"
                        "abi 6\n"
                        "step train\n"
                        "strategy none\n"
                        "grid 1\n"
                        "arg 0 param w f32 2x3 init=zeros\n"
                        "arg 1 param emb bf16 4 init=zeros\n"
                        "arg 2 opt_state w.exp_avg f32 2x3 init=zeros\n"
                        "arg 3 opt_state step i32 scalar init=zeros\n"
                        "arg 4 hyper lr f32 scalar init=constant:0.1\n"
                        "arg 5 input x f32 2x3 batch_dim=0 global=2\n"
                        "result 0 param w f32 2x3 updates=0\n"
                        "result 1 grad w.grad f32 2x3 of=0\n"
                        "result 2 grad emb.grad bf16 4 of=1\n"
                        "result 3 loss loss f32 scalar\n"
                        "end\n";

Manifest parse(const std::string &text) {
  Expected<Manifest> m = parseManifest(text);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? *m : Manifest();
}

class ParamsTest : public ::testing::Test {
protected:
  void SetUp() override {
    manifest = parse(kManifest);
    path = ::testing::TempDir() + "params_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() +
           ".safetensors";
    for (const TensorSpec &arg : manifest.args)
      storage.emplace_back(static_cast<size_t>(arg.numBytes()), char(0x5a));
    for (auto &s : storage)
      args.push_back(s.data());
  }
  void TearDown() override { std::remove(path.c_str()); }

  void write(const std::vector<TensorView> &tensors) {
    Status s = writeSafetensors(path, tensors);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  /// The params every good file holds.
  std::vector<TensorView> params() const {
    return {{"w", ASRT_DTYPE_F32, {2, 3}, w},
            {"emb", ASRT_DTYPE_BF16, {4}, emb}};
  }
  std::string loadError() {
    Expected<LoadedParams> loaded = loadParams(path, manifest, args, 0);
    EXPECT_FALSE(loaded.ok());
    return loaded.ok() ? std::string() : loaded.message();
  }
  /// The buffers still hold the fill pattern (nothing was copied).
  bool untouched() const {
    for (const auto &s : storage)
      for (char c : s)
        if (c != 0x5a)
          return false;
    return true;
  }

  Manifest manifest;
  std::string path;
  std::vector<std::vector<char>> storage;
  std::vector<void *> args;
  float w[6] = {1, -2, 3, -4, 5, -6};
  uint16_t emb[4] = {floatToBf16(0.5f), floatToBf16(-1), floatToBf16(2),
                     floatToBf16(8)};
  float expAvg[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  int32_t step = 7;
};

TEST_F(ParamsTest, LoadsParamsAndOptStates) {
  std::vector<TensorView> tensors = params();
  tensors.push_back({"w.exp_avg", ASRT_DTYPE_F32, {2, 3}, expAvg});
  tensors.push_back({"step", ASRT_DTYPE_I32, {}, &step});
  write(tensors);
  Expected<LoadedParams> loaded = loadParams(path, manifest, args, 0);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->params, 2);
  EXPECT_EQ(loaded->optStates, 2);
  EXPECT_EQ(std::memcmp(args[0], w, sizeof w), 0);
  EXPECT_EQ(std::memcmp(args[1], emb, sizeof emb), 0);
  EXPECT_EQ(std::memcmp(args[2], expAvg, sizeof expAvg), 0);
  EXPECT_EQ(*static_cast<const int32_t *>(args[3]), 7);
  // Hypers and inputs are not the file's business.
  EXPECT_EQ(storage[4], std::vector<char>(4, 0x5a));
  EXPECT_EQ(storage[5], std::vector<char>(24, 0x5a));
}

TEST_F(ParamsTest, OptStatesMayBeAbsent) {
  write(params());
  Expected<LoadedParams> loaded = loadParams(path, manifest, args, 0);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->params, 2);
  EXPECT_EQ(loaded->optStates, 0);
  EXPECT_EQ(storage[2], std::vector<char>(24, 0x5a));
}

TEST_F(ParamsTest, SaveThenLoadRestoresTheParams) {
  std::memcpy(args[0], w, sizeof w);
  std::memcpy(args[1], emb, sizeof emb);
  ASSERT_TRUE(saveParams(path, manifest, args, 3, 1).ok());
  Expected<SafetensorsFile> file = readSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->tensors.size(), 2u) << "params only";
  EXPECT_EQ(file->metadata.at("steps"), "3");
  std::memset(args[0], 0, sizeof w);
  std::memset(args[1], 0, sizeof emb);
  ASSERT_TRUE(loadParams(path, manifest, args, 0).ok());
  EXPECT_EQ(std::memcmp(args[0], w, sizeof w), 0);
  EXPECT_EQ(std::memcmp(args[1], emb, sizeof emb), 0);
}

TEST_F(ParamsTest, ABestFileRecordsItsEvaluation) {
  std::memcpy(args[0], w, sizeof w);
  std::memcpy(args[1], emb, sizeof emb);
  ASSERT_TRUE(saveParams(path, manifest, args, 40, 1, "--save-best",
                         {{"eval_loss", "1.5419177055358887"},
                          {"eval_after_step", "40"}})
                  .ok());
  Expected<BestEvaluation> best = readBestEvaluation(path);
  ASSERT_TRUE(best.ok()) << best.message();
  EXPECT_DOUBLE_EQ(best->loss, 1.5419177055358887);
  EXPECT_EQ(best->afterStep, 40);
  // A plain --save-params file records no evaluation.
  ASSERT_TRUE(saveParams(path, manifest, args, 40, 1).ok());
  EXPECT_EQ(readBestEvaluation(path).message(),
            "--save-best: '" + path +
                "' records no held-out loss (eval_loss and eval_after_step "
                "in its metadata), so a resumed run cannot tell whether it "
                "holds a better evaluation; move it away, or name another "
                "file");
  ASSERT_TRUE(saveParams(path, manifest, args, 40, 1, "--save-best",
                         {{"eval_loss", "nan"}, {"eval_after_step", "40"}})
                  .ok());
  EXPECT_FALSE(readBestEvaluation(path).ok());
}

TEST_F(ParamsTest, MissingParams) {
  write({{"w.exp_avg", ASRT_DTYPE_F32, {2, 3}, expAvg}});
  EXPECT_EQ(loadError(),
            "--load-params: '" + path +
                "' lacks 2 of the 2 params of step 'train': w, emb (every "
                "param must be in the file; opt_states may be absent and "
                "keep their init= values)");
  EXPECT_TRUE(untouched());
}

TEST_F(ParamsTest, TensorsThatNameNoArgument) {
  std::vector<TensorView> tensors = params();
  tensors.push_back({"fc.weight", ASRT_DTYPE_F32, {2, 3}, w});
  tensors.push_back({"zz", ASRT_DTYPE_I32, {}, &step});
  write(tensors);
  EXPECT_EQ(loadError(), "--load-params: '" + path +
                             "' holds 2 tensors that name no argument of "
                             "step 'train': fc.weight, zz (its params: w, "
                             "emb; its opt_states: w.exp_avg, step)");
  EXPECT_TRUE(untouched());
}

TEST_F(ParamsTest, ManyUnknownNamesAreCut) {
  std::vector<std::string> names;
  std::vector<TensorView> tensors = params();
  for (int i = 0; i < 12; ++i)
    names.push_back("t" + std::to_string(10 + i));
  for (const std::string &name : names)
    tensors.push_back({name, ASRT_DTYPE_I32, {}, &step});
  write(tensors);
  std::string error = loadError();
  EXPECT_NE(error.find("holds 12 tensors that name no argument of step "
                       "'train': t10, t11, t12, t13, t14, t15, t16, t17, "
                       "t18, t19 and 2 more ("),
            std::string::npos)
      << error;
}

// A NaN in a loaded tensor used to be accepted, and the run's first loss
// was then NaN, blamed on the learning rate. Every float tensor of the file
// is checked before anything is copied, naming the first bad element.
TEST_F(ParamsTest, NonFiniteValuesAreRefused) {
  float nanW[6] = {1, -2, 3, -4, std::nanf(""), INFINITY};
  write({{"w", ASRT_DTYPE_F32, {2, 3}, nanW},
         {"emb", ASRT_DTYPE_BF16, {4}, emb}});
  EXPECT_EQ(loadError(),
            "--load-params: tensor 'w' of '" + path +
                "' holds a NaN at element 4 ([1, 1]), the first of its 6 "
                "elements that is not finite; training from it would "
                "diverge at once. Load a file saved before the run diverged");
  EXPECT_TRUE(untouched());

  uint16_t infEmb[4] = {emb[0], emb[1], floatToBf16(-INFINITY), emb[3]};
  write({{"w", ASRT_DTYPE_F32, {2, 3}, w},
         {"emb", ASRT_DTYPE_BF16, {4}, infEmb}});
  EXPECT_NE(loadError().find("tensor 'emb' of '" + path +
                             "' holds -inf at element 2, the first of its 4 "
                             "elements that is not finite"),
            std::string::npos);
  EXPECT_TRUE(untouched());

  // Optimizer states are loaded too, and poison the step alike.
  float infAvg[6] = {0, 0, 0, 0, 0, INFINITY};
  std::vector<TensorView> tensors = params();
  tensors.push_back({"w.exp_avg", ASRT_DTYPE_F32, {2, 3}, infAvg});
  write(tensors);
  EXPECT_NE(loadError().find("tensor 'w.exp_avg' of '" + path +
                             "' holds +inf at element 5 ([1, 2])"),
            std::string::npos);
  EXPECT_TRUE(untouched());
}

TEST_F(ParamsTest, NonFiniteF16IsRefused) {
  std::string text = kManifest;
  text.replace(text.find("emb bf16 4"), 10, "emb f16 4");
  manifest = parse(text);
  // 1.0, a quiet NaN, 0, 0.
  uint16_t half[4] = {0x3c00, 0x7e00, 0, 0};
  write({{"w", ASRT_DTYPE_F32, {2, 3}, w}, {"emb", ASRT_DTYPE_F16, {4}, half}});
  EXPECT_NE(loadError().find("tensor 'emb' of '" + path +
                             "' holds a NaN at element 1, the first of its 4"),
            std::string::npos);
  EXPECT_TRUE(untouched());
  half[1] = 0x7bff; // the largest finite f16 loads
  write({{"w", ASRT_DTYPE_F32, {2, 3}, w}, {"emb", ASRT_DTYPE_F16, {4}, half}});
  Expected<LoadedParams> loaded = loadParams(path, manifest, args, 0);
  EXPECT_TRUE(loaded.ok()) << loaded.message();
}

TEST_F(ParamsTest, WrongDtype) {
  float embAsF32[4] = {};
  write({{"w", ASRT_DTYPE_F32, {2, 3}, w},
         {"emb", ASRT_DTYPE_F32, {4}, embAsF32}});
  EXPECT_EQ(loadError(), "--load-params: tensor 'emb' of '" + path +
                             "' is F32 4 but arg 1 (param emb) is BF16 4; "
                             "dtype and shape must match exactly");
  EXPECT_TRUE(untouched());
}

TEST_F(ParamsTest, WrongShape) {
  std::vector<TensorView> tensors = params();
  tensors[0].shape = {3, 2};
  write(tensors);
  EXPECT_EQ(loadError(), "--load-params: tensor 'w' of '" + path +
                             "' is F32 3x2 but arg 0 (param w) is F32 2x3; "
                             "dtype and shape must match exactly");
}

TEST_F(ParamsTest, OneElementIsNotAScalar) {
  std::vector<TensorView> tensors = params();
  tensors.push_back({"step", ASRT_DTYPE_I32, {1}, &step});
  write(tensors);
  EXPECT_EQ(loadError(), "--load-params: tensor 'step' of '" + path +
                             "' is I32 1 but arg 3 (opt_state step) is I32 "
                             "scalar; dtype and shape must match exactly");
}

TEST_F(ParamsTest, HypersAreNotLoaded) {
  std::vector<TensorView> tensors = params();
  float lr = 1;
  tensors.push_back({"lr", ASRT_DTYPE_F32, {}, &lr});
  write(tensors);
  EXPECT_EQ(loadError(), "--load-params: tensor 'lr' of '" + path +
                             "' names arg 4 (hyper lr); only params and "
                             "opt_states are loaded");
}

TEST_F(ParamsTest, UnreadableFile) {
  EXPECT_EQ(loadError(), "--load-params: cannot open '" + path +
                             "': No such file or directory");
  std::FILE *f = std::fopen(path.c_str(), "wb");
  std::fputs("abc", f);
  std::fclose(f);
  EXPECT_NE(loadError().find("--load-params: '" + path +
                             "' is not a valid safetensors file"),
            std::string::npos);
}

TEST_F(ParamsTest, SavesGradsUnderTheirNames) {
  float gw[6] = {0.5f, 1, 1.5f, 2, 2.5f, 3};
  uint16_t gemb[4] = {1, 2, 3, 4};
  float loss = 0;
  std::vector<void *> results = {args[0], gw, gemb, &loss};
  ASSERT_TRUE(saveGrads(path, manifest, results, 4, 2).ok());
  Expected<SafetensorsFile> file = readSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.message();
  ASSERT_EQ(file->tensors.size(), 2u);
  EXPECT_EQ(file->tensors.at("w.grad").dtype, "F32");
  EXPECT_EQ(file->tensors.at("w.grad").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(file->bytes("w.grad"), gw, sizeof gw), 0);
  EXPECT_EQ(file->tensors.at("emb.grad").dtype, "BF16");
  EXPECT_EQ(std::memcmp(file->bytes("emb.grad"), gemb, sizeof gemb), 0);
  EXPECT_EQ(file->metadata.at("w.grad.of"), "w");
  EXPECT_EQ(file->metadata.at("emb.grad.of"), "emb");
  EXPECT_EQ(file->metadata.at("steps"), "4");
  EXPECT_EQ(file->metadata.at("seed"), "2");
}

TEST_F(ParamsTest, SaveGradsNeedsExposedGradients) {
  EXPECT_TRUE(checkSaveGrads(manifest).ok());
  Manifest none = parse("autoshard-manifest 1\nabi 6\nstep plain\n"
                        "strategy none\ngrid 1\n"
                        "arg 0 param w f32 2 init=zeros\n"
                        "result 0 param w f32 2 updates=0\n"
                        "result 1 loss loss f32 scalar\nend\n");
  const char *expected = "--save-grads: step 'plain' exposes no gradients "
                         "(no result has role grad); compile with exposed "
                         "gradients";
  EXPECT_EQ(checkSaveGrads(none).message(), expected);
  float loss = 0;
  std::vector<void *> results = {args[0], &loss};
  EXPECT_EQ(saveGrads(path, none, results, 1, 0).message(), expected);
}

TEST_F(ParamsTest, SaveErrorsNameTheFlag) {
  std::vector<void *> results = {args[0], args[0], args[1], args[0]};
  EXPECT_EQ(saveGrads("/nonexistent/dir/g.safetensors", manifest, results, 1, 0)
                .message()
                .rfind("--save-grads: cannot create", 0),
            0u);
  EXPECT_EQ(saveParams("/nonexistent/dir/p.safetensors", manifest, args, 1, 0)
                .message()
                .rfind("--save-params: cannot create", 0),
            0u);
}

// ---- init=load and aliases ----------------------------------------------

// An imported model: wte is tied (PyTorch saves it as lm_head.weight too),
// and it and its first moment take their values from a file.
const std::string kTiedManifest =
    "autoshard-manifest 1\n"
    "abi " + std::to_string(ASRT_ABI_VERSION) + "\n"
    "step tied\n"
    "strategy none\n"
    "grid 1\n"
    "arg 0 param wte f32 2x3 init=load aliases=lm_head.weight,head\n"
    "arg 1 param b f32 3 init=zeros\n"
    "arg 2 opt_state wte.exp_avg f32 2x3 init=load\n"
    "arg 3 opt_state b.exp_avg f32 3 init=zeros\n"
    "result 0 loss loss f32 scalar\n"
    "end\n";

class TiedParamsTest : public ParamsTest {
protected:
  void SetUp() override {
    ParamsTest::SetUp();
    // A manifest that does not parse leaves no arguments for the tests to
    // index: stop here rather than read past them.
    Expected<Manifest> tied = parseManifest(kTiedManifest);
    ASSERT_TRUE(tied.ok()) << tied.message();
    manifest = *tied;
    storage.clear();
    args.clear();
    for (const TensorSpec &arg : manifest.args)
      storage.emplace_back(static_cast<size_t>(arg.numBytes()), char(0x5a));
    for (auto &s : storage)
      args.push_back(s.data());
  }
  /// w under `names`, and what every good file holds besides.
  std::vector<TensorView> fileWith(const std::vector<std::string> &names,
                                   const float *values) const {
    std::vector<TensorView> tensors = {
        {"b", ASRT_DTYPE_F32, {3}, bias},
        {"wte.exp_avg", ASRT_DTYPE_F32, {2, 3}, expAvg}};
    for (const std::string &name : names)
      tensors.push_back({name, ASRT_DTYPE_F32, {2, 3}, values});
    return tensors;
  }
  std::vector<float> wte() const {
    std::vector<float> out(6);
    std::memcpy(out.data(), args[0], sizeof(float) * 6);
    return out;
  }

  float bias[3] = {0.5f, 0.25f, 0.125f};
  float other[6] = {9, 8, 7, 6, 5, 4};
};

TEST_F(TiedParamsTest, SavesATiedParamUnderEachName) {
  std::memcpy(args[0], w, sizeof w);
  std::memcpy(args[1], bias, sizeof bias);
  ASSERT_TRUE(saveParams(path, manifest, args, 1, 0).ok());
  Expected<SafetensorsFile> file = readSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.message();
  ASSERT_EQ(file->tensors.size(), 4u) << "wte three times, b once";
  for (const char *name : {"wte", "lm_head.weight", "head"}) {
    const SafetensorsEntry &entry = file->tensors.at(name);
    EXPECT_EQ(entry.dtype, "F32") << name;
    EXPECT_EQ(entry.shape, (std::vector<int64_t>{2, 3})) << name;
    EXPECT_EQ(std::memcmp(file->bytes(name), w, sizeof w), 0) << name;
  }
  // Copies: safetensors entries cannot share their bytes.
  EXPECT_NE(file->tensors.at("wte").begin,
            file->tensors.at("lm_head.weight").begin);
  EXPECT_FALSE(file->tensors.count("wte.exp_avg"));

  // The file loads back, its aliases beside the name.
  std::memset(args[0], 0, sizeof w);
  write(fileWith({"wte", "lm_head.weight", "head"}, w));
  Expected<LoadedParams> loaded = loadParams(path, manifest, args, 0);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->params, 2);
  EXPECT_EQ(loaded->optStates, 1);
  EXPECT_EQ(std::memcmp(args[0], w, sizeof w), 0);
}

TEST_F(TiedParamsTest, LoadsATiedParamFromAnAlias) {
  write(fileWith({"lm_head.weight"}, w));
  Expected<LoadedParams> loaded = loadParams(path, manifest, args, 0);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->params, 2);
  EXPECT_EQ(wte(), std::vector<float>(w, w + 6));
}

TEST_F(TiedParamsTest, TheNameWinsOverAliasesThenTheFirstAlias) {
  // An alias beside the name is not read, even where it differs.
  std::vector<TensorView> tensors = fileWith({"wte"}, w);
  tensors.push_back({"head", ASRT_DTYPE_F32, {2, 3}, other});
  write(tensors);
  ASSERT_TRUE(loadParams(path, manifest, args, 0).ok());
  EXPECT_EQ(wte(), std::vector<float>(w, w + 6));
  // Without the name: the manifest's first alias, not the file's first.
  tensors = fileWith({"lm_head.weight"}, w);
  tensors.push_back({"head", ASRT_DTYPE_F32, {2, 3}, other});
  write(tensors);
  ASSERT_TRUE(loadParams(path, manifest, args, 0).ok());
  EXPECT_EQ(wte(), std::vector<float>(w, w + 6));
}

TEST_F(TiedParamsTest, AnUnreadAliasMustStillFit) {
  std::vector<TensorView> tensors = fileWith({"wte"}, w);
  tensors.push_back({"head", ASRT_DTYPE_F32, {3, 2}, other});
  write(tensors);
  EXPECT_EQ(loadError(), "--load-params: tensor 'head' of '" + path +
                             "' is F32 3x2 but arg 0 (param wte), whose "
                             "alias it is, is F32 2x3; dtype and shape must "
                             "match exactly");
  EXPECT_TRUE(untouched());
}

TEST_F(TiedParamsTest, MissingNamesTheAliasesAndLoadedOptStates) {
  write({{"b", ASRT_DTYPE_F32, {3}, bias}});
  EXPECT_EQ(loadError(),
            "--load-params: '" + path +
                "' lacks 1 of the 2 params of step 'tied': wte (or "
                "lm_head.weight, head); and 1 opt_state with init=load: "
                "wte.exp_avg (every param must be in the file, and every "
                "opt_state with init=load; other opt_states may be absent "
                "and keep their init= values)");
  EXPECT_TRUE(untouched());
  write(
      {{"b", ASRT_DTYPE_F32, {3}, bias}, {"head", ASRT_DTYPE_F32, {2, 3}, w}});
  EXPECT_EQ(loadError(),
            "--load-params: '" + path +
                "' lacks 1 opt_state with init=load of step 'tied': "
                "wte.exp_avg (every param must be in the file, and every "
                "opt_state with init=load; other opt_states may be absent "
                "and keep their init= values)");
  EXPECT_TRUE(untouched());
}

TEST_F(TiedParamsTest, ARunWithoutAFileIsRefused) {
  EXPECT_TRUE(checkInitFromFile(manifest, /*fromFile=*/true).ok());
  EXPECT_EQ(checkInitFromFile(manifest, /*fromFile=*/false).message(),
            "step 'tied' takes the initial values of 1 param and 1 opt_state "
            "from a file (init=load): wte, wte.exp_avg; give them with "
            "--load-params FILE (a safetensors file that holds them under "
            "their names, such as the model's exporter or --save-params "
            "writes), or continue a run from its checkpoint with --resume");
  // Nothing to load: any run starts.
  EXPECT_TRUE(checkInitFromFile(parse(kManifest), false).ok());
}

// ---- Sharded arguments
// -------------------------------------------------------

// A 2x2 grid: w sharded over both axes (4 shards of 4, the last with one
// element of padding), b over axis 1 (2 shards of 2), w.exp_avg over axis 0
// (2 shards of 8), c replicated.
const char *kShardedManifest =
    "autoshard-manifest 1\n"
    "abi 6\n"
    "step zero\n"
    "strategy zero3\n"
    "grid 2x2\n"
    "arg 0 param w f32 4 init=zeros full=5x3 shard_axes=3\n"
    "arg 1 param b bf16 2 init=zeros full=3 shard_axes=2\n"
    "arg 2 opt_state w.exp_avg f32 8 init=zeros full=5x3 shard_axes=1\n"
    "arg 3 param c f32 2 init=zeros\n"
    "result 0 param w f32 4 updates=0 full=5x3 shard_axes=3\n"
    "result 1 grad w.grad f32 4 of=0 full=5x3 shard_axes=3\n"
    "result 2 grad b.grad bf16 3 of=1\n"
    "result 3 loss loss f32 scalar\n"
    "end\n";

class ShardedParamsTest : public ::testing::Test {
protected:
  void SetUp() override {
    manifest = parse(kShardedManifest);
    path = ::testing::TempDir() + "sharded_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() +
           ".safetensors";
    for (int i = 0; i < 15; ++i) {
      w[i] = 1.0f + i;
      expAvg[i] = -0.5f * i;
    }
  }
  void TearDown() override { std::remove(path.c_str()); }

  /// Buffers of each argument's local size, filled with a pattern that is
  /// not zero, so that unwritten padding shows.
  void fillArgs() {
    storage.clear();
    args.clear();
    for (const TensorSpec &arg : manifest.args)
      storage.emplace_back(static_cast<size_t>(arg.numBytes()), char(0x5a));
    for (auto &s : storage)
      args.push_back(s.data());
  }
  std::vector<float> floats(int arg) const {
    std::vector<float> out(storage[arg].size() / 4);
    std::memcpy(out.data(), storage[arg].data(), storage[arg].size());
    return out;
  }
  std::vector<uint16_t> words(int arg) const {
    std::vector<uint16_t> out(storage[arg].size() / 2);
    std::memcpy(out.data(), storage[arg].data(), storage[arg].size());
    return out;
  }

  Manifest manifest;
  std::string path;
  std::vector<std::vector<char>> storage;
  std::vector<void *> args;
  float w[15];
  float expAvg[15];
  uint16_t b[3] = {floatToBf16(1), floatToBf16(2), floatToBf16(3)};
  float c[2] = {7, 8};
};

TEST_F(ShardedParamsTest, LocalBlocks) {
  // w over all four ranks: k = 4, rank 3 holds 12..14 and one pad.
  for (int rank = 0; rank < 4; ++rank) {
    HeldBlock block = heldBlock(manifest, manifest.args[0], rank);
    EXPECT_EQ(block.begin, 4 * rank);
    EXPECT_EQ(block.valid, rank < 3 ? 4 : 3);
    EXPECT_EQ(block.chunk, 4);
  }
  // b over axis 1: ranks 1 and 3 (c1 = 1) hold element 2 and one pad.
  HeldBlock b3 = heldBlock(manifest, manifest.args[1], 3);
  EXPECT_EQ(b3.begin, 2);
  EXPECT_EQ(b3.valid, 1);
  EXPECT_EQ(b3.chunk, 2);
  EXPECT_EQ(heldBlock(manifest, manifest.args[1], 2).begin, 0);
  // w.exp_avg over axis 0: ranks 2 and 3 (c0 = 1) hold 8..14.
  HeldBlock e1 = heldBlock(manifest, manifest.args[2], 1);
  EXPECT_EQ(e1.begin, 0);
  EXPECT_EQ(e1.valid, 8);
  HeldBlock e2 = heldBlock(manifest, manifest.args[2], 2);
  EXPECT_EQ(e2.begin, 8);
  EXPECT_EQ(e2.valid, 7);
  // Replicated: the whole tensor, no padding.
  HeldBlock whole = heldBlock(manifest, manifest.args[3], 3);
  EXPECT_EQ(whole.begin, 0);
  EXPECT_EQ(whole.valid, 2);
  EXPECT_EQ(whole.chunk, 2);
}

TEST_F(ShardedParamsTest, EachRankLoadsItsBlockWithZeroPadding) {
  Status written =
      writeSafetensors(path, {{"w", ASRT_DTYPE_F32, {5, 3}, w},
                              {"b", ASRT_DTYPE_BF16, {3}, b},
                              {"w.exp_avg", ASRT_DTYPE_F32, {5, 3}, expAvg},
                              {"c", ASRT_DTYPE_F32, {2}, c}});
  ASSERT_TRUE(written.ok()) << written.message();
  for (int rank = 0; rank < 4; ++rank) {
    fillArgs();
    Expected<LoadedParams> loaded = loadParams(path, manifest, args, rank);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    EXPECT_EQ(loaded->params, 3);
    EXPECT_EQ(loaded->optStates, 1);
    std::vector<float> wShard = floats(0);
    for (int j = 0; j < 4; ++j) {
      int e = 4 * rank + j;
      EXPECT_EQ(wShard[j], e < 15 ? w[e] : 0.0f) << "rank " << rank;
    }
    std::vector<uint16_t> bShard = words(1);
    int bIndex = rank % 2;
    EXPECT_EQ(bShard[0], b[2 * bIndex]) << "rank " << rank;
    EXPECT_EQ(bShard[1], bIndex == 0 ? b[1] : 0) << "rank " << rank;
    std::vector<float> eShard = floats(2);
    int eIndex = rank / 2;
    for (int j = 0; j < 8; ++j) {
      int e = 8 * eIndex + j;
      EXPECT_EQ(eShard[j], e < 15 ? expAvg[e] : 0.0f) << "rank " << rank;
    }
    EXPECT_EQ(floats(3), (std::vector<float>{7, 8}));
  }
}

TEST_F(ShardedParamsTest, FilesHoldFullTensors) {
  fillArgs();
  // A file holding rank 0's shard instead of the full tensor.
  ASSERT_TRUE(writeSafetensors(path, {{"w", ASRT_DTYPE_F32, {4}, w},
                                      {"b", ASRT_DTYPE_BF16, {3}, b},
                                      {"c", ASRT_DTYPE_F32, {2}, c}})
                  .ok());
  Expected<LoadedParams> loaded = loadParams(path, manifest, args, 0);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message(),
            "--load-params: tensor 'w' of '" + path +
                "' is F32 4 but arg 0 (param w) is F32 5x3 (sharded; files "
                "hold full tensors); dtype and shape must match exactly");
  for (const auto &s : storage)
    for (char ch : s)
      ASSERT_EQ(ch, 0x5a) << "nothing is replaced unless the file passes";
}

TEST_F(ShardedParamsTest, SavesFullShapes) {
  fillArgs();
  // What the driver passes after gathering: the global tensors.
  std::vector<void *> global = args;
  global[0] = w;
  global[1] = b;
  ASSERT_TRUE(saveParams(path, manifest, global, 1, 0).ok());
  Expected<SafetensorsFile> file = readSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->tensors.size(), 3u);
  EXPECT_EQ(file->tensors.at("w").shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(std::memcmp(file->bytes("w"), w, sizeof w), 0);
  EXPECT_EQ(file->tensors.at("b").shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(file->tensors.at("c").shape, (std::vector<int64_t>{2}));

  float wGrad[15] = {};
  wGrad[14] = 3;
  uint16_t bGrad[3] = {1, 2, 3};
  float loss = 0;
  ASSERT_TRUE(
      saveGrads(path, manifest, {args[0], wGrad, bGrad, &loss}, 1, 0).ok());
  file = readSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->tensors.at("w.grad").shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(std::memcmp(file->bytes("w.grad"), wGrad, sizeof wGrad), 0);
  EXPECT_EQ(file->tensors.at("b.grad").shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(file->metadata.at("w.grad.of"), "w");
}

} // namespace
