// checkRunFiles: outputs that would overwrite an input, each other or a
// checkpoint are refused before training; and the non-finite loss message.
#include "driver/OutputFiles.h"
#include "driver/Driver.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>

using namespace autoshard::rt;
namespace fs = std::filesystem;

namespace {

class OutputFilesTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = ::testing::TempDir() + "output_files_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string touch(const std::string &name) {
    std::string path = dir + "/" + name;
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << "data";
    return path;
  }
  std::string errorOf(const Options &options) {
    Status s = checkRunFiles(options);
    return s ? "" : s.message();
  }

  std::string dir;
};

bool says(const std::string &message, const std::string &text) {
  return message.find(text) != std::string::npos;
}

TEST_F(OutputFilesTest, DistinctFilesPass) {
  Options options;
  options.dataFile = touch("train.bin");
  options.loadParamsFile = touch("init.safetensors");
  options.saveParamsFile = dir + "/params.safetensors";
  options.saveGradsFile = dir + "/grads.safetensors";
  options.statsJsonFile = dir + "/stats.json";
  options.traceFile = touch("trace.json"); // an old trace is replaced
  options.checkpointDir = dir + "/ck";
  EXPECT_EQ(errorOf(options), "");
}

TEST_F(OutputFilesTest, OutputThatIsTheDataFileIsRefused) {
  Options options;
  options.dataFile = touch("train.bin");
  options.saveParamsFile = options.dataFile;
  EXPECT_EQ(errorOf(options),
            "--save-params and --data both name '" + options.dataFile +
                "': writing --save-params would destroy the run's input; "
                "give --save-params another path");
}

TEST_F(OutputFilesTest, OutputThatIsTheLoadedParamsIsRefusedThroughALink) {
  Options options;
  options.loadParamsFile = touch("init.safetensors");
  // Another spelling, a hard link and a symbolic link: one file each time.
  for (const std::string &alias :
       {dir + "/./init.safetensors", dir + "/hard.safetensors",
        dir + "/soft.safetensors"}) {
    if (alias == dir + "/hard.safetensors")
      fs::create_hard_link(options.loadParamsFile, alias);
    if (alias == dir + "/soft.safetensors")
      fs::create_symlink(options.loadParamsFile, alias);
    options.saveParamsFile = alias;
    std::string error = errorOf(options);
    EXPECT_TRUE(
        says(error, "--save-params '" + alias + "' and --load-params '" +
                        options.loadParamsFile + "' name the same file") &&
        says(error, "would destroy the run's input"))
        << alias << ": " << error;
  }
}

TEST_F(OutputFilesTest, TwoOutputsOfOneFileAreRefused) {
  Options options;
  // Neither exists yet: compared by resolved path.
  options.saveParamsFile = dir + "/out.bin";
  options.statsJsonFile =
      dir + "/../" + fs::path(dir).filename().string() + "/out.bin";
  EXPECT_TRUE(says(errorOf(options),
                   "--save-params '" + options.saveParamsFile +
                       "' and --stats-json '" + options.statsJsonFile +
                       "' name the same file: the run writes both at its "
                       "end, and the second write would replace the first"))
      << errorOf(options);

  Options trace;
  trace.saveParamsFile = touch("p.safetensors");
  trace.traceFile = trace.saveParamsFile;
  EXPECT_TRUE(says(errorOf(trace), "--save-params and --trace both name"))
      << errorOf(trace);

  Options grads;
  grads.saveGradsFile = dir + "/g";
  grads.statsJsonFile = dir + "/g";
  EXPECT_TRUE(says(errorOf(grads), "--save-grads and --stats-json both name"))
      << errorOf(grads);
}

TEST_F(OutputFilesTest, MissingInputIsLeftToItsOwnCheck) {
  Options options;
  options.dataFile = dir + "/missing.bin";
  options.saveParamsFile = options.dataFile;
  EXPECT_EQ(errorOf(options), "");
}

