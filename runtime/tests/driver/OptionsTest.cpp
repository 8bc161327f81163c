// The training binary's command line, and the driver's fixed messages.
#include "driver/Options.h"
#include "driver/Driver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace autoshard::rt;

namespace {

Options parse(std::vector<std::string> args) {
  Expected<Options> o = parseOptions(args);
  EXPECT_TRUE(o.ok()) << o.message();
  return o.ok() ? *o : Options();
}

std::string errorOf(std::vector<std::string> args) {
  Expected<Options> o = parseOptions(args);
  EXPECT_FALSE(o.ok());
  return o.ok() ? std::string() : o.message();
}

TEST(OptionsTest, Defaults) {
  Options o = parse({});
  EXPECT_EQ(o.steps, 10);
  EXPECT_EQ(o.seed, 0u);
  EXPECT_FALSE(o.lr.has_value());
  EXPECT_EQ(o.logEvery, 1);
  EXPECT_TRUE(o.dataFile.empty());
  EXPECT_EQ(o.dataFormat, DataFormat::Auto);
  EXPECT_TRUE(o.loadParamsFile.empty());
  EXPECT_TRUE(o.saveParamsFile.empty());
  EXPECT_TRUE(o.saveGradsFile.empty());
  EXPECT_TRUE(o.statsJsonFile.empty());
  EXPECT_EQ(o.threads, 0);
  EXPECT_FALSE(o.printManifest);
  EXPECT_FALSE(o.help);
}

TEST(OptionsTest, EveryFlag) {
  Options o = parse({"--steps",
                     "100",
                     "--seed",
                     "18446744073709551615",
                     "--lr",
                     "0.05",
                     "--log-every",
                     "10",
                     "--data",
                     "tokens.bin",
                     "--save-params",
                     "p.safetensors",
                     "--stats-json",
                     "s.json",
                     "--threads",
                     "3",
                     "--print-manifest",
                     "--help",
                     "--data-format",
                     "tokens",
                     "--load-params",
                     "init.safetensors",
                     "--save-grads",
                     "g.safetensors",
                     "--device-op-times"});
  EXPECT_EQ(o.steps, 100);
  EXPECT_EQ(o.seed, 18446744073709551615ull);
  ASSERT_TRUE(o.lr.has_value());
  EXPECT_DOUBLE_EQ(*o.lr, 0.05);
  EXPECT_EQ(o.logEvery, 10);
  EXPECT_EQ(o.dataFile, "tokens.bin");
  EXPECT_EQ(o.saveParamsFile, "p.safetensors");
  EXPECT_EQ(o.statsJsonFile, "s.json");
  EXPECT_EQ(o.dataFormat, DataFormat::Tokens);
  EXPECT_EQ(o.loadParamsFile, "init.safetensors");
  EXPECT_EQ(o.saveGradsFile, "g.safetensors");
  EXPECT_EQ(o.threads, 3);
  EXPECT_TRUE(o.printManifest);
  EXPECT_TRUE(o.help);
  EXPECT_TRUE(o.deviceOpTimes);
  EXPECT_FALSE(parse({}).deviceOpTimes);
}

TEST(OptionsTest, EqualsFormAndLastOccurrenceWins) {
  Options o = parse({"--steps=5", "--lr=0", "--steps", "7", "-h"});
  EXPECT_EQ(o.steps, 7);
  EXPECT_EQ(*o.lr, 0.0);
  EXPECT_TRUE(o.help);
}

TEST(OptionsTest, BadValuesNameFlagValueAndWhatIsValid) {
  EXPECT_EQ(errorOf({"--steps", "-3"}),
            "--steps: '-3' is not valid; expected an integer >= 1");
  EXPECT_EQ(errorOf({"--steps", "abc"}),
            "--steps: 'abc' is not valid; expected an integer >= 1");
  EXPECT_EQ(errorOf({"--steps", "0"}),
            "--steps: '0' is not valid; expected an integer >= 1");
  EXPECT_EQ(errorOf({"--steps", "5x"}),
            "--steps: '5x' is not valid; expected an integer >= 1");
  EXPECT_EQ(errorOf({"--steps=99999999999999999999"}),
            "--steps: '99999999999999999999' is not valid; expected an "
            "integer >= 1");
  EXPECT_EQ(errorOf({"--log-every", "-1"}),
            "--log-every: '-1' is not valid; expected an integer >= 1");
  EXPECT_EQ(errorOf({"--seed", "-1"}),
            "--seed: '-1' is not valid; expected an integer in "
            "0..18446744073709551615");
  EXPECT_EQ(errorOf({"--lr", "fast"}),
            "--lr: 'fast' is not valid; expected a finite number >= 0");
  EXPECT_EQ(errorOf({"--lr", "-0.1"}),
            "--lr: '-0.1' is not valid; expected a finite number >= 0");
  EXPECT_EQ(errorOf({"--lr", "nan"}),
            "--lr: 'nan' is not valid; expected a finite number >= 0");
  EXPECT_EQ(errorOf({"--threads", "0"}),
            "--threads: '0' is not valid; expected an integer in "
            "1..2147483647");
  EXPECT_EQ(errorOf({"--threads", "4294967296"}),
            "--threads: '4294967296' is not valid; expected an integer in "
            "1..2147483647");
  EXPECT_EQ(errorOf({"--data", "t.bin", "--data-format", "npy"}),
            "--data-format: 'npy' is not valid; expected auto, asdata or "
            "tokens");
}

TEST(OptionsTest, DataFormats) {
  EXPECT_EQ(parse({"--data", "a", "--data-format=asdata"}).dataFormat,
            DataFormat::Asdata);
  EXPECT_EQ(parse({"--data-format=tokens", "--data=a"}).dataFormat,
            DataFormat::Tokens);
  EXPECT_EQ(parse({"--data-format=tokens", "--data-format=auto"}).dataFormat,
            DataFormat::Auto);
  // A format without a file would be silently ignored.
  EXPECT_EQ(errorOf({"--data-format", "asdata"}),
            "--data-format=asdata applies to --data FILE, which is not "
            "given");
}

TEST(OptionsTest, MissingValues) {
  EXPECT_EQ(errorOf({"--steps"}), "--steps needs a value: an integer >= 1");
  EXPECT_EQ(errorOf({"--data", "--steps", "3"}),
            "--data needs a value: a file name");
  EXPECT_EQ(errorOf({"--save-params="}),
            "--save-params needs a value: a file name");
  EXPECT_EQ(errorOf({"--lr"}), "--lr needs a value: a finite number >= 0");
  EXPECT_EQ(errorOf({"--load-params"}),
            "--load-params needs a value: a file name");
  EXPECT_EQ(errorOf({"--save-grads="}),
            "--save-grads needs a value: a file name");
  EXPECT_EQ(errorOf({"--data-format"}),
            "--data-format needs a value: auto, asdata or tokens");
}

TEST(OptionsTest, UnknownAndUnexpectedArguments) {
  EXPECT_EQ(errorOf({"--stepz", "3"}),
            "unknown option '--stepz'; run with --help to see the options");
  EXPECT_EQ(errorOf({"--steps=3", "extra"}),
            "unexpected argument 'extra'; every option starts with '--'");
  EXPECT_EQ(errorOf({"-s"}),
            "unexpected argument '-s'; every option starts with '--'");
  EXPECT_EQ(errorOf({"--help=yes"}), "--help takes no value");
  EXPECT_EQ(errorOf({"--device-op-times=1"}),
            "--device-op-times takes no value");
}

TEST(OptionsTest, DefaultThreadsSplitTheNode) {
  EXPECT_EQ(defaultThreads(16, 4), 4);
  EXPECT_EQ(defaultThreads(16, 3), 5);
  EXPECT_EQ(defaultThreads(2, 4), 1);
  EXPECT_EQ(defaultThreads(0, 1), 1); // unknown hardware
  EXPECT_EQ(defaultThreads(8, 0), 8);
}

namespace {
// A fake environment for chooseKernelThreads: a plain function pointer
// cannot capture, so the test sets these before each call.
const char *fakeOpenblas = nullptr;
const char *fakeOmp = nullptr;
const char *fakeGetenv(const char *name) {
  std::string_view n = name;
  return n == "OPENBLAS_NUM_THREADS" ? fakeOpenblas
         : n == "OMP_NUM_THREADS"    ? fakeOmp
                                     : nullptr;
}
KernelThreads choose(int flag, const char *openblas, const char *omp,
                     unsigned hardware = 16, int ranks = 4) {
  fakeOpenblas = openblas;
  fakeOmp = omp;
  Expected<KernelThreads> t =
      chooseKernelThreads(flag, fakeGetenv, hardware, ranks);
  EXPECT_TRUE(t.ok()) << t.message();
  return t.ok() ? *t : KernelThreads{0, "error"};
}
std::string chooseError(const char *openblas, const char *omp) {
  fakeOpenblas = openblas;
  fakeOmp = omp;
  Expected<KernelThreads> t = chooseKernelThreads(0, fakeGetenv, 16, 4);
  EXPECT_FALSE(t.ok());
  return t.ok() ? std::string() : t.message();
}
} // namespace

TEST(OptionsTest, KernelThreadsHonourTheEnvironment) {
  // The tester's case: OPENBLAS_NUM_THREADS=1 used to be ignored.
  KernelThreads t = choose(0, "1", nullptr);
  EXPECT_EQ(t.count, 1);
  EXPECT_EQ(t.source, "OPENBLAS_NUM_THREADS=1");
  t = choose(0, nullptr, "3");
  EXPECT_EQ(t.count, 3);
  EXPECT_EQ(t.source, "OMP_NUM_THREADS=3");
  // OpenBLAS's own precedence: its variable before OpenMP's.
  t = choose(0, "2", "5");
  EXPECT_EQ(t.count, 2);
  EXPECT_EQ(t.source, "OPENBLAS_NUM_THREADS=2");
  // OpenMP's list form: the outermost level's count.
  EXPECT_EQ(choose(0, nullptr, "6,2").count, 6);
  // The flag wins over both.
  t = choose(7, "1", "3");
  EXPECT_EQ(t.count, 7);
  EXPECT_EQ(t.source, "--threads");
  // Unset or empty: the node's share.
  t = choose(0, nullptr, nullptr, 16, 4);
  EXPECT_EQ(t.count, 4);
  EXPECT_EQ(t.source, "default: 16 hardware threads / 4 ranks on the node");
  t = choose(0, "", "", 2, 1);
  EXPECT_EQ(t.count, 2);
  EXPECT_EQ(t.source, "default: 2 hardware threads / 1 rank on the node");
}

TEST(OptionsTest, KernelThreadsRefuseBadEnvironment) {
  EXPECT_EQ(chooseError("0", nullptr),
            "OPENBLAS_NUM_THREADS='0' is not a thread count; expected an "
            "integer in 1..2147483647 (or unset it; --threads N takes "
            "precedence)");
  EXPECT_EQ(chooseError(nullptr, "four"),
            "OMP_NUM_THREADS='four' is not a thread count; expected an "
            "integer in 1..2147483647 (or unset it; --threads N takes "
            "precedence)");
  // A bad OMP_NUM_THREADS is not read when OPENBLAS_NUM_THREADS decides.
  fakeOpenblas = "2";
  fakeOmp = "bad";
  EXPECT_TRUE(chooseKernelThreads(0, fakeGetenv, 16, 4).ok());
}

TEST(OptionsTest, OptimizerThreads) {
  // One thread unless asked: ranks usually share the node's cores.
  EXPECT_EQ(parse({}).optimizerThreads, 1);
  EXPECT_EQ(parse({"--optimizer-threads", "4"}).optimizerThreads, 4);
  // 0 asks the driver to split the node's hardware threads (defaultThreads).
  EXPECT_EQ(parse({"--optimizer-threads=0"}).optimizerThreads, 0);
  // Independent of --threads, the BLAS threads.
  Options both = parse({"--threads", "2", "--optimizer-threads", "3"});
  EXPECT_EQ(both.threads, 2);
  EXPECT_EQ(both.optimizerThreads, 3);
  const char *valid = "expected an integer in 0..2147483647 (0: the node's "
                      "hardware threads divided among its ranks)";
  EXPECT_EQ(errorOf({"--optimizer-threads", "-1"}),
            std::string("--optimizer-threads: '-1' is not valid; ") + valid);
  EXPECT_EQ(errorOf({"--optimizer-threads=two"}),
            std::string("--optimizer-threads: 'two' is not valid; ") + valid);
  EXPECT_EQ(errorOf({"--optimizer-threads", "4294967296"}),
            std::string("--optimizer-threads: '4294967296' is not valid; ") +
                valid);
  EXPECT_EQ(errorOf({"--optimizer-threads"}),
            "--optimizer-threads needs a value: an integer >= 0 (0: the "
            "node's hardware threads divided among its ranks)");
}

TEST(OptionsTest, UsageListsEveryFlag) {
  std::string usage = usageText("train");
  for (const char *flag :
       {"--steps", "--seed", "--lr", "--log-every", "--data", "--data-format",
        "--load-params", "--save-params", "--save-grads", "--stats-json",
        "--threads", "--optimizer-threads", "--print-manifest",
        "--device-op-times", "--help"})
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  EXPECT_EQ(usage.rfind("usage: train", 0), 0u);
}

TEST(OptionsTest, CollectiveTimeoutAndTrace) {
  Options defaults = parse({});
  EXPECT_EQ(defaults.collectiveTimeout, 300.0);
  EXPECT_TRUE(defaults.traceFile.empty());
  Options o = parse({"--collective-timeout", "2.5", "--trace", "t.json"});
  EXPECT_EQ(o.collectiveTimeout, 2.5);
  EXPECT_EQ(o.traceFile, "t.json");
  EXPECT_EQ(parse({"--collective-timeout=0"}).collectiveTimeout, 0.0)
      << "0 waits forever";
  for (const char *bad : {"-1", "soon", "inf", "nan", "1s"})
    EXPECT_EQ(errorOf({"--collective-timeout", bad}),
              std::string("--collective-timeout: '") + bad +
                  "' is not valid; expected a number of seconds >= 0 (0 "
                  "waits forever)");
  EXPECT_EQ(errorOf({"--trace="}), "--trace needs a value: a file name");
  EXPECT_EQ(errorOf({"--collective-timeout"}),
            "--collective-timeout needs a value: a number of seconds >= 0 (0 "
            "waits forever)");
  std::string usage = usageText("train");
  for (const char *flag : {"--collective-timeout S", "--trace FILE",
                           "--trace-steps A:B"})
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
}

TEST(OptionsTest, TraceSteps) {
  EXPECT_FALSE(parse({"--trace", "t.json"}).traceSteps.has_value())
      << "every step by default";
  Options o = parse({"--trace", "t.json", "--trace-steps", "3:5"});
  ASSERT_TRUE(o.traceSteps.has_value());
  EXPECT_EQ(o.traceSteps->first, 3);
  EXPECT_EQ(o.traceSteps->last, 5);
  EXPECT_FALSE(o.traceSteps->contains(2));
  EXPECT_TRUE(o.traceSteps->contains(3));
  EXPECT_TRUE(o.traceSteps->contains(5));
  EXPECT_FALSE(o.traceSteps->contains(6));
  EXPECT_EQ(parse({"--trace=t", "--trace-steps=4:4"}).traceSteps->last, 4);
  for (const char *bad : {"3", "5:3", "0:2", ":4", "2:", "a:b", "1:2:3",
                          "-1:2", " 1:2"})
    EXPECT_EQ(errorOf({"--trace", "t.json", "--trace-steps", bad}),
              std::string("--trace-steps: '") + bad +
                  "' is not valid; expected A:B, the first and last step to "
                  "trace (1 <= A <= B)");
  EXPECT_EQ(errorOf({"--trace-steps", "1:2"}),
            "--trace-steps applies to --trace FILE, which is not given");
  EXPECT_EQ(errorOf({"--steps", "4", "--trace", "t", "--trace-steps", "5:9"}),
            "--trace-steps 5:9 starts after the run's last step, 4 "
            "(--steps): the trace would be empty");
}

TEST(OptionsTest, LogFormatAndDeviceSpec) {
  EXPECT_EQ(parse({}).logFormat, LogFormat::Text);
  EXPECT_EQ(parse({"--log-format", "json"}).logFormat, LogFormat::Json);
  EXPECT_EQ(parse({"--log-format=text"}).logFormat, LogFormat::Text);
  EXPECT_EQ(errorOf({"--log-format", "csv"}),
            "--log-format: 'csv' is not valid; expected text or json");
  EXPECT_EQ(errorOf({"--log-format"}),
            "--log-format needs a value: text or json");
  EXPECT_TRUE(parse({}).deviceSpecFile.empty());
  EXPECT_EQ(parse({"--device-spec", "h100.json"}).deviceSpecFile, "h100.json");
  EXPECT_EQ(errorOf({"--device-spec="}),
            "--device-spec needs a value: a file name");
  std::string usage = usageText("train");
  for (const char *flag : {"--log-format F", "--device-spec FILE"})
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
}

TEST(OptionsTest, Checkpoints) {
  Options none = parse({});
  EXPECT_TRUE(none.checkpointDir.empty());
  EXPECT_EQ(none.checkpointEvery, 0);
  EXPECT_EQ(none.keepCheckpoints, 2);
  EXPECT_FALSE(none.resume);
  EXPECT_EQ(none.exitAfterStep, 0);
  EXPECT_EQ(none.exitDuringCheckpoint, 0);

  Options o = parse({"--checkpoint-dir", "ck", "--checkpoint-every=5",
                     "--keep-checkpoints", "3", "--resume", "--exit-after-step",
                     "7", "--exit-during-checkpoint=10"});
  EXPECT_EQ(o.checkpointDir, "ck");
  EXPECT_EQ(o.checkpointEvery, 5);
  EXPECT_EQ(o.keepCheckpoints, 3);
  EXPECT_TRUE(o.resume);
  EXPECT_EQ(o.exitAfterStep, 7);
  EXPECT_EQ(o.exitDuringCheckpoint, 10);
  // The crash hook between checkpoints needs no directory.
  EXPECT_EQ(parse({"--exit-after-step", "2"}).exitAfterStep, 2);

  EXPECT_EQ(errorOf({"--resume"}),
            "--resume applies to --checkpoint-dir DIR, which is not given");
  EXPECT_EQ(errorOf({"--checkpoint-every", "5"}),
            "--checkpoint-every applies to --checkpoint-dir DIR, which is not "
            "given");
  EXPECT_EQ(errorOf({"--keep-checkpoints", "1"}),
            "--keep-checkpoints applies to --checkpoint-dir DIR, which is not "
            "given");
  EXPECT_EQ(errorOf({"--checkpoint-dir", "ck", "--checkpoint-every", "0"}),
            "--checkpoint-every: '0' is not valid; expected an integer >= 1");
  EXPECT_EQ(errorOf({"--checkpoint-dir", "ck", "--keep-checkpoints", "0"}),
            "--keep-checkpoints: '0' is not valid; expected an integer in "
            "1..2147483647");
  EXPECT_EQ(errorOf({"--checkpoint-dir="}),
            "--checkpoint-dir needs a value: a directory name");
  EXPECT_EQ(errorOf({"--resume=yes", "--checkpoint-dir", "ck"}),
            "--resume takes no value");
  EXPECT_EQ(errorOf({"--checkpoint-dir", "ck", "--resume", "--load-params",
                     "p.safetensors"}),
            "--resume and --load-params both set the initial state; use one "
            "(a consolidated checkpoint loads with --load-params, a sharded "
            "one with --resume)");

  // The hidden hook that hangs a rank at one of the runtime's waits.
  EXPECT_EQ(none.stopRankAt.step, 0);
  Options stop =
      parse({"--checkpoint-dir", "ck", "--stop-rank-at", "3:1:gather"});
  EXPECT_EQ(stop.stopRankAt.step, 3);
  EXPECT_EQ(stop.stopRankAt.rank, 1);
  EXPECT_EQ(stop.stopRankAt.point, StopPoint::Gather);
  EXPECT_TRUE(stop.stopRankAt.due(StopPoint::Gather, 3, 1));
  EXPECT_FALSE(stop.stopRankAt.due(StopPoint::Gather, 3, 0));
  EXPECT_FALSE(stop.stopRankAt.due(StopPoint::Commit, 3, 1));
  EXPECT_FALSE(stop.stopRankAt.due(StopPoint::Gather, 2, 1));
  EXPECT_FALSE(none.stopRankAt.due(StopPoint::Create, 0, 0));
  EXPECT_EQ(parse({"--checkpoint-dir", "ck", "--stop-rank-at=2:0:commit"})
                .stopRankAt.point,
            StopPoint::Commit);
  EXPECT_EQ(parse({"--checkpoint-dir", "ck", "--stop-rank-at", "4:1:load"})
                .stopRankAt.point,
            StopPoint::Load);
  // The step, evaluation and offload points need no checkpoints.
  EXPECT_EQ(parse({"--stop-rank-at", "1:3:step"}).stopRankAt.point,
            StopPoint::Step);
  EXPECT_EQ(parse({"--stop-rank-at", "2:1:eval"}).stopRankAt.point,
            StopPoint::Eval);
  EXPECT_EQ(parse({"--stop-rank-at", "3:0:offload"}).stopRankAt.point,
            StopPoint::Offload);
  const std::string expectedStop =
      "; expected STEP:RANK:POINT, POINT one of create, write, gather, "
      "commit, load, step, eval, offload (e.g. 2:1:write)";
  EXPECT_EQ(errorOf({"--checkpoint-dir", "ck", "--stop-rank-at", "3:1"}),
            "--stop-rank-at: '3:1' is not valid: it has fewer than "
            "three parts" +
                expectedStop);
  EXPECT_EQ(
      errorOf({"--checkpoint-dir", "ck", "--stop-rank-at", "0:1:write"}),
      "--stop-rank-at: '0:1:write' is not valid: the step is "
      "not an integer >= 1" +
          expectedStop);
  EXPECT_EQ(
      errorOf({"--checkpoint-dir", "ck", "--stop-rank-at", "2:x:write"}),
      "--stop-rank-at: '2:x:write' is not valid: the rank is "
      "not an integer >= 0" +
          expectedStop);
  EXPECT_EQ(errorOf({"--checkpoint-dir", "ck", "--stop-rank-at", "2:1:save"}),
            "--stop-rank-at: '2:1:save' is not valid: the point is "
            "not one of create, write, gather, commit, load, step, eval, "
            "offload" +
                expectedStop);
  EXPECT_EQ(errorOf({"--stop-rank-at", "2:1:write"}),
            "--stop-rank-at 2:1:write applies to --checkpoint-dir DIR, which "
            "is not given");

  std::string usage = usageText("train");
  for (const char *flag : {"--checkpoint-dir DIR", "--checkpoint-every K",
                           "--keep-checkpoints N", "--resume"})
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  // Test hooks stay out of the help.
  EXPECT_EQ(usage.find("--exit-"), std::string::npos);
}

TEST(OptionsTest, OffloadDir) {
  EXPECT_TRUE(parse({}).offloadDir.empty());
  EXPECT_EQ(parse({"--offload-dir", "/mnt/nvme"}).offloadDir, "/mnt/nvme");
  EXPECT_EQ(parse({"--offload-dir=/a", "--offload-dir", "/b"}).offloadDir,
            "/b");
  EXPECT_EQ(errorOf({"--offload-dir"}),
            "--offload-dir needs a value: a directory name");
  EXPECT_EQ(errorOf({"--offload-dir="}),
            "--offload-dir needs a value: a directory name");
  EXPECT_EQ(errorOf({"--offload-dir", "--steps", "3"}),
            "--offload-dir needs a value: a directory name");
  EXPECT_NE(usageText("train").find("--offload-dir DIR"), std::string::npos);
}

TEST(OptionsTest, EvaluationFlags) {
  Options o = parse({"--eval-every", "50", "--eval-steps=20", "--eval-data",
                     "val.bin", "--data", "train.bin"});
  EXPECT_EQ(o.evalEvery, 50);
  EXPECT_EQ(o.evalSteps, 20);
  EXPECT_EQ(o.evalDataFile, "val.bin");
  Options defaults = parse({"--eval-every", "5"});
  EXPECT_EQ(defaults.evalSteps, 10);
  EXPECT_TRUE(defaults.evalDataFile.empty());
  EXPECT_EQ(parse({}).evalEvery, 0);
  EXPECT_EQ(errorOf({"--eval-every", "0"}),
            "--eval-every: '0' is not valid; expected an integer >= 1");
  EXPECT_EQ(errorOf({"--eval-steps", "4"}),
            "--eval-steps applies to --eval-every N, which is not given");
  EXPECT_EQ(errorOf({"--eval-data", "val.bin"}),
            "--eval-data applies to --eval-every N, which is not given");
  EXPECT_EQ(parse({"--eval-every", "5", "--save-best", "best.st"}).saveBestFile,
            "best.st");
  EXPECT_EQ(errorOf({"--save-best", "best.st"}),
            "--save-best applies to --eval-every N, which is not given");
  EXPECT_FALSE(defaults.evalAtStart);
  EXPECT_TRUE(parse({"--eval-every", "5", "--eval-at-start"}).evalAtStart);
  EXPECT_EQ(errorOf({"--eval-at-start"}),
            "--eval-at-start applies to --eval-every N, which is not given");
  EXPECT_EQ(errorOf({"--eval-every", "5", "--eval-at-start=yes"}),
            "--eval-at-start takes no value");
  EXPECT_EQ(errorOf({"--eval-every", "5", "--data", "train.bin"}),
            "--eval-every evaluates held-out batches: give them with "
            "--eval-data FILE (the training data of --data would give a "
            "training loss)");
  EXPECT_NE(usageText("train").find("--eval-every N"), std::string::npos);
  EXPECT_TRUE(parse({"--print-eval-manifest"}).printEvalManifest);
  EXPECT_FALSE(parse({"--print-manifest"}).printEvalManifest);
  EXPECT_EQ(errorOf({"--print-eval-manifest=yes"}),
            "--print-eval-manifest takes no value");
}

TEST(DriverMessagesTest, EvaluationStepSharesTheParameters) {
  auto manifest = [](const std::string &grid, const std::string &params) {
    Expected<Manifest> m = parseManifest(
        "autoshard-manifest 1\nabi 6\nstep train\nstrategy zero3\ngrid " +
        grid + "\n" + params + "arg " +
        std::to_string(std::count(params.begin(), params.end(), '\n')) +
        " input x f32 " + std::to_string(4 / std::stoi(grid)) +
        "x4 batch_dim=0 global=4\n"
        "result 0 loss loss f32 scalar\nend\n");
    EXPECT_TRUE(m.ok()) << m.message();
    return m.ok() ? *m : Manifest();
  };
  std::string w = "arg 0 param w f32 8 full=4x4 shard_axes=1 init=zeros\n";
  std::string b = "arg 1 param b f32 4 init=zeros\n";
  Manifest train = manifest("2", w + b);
  // The evaluation step's own order: b first.
  Manifest eval = manifest("2", "arg 0 param b f32 4 init=zeros\n"
                                "arg 1 param w f32 8 full=4x4 shard_axes=1 "
                                "init=zeros\n");
  Expected<std::vector<int>> sources = evaluationParamSources(train, eval);
  ASSERT_TRUE(sources.ok()) << sources.message();
  EXPECT_EQ(*sources, (std::vector<int>{1, 0, -1}));

  Manifest whole = manifest("2", "arg 0 param w f32 4x4 init=zeros\n" + b);
  EXPECT_EQ(evaluationParamSources(train, whole).message(),
            "the evaluation step holds parameter 'w' as f32 4x4 in device "
            "memory, the training step as f32 8 (a shard of 4x4, axes mask "
            "1) in device memory; the two steps must share it (shard-compile "
            "--with-eval checks this)");
  Manifest other = manifest("2", "arg 0 param v f32 4 init=zeros\n");
  EXPECT_EQ(evaluationParamSources(train, other).message(),
            "the evaluation step reads parameter 'v', which the training "
            "step does not have");
  Manifest wider = manifest("4", "arg 0 param b f32 4 init=zeros\n");
  EXPECT_EQ(evaluationParamSources(train, wider).message(),
            "the evaluation step was compiled for grid 4, the training step "
            "for 2; compile both with shard-compile --with-eval");
}

TEST(DriverMessagesTest, WorldSizeMismatch) {
  Manifest m;
  m.grid = {2};
  EXPECT_EQ(worldSizeMismatchMessage(m, 3),
            "this binary was compiled for world size 2 (grid 2) but was "
            "started with 3 ranks; launch it with 'mpirun -np 2' or recompile "
            "with --world-size=3");
  m.grid = {2, 4};
  EXPECT_EQ(worldSizeMismatchMessage(m, 1),
            "this binary was compiled for world size 8 (grid 2x4) but was "
            "started with 1 rank; launch it with 'mpirun -np 8' or recompile "
            "with --world-size=1");
  // A torchrun-style launch is told about its own variables.
  EXPECT_EQ(worldSizeMismatchMessage(m, 2, "tcp"),
            "this binary was compiled for world size 8 (grid 2x4) but was "
            "started with 2 ranks; launch it with WORLD_SIZE=8 (torchrun "
            "--nproc-per-node=8 on one node) or recompile with "
            "--world-size=2");
}

TEST(DriverMessagesTest, LrOverrideNeedsAnLrHyper) {
  auto manifestWith = [](const std::string &hypers) {
    Expected<Manifest> m = parseManifest(
        "autoshard-manifest 1\nabi 6\nstep train\nstrategy none\ngrid 1\n" +
        hypers + "result 0 loss loss f32 scalar\nend\n");
    EXPECT_TRUE(m.ok()) << m.message();
    return *m;
  };
  EXPECT_TRUE(checkLrOverride(
                  manifestWith("arg 0 hyper lr f32 scalar init=constant:1\n"))
                  .ok());
  Status none = checkLrOverride(
      manifestWith("arg 0 hyper momentum f32 scalar init=constant:0.9\n"
                   "arg 1 hyper wd f32 scalar init=zeros\n"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.message(), "--lr: step 'train' has no hyper-parameter named "
                            "'lr' (its hypers: momentum, wd)");
  EXPECT_EQ(checkLrOverride(manifestWith("")).message(),
            "--lr: step 'train' has no hyper-parameter named 'lr' (it has no "
            "hypers)");
  EXPECT_EQ(
      checkLrOverride(manifestWith("arg 0 hyper lr f32 2 init=zeros\n"))
          .message(),
      "--lr: the step's hyper 'lr' is f32 2, not a single float that --lr "
      "could set");
  EXPECT_EQ(checkLrOverride(manifestWith(""), "--lr-schedule").message(),
            "--lr-schedule: step 'train' has no hyper-parameter named 'lr' "
            "(it has no hypers)");

  // A schedule's peak: --lr, or the constant the hyper starts at.
  Manifest constant =
      manifestWith("arg 0 hyper lr f32 scalar init=constant:0.004\n");
  Options options;
  options.lrSchedule.kind = LrSchedule::Cosine;
  EXPECT_DOUBLE_EQ(*scheduledPeakLr(constant, options), 0.004);
  options.lr = 0.5;
  EXPECT_DOUBLE_EQ(*scheduledPeakLr(constant, options), 0.5);
  options.lrSchedule.minLr = 0.6;
  EXPECT_EQ(scheduledPeakLr(constant, options).message(),
            "--min-lr 0.6 is above the peak learning rate 0.5 (--lr); a "
            "schedule decays from the peak down to --min-lr");
  options.lr.reset();
  EXPECT_EQ(scheduledPeakLr(constant, options).message(),
            "--min-lr 0.6 is above the peak learning rate 0.004 (the step's "
            "initial 'lr'); a schedule decays from the peak down to --min-lr");
  options.lrSchedule.minLr = 0;
  EXPECT_EQ(
      scheduledPeakLr(manifestWith("arg 0 hyper lr f32 scalar init=normal:1\n"),
                      options)
          .message(),
      "--lr-schedule: the step's hyper 'lr' has no constant initial value to "
      "start from; give the peak learning rate with --lr");
}

} // namespace

TEST(OptionsTest, UsageSaysWhatLaunchesWork) {
  std::string both = launchUsage("train", {true, true, false});
  EXPECT_NE(both.find("mpirun -np N ./train [options]\n"
                      "      collectives over MPI\n"),
            std::string::npos)
      << both;
  EXPECT_NE(both.find("set by hand:\n      collectives over Gloo (TCP)\n"),
            std::string::npos)
      << both;
  // Without Gloo a CPU binary's torchrun-style launch is one rank only,
  // and the help says how to get more.
  std::string noGloo = launchUsage("train", {true, false, false});
  EXPECT_NE(noGloo.find("world size 1 only: this runtime was built without "
                        "Gloo\n      (install libgloo-dev and rebuild)"),
            std::string::npos)
      << noGloo;
  EXPECT_EQ(noGloo.find("over Gloo"), std::string::npos) << noGloo;
  std::string noMpi = launchUsage("train", {false, true, true});
  EXPECT_NE(noMpi.find("not this binary: its runtime was built without MPI"),
            std::string::npos)
      << noMpi;
  EXPECT_NE(noMpi.find("NCCL"), std::string::npos) << noMpi;
  EXPECT_EQ(usageText("train", {true, false, false}).find(noGloo),
            std::string("usage: train [options]\n").size());
}
