// The checkpoint MANIFEST: round trip, one case per diagnostic, and the
// rules for resuming another plan of the same model.
#include "ckpt/CheckpointManifest.h"
#include "TestManifests.h"
#include "ckpt/Checksum.h"

#include <gtest/gtest.h>

using namespace autoshard::rt;
using autoshard::rt::testing::modelManifest;

namespace {

/// A manifest of two tensors over two files, as a ZeRO-3 run on 2 ranks
/// would write (w: 5 elements in shards of 3; b replicated).
CheckpointManifest sample() {
  CheckpointManifest m;
  m.step = 40;
  m.seed = 7;
  m.data = "file bytes=1000 path=/data/train.bin";
  m.strategy = "zero3";
  m.grid = "2";
  m.world = 2;
  m.planHash = 0x0123456789abcdefull;
  m.files = {{"rank-00000.safetensors", 200, 0xaabbccddu},
             {"rank-00001.safetensors", 180, 0x11223344u}};
  CheckpointTensor w{"w", Role::Param, ASRT_DTYPE_F32, {5, 1}, {}};
  w.blocks = {{0, 3, "rank-00000.safetensors", 128, 0x1u},
              {3, 2, "rank-00001.safetensors", 128, 0x2u}};
  CheckpointTensor b{"b", Role::OptState, ASRT_DTYPE_I32, {}, {}};
  b.blocks = {{0, 1, "rank-00001.safetensors", 136, 0x3u}};
  m.tensors = {w, b};
  m.modelHash = modelSignatureHash(m.tensors);
  return m;
}

/// `body` (every line but the last) completed with its checksum line.
std::string withCrc(const std::string &body) {
  return body + "end crc32=" + formatCrc32(crc32Of(body)) + "\n";
}

/// The formatted sample without its end line.
std::string sampleBody() {
  std::string text = formatCheckpointManifest(sample());
  return text.substr(0, text.rfind("end crc32="));
}

std::string replace(std::string text, const std::string &from,
                    const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

void expectError(const std::string &text, const std::string &message) {
  Expected<CheckpointManifest> parsed =
      parseCheckpointManifest(text, "ck/MANIFEST");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.message(), message);
}

} // namespace

TEST(CheckpointManifest, RoundTrips) {
  std::string text = formatCheckpointManifest(sample());
  EXPECT_EQ(text.substr(0, text.find("plan ")),
            "autoshard-checkpoint 1\nstep 40\nseed 7\ndata file bytes=1000 "
            "path=/data/train.bin\nstrategy zero3\ngrid 2\nworld 2\n");
  EXPECT_NE(text.find("\nblock w begin=3 count=2 file=rank-00001.safetensors "
                      "offset=128 crc32=00000002\n"),
            std::string::npos)
      << text;
  Expected<CheckpointManifest> parsed = parseCheckpointManifest(text, "x");
  ASSERT_TRUE(parsed) << parsed.message();
  EXPECT_EQ(parsed->step, 40);
  EXPECT_EQ(parsed->seed, 7u);
  EXPECT_EQ(parsed->data, "file bytes=1000 path=/data/train.bin");
  EXPECT_EQ(parsed->planHash, 0x0123456789abcdefull);
  ASSERT_EQ(parsed->tensors.size(), 2u);
  EXPECT_EQ(parsed->tensors[1].describe(), "opt_state b i32 scalar");
  EXPECT_EQ(parsed->tensors[0].blocks[1].offset, 128u);
  EXPECT_EQ(parsed->files[1].crc, 0x11223344u);
  EXPECT_EQ(formatCheckpointManifest(*parsed), text);
}

TEST(CheckpointManifest, TruncatedOrAlteredIsCorrupt) {
  std::string text = formatCheckpointManifest(sample());
  expectError("", "checkpoint manifest 'ck/MANIFEST': it is empty");
  expectError(text.substr(0, text.size() - 1),
              "checkpoint manifest 'ck/MANIFEST': it does not end with a "
              "newline; it is truncated");
  std::string cut = text.substr(0, text.find("tensor b"));
  expectError(cut, "checkpoint manifest 'ck/MANIFEST': its last line is "
                   "'block w begin=3 count=2 file=rank-00001.safetensors "
                   "offset=128 crc32=00000002', not 'end crc32=XXXXXXXX'; it "
                   "is truncated");
  std::string edited = replace(text, "seed 7", "seed 8");
  Expected<CheckpointManifest> parsed = parseCheckpointManifest(edited, "m");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.message().find("but its end line records"),
            std::string::npos);
  EXPECT_NE(parsed.message().find("the file is corrupt"), std::string::npos);
}