TEST_F(OutputFilesTest, FilesInsideACheckpointAreRefused) {
  Options options;
  options.checkpointDir = dir + "/ck";
  std::string shard = touch("ck/step-00000004/rank-00000.safetensors");
  touch("ck/step-00000004/MANIFEST");
  // A file of the checkpoint --resume reads.
  options.saveParamsFile = shard;
  EXPECT_EQ(errorOf(options),
            "--save-params '" + shard + "' lies inside '" +
                fs::canonical(dir).string() +
                "/ck/step-00000004', a checkpoint directory of "
                "--checkpoint-dir '" +
                options.checkpointDir +
                "', which checkpoint saves replace and retention removes "
                "with every file in it; write it outside");
  // A staging directory, and a data file kept in a checkpoint.
  options.saveParamsFile = "";
  fs::create_directories(dir + "/ck/step-00000006.partial");
  options.statsJsonFile = dir + "/ck/step-00000006.partial/stats.json";
  EXPECT_TRUE(says(errorOf(options), "--stats-json")) << errorOf(options);
  options.statsJsonFile = "";
  options.dataFile = touch("ck/step-00000004/train.bin");
  EXPECT_TRUE(says(errorOf(options), "--data '") &&
              says(errorOf(options), "move it out of there"))
      << errorOf(options);
  // Next to the checkpoints, or in a directory of the user's: untouched.
  options.dataFile = touch("ck/train.bin");
  options.statsJsonFile = dir + "/ck/stats.json";
  fs::create_directories(dir + "/ck/logs");
  options.traceFile = dir + "/ck/logs/trace.json";
  EXPECT_EQ(errorOf(options), "");
}

TEST_F(OutputFilesTest, UnwritableOutputsAreStillRefusedFirst) {
  Options options;
  options.saveParamsFile = dir;
  EXPECT_TRUE(says(errorOf(options), "it is a directory; give a file path"))
      << errorOf(options);
  options.saveParamsFile = dir + "/no/such/p.safetensors";
  EXPECT_TRUE(says(errorOf(options), "no directory")) << errorOf(options);
}

// ---- A non-finite loss --------------------------------------------------

TEST(NonFiniteLoss, NamesTheStepTheLossAndTheCheckpointKept) {
  Options options;
  options.checkpointDir = "ck";
  EXPECT_EQ(nonFiniteLossMessage(7, std::nan(""), options, 4),
            "step 7: the loss is nan; training diverged, and the run stops "
            "before it saves this state or removes an older checkpoint. The "
            "newest good checkpoint, 'ck/step-00000004' (step 4), is kept: "
            "resume from it with --resume and a lower --lr");
  // The sign of a NaN (x86 makes 0/0 negative) is not shown.
  EXPECT_TRUE(says(nonFiniteLossMessage(7, -std::nan(""), options, 4),
                   "step 7: the loss is nan;"));
  options.lr = 0.5;
  EXPECT_TRUE(
      says(nonFiniteLossMessage(7, INFINITY, options, 4), "the loss is inf;") &&
      says(nonFiniteLossMessage(7, INFINITY, options, 4),
           "a lower --lr (this run's is 0.5)"));
}

TEST(NonFiniteLoss, AnOverflowedGradientNormIsNamedSo) {
  Options options;
  options.checkpointDir = "ck";
  std::string message =
      nonFiniteLossMessage(5, INFINITY, options, 4, false, "gradient norm");
  EXPECT_TRUE(says(message, "step 5: the gradient norm is inf; training "
                            "diverged, and the run stops before it saves "
                            "this state"))
      << message;
  EXPECT_TRUE(says(message, "holds the state this gradient norm was "
                            "computed from: resumed, it gives this gradient "
                            "norm again at step 5"))
      << message;
}

TEST(NonFiniteLoss, TheCheckpointOfThePreviousStepIsNotCalledGood) {
  Options options;
  options.checkpointDir = "ck";
  std::string message = nonFiniteLossMessage(5, -INFINITY, options, 4);
  EXPECT_TRUE(says(message, "The newest checkpoint, 'ck/step-00000004', is "
                            "kept, but it holds the state this loss was "
                            "computed from: resumed, it gives this loss "
                            "again at step 5. Move it away"))
      << message;
}

TEST(NonFiniteLoss, AnEvaluationStepPointsAtItsParameters) {
  Options options;
  options.loadParamsFile = "trained.safetensors";
  EXPECT_EQ(nonFiniteLossMessage(3, std::nan(""), options, -1, true),
            "step 3: the loss is nan; this evaluation step trains nothing, "
            "so the parameters it evaluates give it: check "
            "'trained.safetensors'");
  options.loadParamsFile.clear();
  EXPECT_TRUE(says(nonFiniteLossMessage(3, INFINITY, options, -1, true),
                   "check them (none were loaded: --load-params)"));
}

TEST(NonFiniteLoss, WithoutCheckpoints) {
  Options options;
  EXPECT_EQ(nonFiniteLossMessage(2, INFINITY, options, -1),
            "step 2: the loss is inf; training diverged, and the run stops "
            "before it saves this state. Rerun with a lower --lr; with "
            "--checkpoint-dir a run keeps checkpoints to resume from");
  options.checkpointDir = "ck";
  EXPECT_TRUE(says(nonFiniteLossMessage(2, INFINITY, options, -1),
                   "No checkpoint was written before this step; rerun with "
                   "a lower --lr"));
}

} // namespace
