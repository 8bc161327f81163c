// Options.def as a table: well-formed, documented, and each kind of value
// read and rejected as parseOptions always has.
#include "driver/Options.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

using namespace autoshard::rt;

namespace {

std::string errorOf(std::vector<std::string> args) {
  Expected<Options> o = parseOptions(args);
  EXPECT_FALSE(o.ok());
  return o.ok() ? std::string() : o.message();
}

/// A valid value of every flag (empty for a switch). A new flag adds one.
const std::map<std::string, std::string> &samples() {
  static const std::map<std::string, std::string> values = {
      {"--steps", "5"},
      {"--seed", "7"},
      {"--lr", "0.1"},
      {"--lr-schedule", "cosine"},
      {"--warmup-steps", "0"},
      {"--min-lr", "0.01"},
      {"--decay-steps", "8"},
      {"--log-every", "2"},
      {"--log-format", "json"},
      {"--device-spec", "h100.json"},
      {"--data", "train.bin"},
      {"--data-format", "auto"},
      {"--eval-every", "2"},
      {"--eval-steps", "3"},
      {"--eval-data", "val.bin"},
      {"--eval-at-start", ""},
      {"--save-best", "best.safetensors"},
      {"--load-params", "p.safetensors"},
      {"--save-params", "p.safetensors"},
      {"--save-grads", "g.safetensors"},
      {"--stats-json", "s.json"},
      {"--device-op-times", ""},
      {"--checkpoint-dir", "ck"},
      {"--checkpoint-every", "2"},
      {"--keep-checkpoints", "3"},
      {"--resume", ""},
      {"--offload-dir", "nvme"},
      {"--threads", "2"},
      {"--optimizer-threads", "0"},
      {"--collective-timeout", "5"},
      {"--trace", "t.json"},
      {"--trace-steps", "1:2"},
      {"--print-manifest", ""},
      {"--print-eval-manifest", ""},
      {"--help", ""},
      {"--exit-after-step", "3"},
      {"--exit-during-checkpoint", "3"},
      {"--stop-rank-at", "3:0:write"},
  };
  return values;
}

/// The flag that satisfies each Needs.
std::vector<std::string> satisfying(Needs needs) {
  switch (needs) {
  case Needs::Nothing:
    return {};
  case Needs::Trace:
    return {"--trace", "t.json"};
  case Needs::EvalEvery:
    return {"--eval-every", "2"};
  case Needs::DecayingLr:
    return {"--lr-schedule", "linear"};
  case Needs::CheckpointDir:
    return {"--checkpoint-dir", "ck"};
  }
  return {};
}

std::vector<std::string> withSample(const DriverFlag &flag) {
  std::vector<std::string> args{std::string(flag.name)};
  if (flag.takesValue)
    args.push_back(samples().at(std::string(flag.name)));
  return args;
}

TEST(OptionsTableTest, NamesAreUniqueKebabCaseFlags) {
  std::set<std::string_view> seen;
  for (const DriverFlag &flag : driverFlags()) {
    EXPECT_TRUE(seen.insert(flag.name).second) << "twice: " << flag.name;
    ASSERT_GT(flag.name.size(), 2u);
    EXPECT_EQ(flag.name.substr(0, 2), "--") << flag.name;
    for (char c : flag.name.substr(2))
      EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '-') << flag.name;
    // A switch shows no value in --help, a flag with one always does.
    EXPECT_EQ(flag.takesValue, !flag.valueName.empty()) << flag.name;
  }
}

TEST(OptionsTableTest, EveryFlagHasASample) {
  EXPECT_EQ(samples().size(), driverFlags().size());
  for (const DriverFlag &flag : driverFlags())
    EXPECT_EQ(samples().count(std::string(flag.name)), 1u) << flag.name;
}

TEST(OptionsTableTest, OnlyTheTestHooksAreHidden) {
  std::set<std::string_view> hidden;
  for (const DriverFlag &flag : driverFlags())
    if (flag.help.empty())
      hidden.insert(flag.name);
  EXPECT_EQ(hidden, (std::set<std::string_view>{"--exit-after-step",
                                                "--exit-during-checkpoint",
                                                "--stop-rank-at"}));
}