TEST(CheckpointManifest, OneDiagnosticPerRule) {
  std::string body = sampleBody();
  expectError(withCrc(replace(body, "autoshard-checkpoint 1",
                              "autoshard-checkpoint 2")),
              "checkpoint manifest 'ck/MANIFEST' line 1: format version '2'; "
              "this runtime reads version 1");
  expectError(withCrc(replace(body, "seed 7\n", "")),
              "checkpoint manifest 'ck/MANIFEST': it has no 'seed' record");
  expectError(
      withCrc(replace(body, "step 40\n", "step 40\nstep 41\n")),
      "checkpoint manifest 'ck/MANIFEST' line 3: a second 'step' record");
  expectError(
      withCrc(body + "bogus 1\n"),
      "checkpoint manifest 'ck/MANIFEST' line 17: unknown record 'bogus'");
  expectError(
      withCrc(replace(body, "file rank-00000.safetensors", "file ../x")),
      "checkpoint manifest 'ck/MANIFEST' line 10: file name '../x' is "
      "not a plain file name");
  expectError(withCrc(replace(body, "count=2 file=rank-00001.safetensors",
                              "count=2 file=rank-00009.safetensors")),
              "checkpoint manifest 'ck/MANIFEST' line 14: block of 'w' is in "
              "file 'rank-00009.safetensors', which no 'file' record lists");
  expectError(withCrc(replace(body, "offset=136", "offset=179")),
              "checkpoint manifest 'ck/MANIFEST' line 16: block of 'b' at "
              "offset 179 runs past the end of 'rank-00001.safetensors' (180 "
              "bytes)");
  expectError(withCrc(replace(body, "begin=3 count=2", "begin=4 count=1")),
              "checkpoint manifest 'ck/MANIFEST': the blocks of tensor 'w' "
              "leave elements [3, 4) uncovered");
  expectError(
      withCrc(replace(body, "tensor b opt_state i32", "tensor b hyper i32")),
      "checkpoint manifest 'ck/MANIFEST' line 15: tensor 'b' has role "
      "'hyper'; expected param or opt_state");
  expectError(withCrc(replace(body, "block b ", "block c ")),
              "checkpoint manifest 'ck/MANIFEST' line 16: block of 'c', which "
              "no earlier 'tensor' record declares");
  Expected<CheckpointManifest> hash = parseCheckpointManifest(
      withCrc(replace(body, "tensor w param f32 5x1", "tensor w param f32 5")),
      "m");
  ASSERT_FALSE(hash);
  EXPECT_NE(hash.message().find("its tensors hash to"), std::string::npos);
}