TEST(OptionsTableTest, UsageDocumentsEveryVisibleFlagOnce) {
  std::string usage = usageText("train");
  for (const DriverFlag &flag : driverFlags()) {
    std::string head = "\n  " + std::string(flag.name);
    if (flag.takesValue)
      head += " " + std::string(flag.valueName);
    size_t at = usage.find(head + " ");
    if (at == std::string::npos)
      at = usage.find(head + "\n");
    if (flag.help.empty()) {
      EXPECT_EQ(at, std::string::npos) << flag.name;
      continue;
    }
    ASSERT_NE(at, std::string::npos) << flag.name;
    // Its help's first line follows, beside the flag or below it.
    std::string_view first = flag.help.substr(0, flag.help.find('\n'));
    size_t help = usage.find_first_not_of(" \n", at + head.size());
    EXPECT_EQ(usage.compare(help, first.size(), first), 0) << flag.name;
  }
  // And nothing else: every line that starts a flag's paragraph is one of
  // the table's.
  std::istringstream lines(usage);
  std::string line;
  size_t paragraphs = 0, visible = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("  --", 0) != 0)
      continue;
    ++paragraphs;
    std::string name = line.substr(2, line.find(' ', 2) - 2);
    EXPECT_EQ(samples().count(name), 1u) << line;
  }
  for (const DriverFlag &flag : driverFlags())
    visible += !flag.help.empty();
  EXPECT_EQ(paragraphs, visible);
}

TEST(OptionsTableTest, UsageLayout) {
  std::string usage = usageText("train");
  const std::string indent(23, ' ');
  // A flag that fits in the column has its help beside it; a longer one
  // below; every further line of help is indented to the column.
  EXPECT_NE(usage.find("\n  --steps N            training steps to run "
                       "(default 10)\n"),
            std::string::npos);
  EXPECT_NE(usage.find("\n  --checkpoint-dir DIR write sharded "
                       "checkpoints into DIR (after the last step,\n" +
                       indent + "and every K steps with --checkpoint-every)\n"),
            std::string::npos);
  EXPECT_NE(usage.find("\n  --optimizer-threads N\n" + indent +
                       "threads of the CPU optimizer step per rank (default "
                       "1;\n" +
                       indent +
                       "0: the node's hardware threads divided "
                       "among its ranks)\n"),
            std::string::npos);
  EXPECT_NE(usage.find("\n  --print-eval-manifest\n" + indent + "print the"),
            std::string::npos);
}

TEST(OptionsTableTest, EverySampleParses) {
  for (const DriverFlag &flag : driverFlags()) {
    std::vector<std::string> args = satisfying(flag.needs);
    std::vector<std::string> own = withSample(flag);
    args.insert(args.end(), own.begin(), own.end());
    Expected<Options> o = parseOptions(args);
    EXPECT_TRUE(o.ok()) << flag.name << ": " << (o ? "" : o.message());
  }
}

TEST(OptionsTableTest, NeedsIsEnforced) {
  for (const DriverFlag &flag : driverFlags()) {
    if (flag.needs == Needs::Nothing)
      continue;
    std::string error = errorOf(withSample(flag));
    EXPECT_EQ(error.rfind(std::string(flag.name), 0), 0u) << error;
    EXPECT_NE(error.find("applies to"), std::string::npos) << error;
  }
  // The last flag that needs one is the one named.
  EXPECT_EQ(errorOf({"--resume", "--keep-checkpoints", "3"}),
            "--keep-checkpoints applies to --checkpoint-dir DIR, which is "
            "not given");
  EXPECT_EQ(errorOf({"--keep-checkpoints", "3", "--stop-rank-at", "3:0:write"}),
            "--stop-rank-at 3:0:write applies to --checkpoint-dir DIR, which "
            "is not given");
  // A --stop-rank-at point outside checkpoints does not replace it.
  EXPECT_EQ(errorOf({"--resume", "--stop-rank-at", "3:0:eval"}),
            "--resume applies to --checkpoint-dir DIR, which is not given");
}

TEST(OptionsTableTest, MissingValues) {
  for (const DriverFlag &flag : driverFlags()) {
    std::string name(flag.name);
    if (!flag.takesValue) {
      EXPECT_EQ(errorOf({name + "=1"}), name + " takes no value");
      continue;
    }
    std::string missing = name + " needs a value: " + flag.expected();
    EXPECT_EQ(errorOf({name}), missing);
    EXPECT_EQ(errorOf({name, "--steps", "3"}), missing) << "not a value";
  }
}

TEST(OptionsTableTest, EachKindOfValue) {
  struct Case {
    std::vector<std::string> args;
    const char *error;
  };
  const Case cases[] = {
      // AtLeast into an int64_t: >= MIN, no upper end named.
      {{"--warmup-steps", "-1"},
       "--warmup-steps: '-1' is not valid; expected an integer >= 0"},
      {{"--steps=1.5"},
       "--steps: '1.5' is not valid; expected an integer >= 1"},
      {{"--steps", "9223372036854775808"},
       "--steps: '9223372036854775808' is not valid; expected an integer >= "
       "1"},
      {{"--steps="}, "--steps: '' is not valid; expected an integer >= 1"},
      // AtLeast into an int: the range, then the note.
      {{"--threads", "2147483648"},
       "--threads: '2147483648' is not valid; expected an integer in "
       "1..2147483647"},
      {{"--optimizer-threads", "-1"},
       "--optimizer-threads: '-1' is not valid; expected an integer in "
       "0..2147483647 (0: the node's hardware threads divided among its "
       "ranks)"},
      // AnyUnsigned.
      {{"--seed", "-1"},
       "--seed: '-1' is not valid; expected an integer in "
       "0..18446744073709551615"},
      // NonNegative, into an optional<double> and a double.
      {{"--lr", "nan"},
       "--lr: 'nan' is not valid; expected a finite number >= "
       "0"},
      {{"--lr", "0x1"},
       "--lr: '0x1' is not valid; expected a finite number >= 0"},
      {{"--collective-timeout", "-0.5"},
       "--collective-timeout: '-0.5' is not valid; expected a number of "
       "seconds >= 0 (0 waits forever)"},
      // Path: an empty one is a missing value.
      {{"--checkpoint-dir="},
       "--checkpoint-dir needs a value: a directory "
       "name"},
      {{"--data="}, "--data needs a value: a file name"},
      // OneOf.
      {{"--lr-schedule", "step"},
       "--lr-schedule: 'step' is not valid; expected constant, cosine or "
       "linear"},
      {{"--data-format", "csv"},
       "--data-format: 'csv' is not valid; expected auto, asdata or tokens"},
      // StopRankAt: the parser's own words.
      {{"--stop-rank-at", "3:0:nowhere"}, nullptr},
  };
  for (const Case &c : cases) {
    std::string error = errorOf(c.args);
    if (c.error)
      EXPECT_EQ(error, c.error);
    else
      EXPECT_NE(error.find("STEP:RANK:POINT"), std::string::npos) << error;
  }

  // And each reads its value into the field the table names.
  Expected<Options> o = parseOptions({"--steps",
                                      "9223372036854775807",
                                      "--threads=2147483647",
                                      "--seed",
                                      "18446744073709551615",
                                      "--lr",
                                      "0",
                                      "--min-lr",
                                      "1e-5",
                                      "--lr-schedule",
                                      "linear",
                                      "--data-format",
                                      "tokens",
                                      "--data",
                                      "d",
                                      "--trace",
                                      "t",
                                      "--trace-steps",
                                      "2:3",
                                      "--device-op-times"});
  ASSERT_TRUE(o.ok()) << o.message();
  EXPECT_EQ(o->steps, INT64_MAX);
  EXPECT_EQ(o->threads, 2147483647);
  EXPECT_EQ(o->seed, UINT64_MAX);
  EXPECT_EQ(o->lr, 0.0);
  EXPECT_EQ(o->lrSchedule.minLr, 1e-5);
  EXPECT_EQ(o->lrSchedule.kind, LrSchedule::Linear);
  EXPECT_EQ(o->dataFormat, DataFormat::Tokens);
  EXPECT_EQ(o->dataFile, "d");
  ASSERT_TRUE(o->traceSteps);
  EXPECT_EQ(o->traceSteps->first, 2);
  EXPECT_TRUE(o->deviceOpTimes);
}

} // namespace