// A tied param's aliases ride on its tensor record, for consolidation;
// they are not part of the model's identity.
TEST(CheckpointManifest, AliasesRoundTripOutsideTheModelHash) {
  CheckpointManifest m = sample();
  m.tensors[0].aliases = {"lm_head.weight", "head"};
  EXPECT_EQ(modelSignatureHash(m.tensors), m.modelHash);
  std::string text = formatCheckpointManifest(m);
  EXPECT_NE(text.find("\ntensor w param f32 5x1 aliases=lm_head.weight,head\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      formatCheckpointManifest(sample()).find("\ntensor w param f32 5x1\n"),
      std::string::npos)
      << "no aliases, no field";
  Expected<CheckpointManifest> parsed = parseCheckpointManifest(text, "x");
  ASSERT_TRUE(parsed) << parsed.message();
  EXPECT_EQ(parsed->tensors[0].aliases,
            (std::vector<std::string>{"lm_head.weight", "head"}));
  EXPECT_TRUE(parsed->tensors[1].aliases.empty());
  EXPECT_EQ(formatCheckpointManifest(*parsed), text);

  std::string body = text.substr(0, text.rfind("end crc32="));
  expectError(withCrc(replace(body, "aliases=lm_head.weight,head",
                              "aliases=lm_head.weight,,head")),
              "checkpoint manifest 'ck/MANIFEST' line 12: tensor 'w' has the "
              "alias '', which is not a name or is listed twice");
  expectError(withCrc(replace(body, "aliases=lm_head.weight,head",
                              "aliases=head,head")),
              "checkpoint manifest 'ck/MANIFEST' line 12: tensor 'w' has the "
              "alias 'head', which is not a name or is listed twice");
  expectError(withCrc(replace(body, "tensor b opt_state i32 scalar",
                              "tensor b opt_state i32 scalar aliases=c")),
              "checkpoint manifest 'ck/MANIFEST' line 15: expected 'tensor "
              "NAME ROLE DTYPE SHAPE' with 'aliases=A,B' only on a param, "
              "found 'tensor b opt_state i32 scalar aliases=c'");
  expectError(withCrc(replace(body, "aliases=lm_head.weight,head",
                              "aliases=lm_head.weight head")),
              "checkpoint manifest 'ck/MANIFEST' line 12: expected 'tensor "
              "NAME ROLE DTYPE SHAPE [aliases=A,B]', found 'tensor w param "
              "f32 5x1 aliases=lm_head.weight head'");
}

TEST(CheckpointManifest, ModelSignatureIsTheSameForEveryPlan) {
  Manifest ddp = modelManifest("2", 0, 1, "ddp");
  Manifest zero3 = modelManifest("4", 1, 4);
  Manifest hybrid = modelManifest("2x2", 2, 2, "hybrid");
  std::vector<CheckpointTensor> signature = modelSignature(ddp);
  ASSERT_EQ(signature.size(), 5u);
  EXPECT_EQ(signature[0].describe(), "param w f32 5x1");
  EXPECT_EQ(signature[4].describe(), "opt_state optimizer.step i32 scalar");
  EXPECT_EQ(modelSignatureHash(signature),
            modelSignatureHash(modelSignature(zero3)));
  EXPECT_EQ(modelSignatureHash(signature),
            modelSignatureHash(modelSignature(hybrid)));
  signature[1].shape = {4};
  EXPECT_NE(modelSignatureHash(signature),
            modelSignatureHash(modelSignature(zero3)));
}

TEST(CheckpointManifest, ResumableChecksModelSeedAndData) {
  Manifest zero3 = modelManifest("4", 1, 4);
  CheckpointManifest ck;
  ck.seed = 3;
  ck.data = "file bytes=100 path=/a/tokens.bin";
  ck.tensors = modelSignature(modelManifest("2", 0, 1, "ddp"));
  EXPECT_TRUE(checkResumable(ck, "d/step-2", zero3, 3,
                             "file bytes=100 path=/a/tokens.bin"));
  // Files move: another path of the same size is the same data.
  EXPECT_TRUE(checkResumable(ck, "d/step-2", zero3, 3,
                             "file bytes=100 path=/b/tokens.bin"));

  Status seed = checkResumable(ck, "d/step-2", zero3, 4,
                               "file bytes=100 path=/a/tokens.bin");
  ASSERT_FALSE(seed);
  EXPECT_EQ(seed.message(), "checkpoint 'd/step-2' was written by a run with "
                            "--seed 3 but this run has --seed 4; batches "
                            "depend on the seed, so resume with --seed 3");
  Status data = checkResumable(ck, "d/step-2", zero3, 3, "synthetic");
  ASSERT_FALSE(data);
  EXPECT_NE(data.message().find("reading data 'file bytes=100 "
                                "path=/a/tokens.bin' but this run reads "
                                "'synthetic'"),
            std::string::npos);
  EXPECT_FALSE(checkResumable(ck, "d/step-2", zero3, 3,
                              "file bytes=101 path=/a/tokens.bin"));

  CheckpointManifest other = ck;
  other.tensors[0].shape = {6, 1};
  other.tensors.pop_back();
  other.tensors.push_back({"v", Role::Param, ASRT_DTYPE_F32, {2}, {}});
  Status model = checkResumable(other, "d/step-2", zero3, 3, ck.data);
  ASSERT_FALSE(model);
  EXPECT_EQ(model.message(),
            "checkpoint 'd/step-2' is of another model than step 'train_step' "
            "(strategy zero3, grid 4): it holds param w f32 6x1 (the step has "
            "param w f32 5x1); it lacks 1 of the step's tensors: "
            "optimizer.step; it holds 1 tensors the step does not have: v. A "
            "checkpoint resumes the same model (any strategy or world size) "
            "with the same optimizer");
}
