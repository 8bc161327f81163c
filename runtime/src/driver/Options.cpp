// The training binary's command line, parsed by a pure function.
#include "driver/Options.h"

#include <array>
#include <charconv>
#include <climits>
#include <cmath>
#include <limits>

namespace autoshard::rt {

namespace {

std::string invalid(std::string_view flag, std::string_view value,
                    std::string_view expected) {
  return std::string(flag) + ": '" + std::string(value) +
         "' is not valid; expected " + std::string(expected);
}

template <typename Int> bool parseInteger(std::string_view text, Int &value) {
  if (text.empty())
    return false;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

// Values: Options.def's VALUE column. Each kind says what a valid value is
// (`expected`, for "needs a value") and reads one into its field
// (`readValue`, overloaded on the field's type), answering with the words a
// later "applies to" error names the flag by.

/// A flag without a value: sets a bool.
struct Switch {
  static constexpr bool takesValue = false;
  std::string expected() const { return ""; }
};

Expected<std::string> readValue(bool &field, const Switch &,
                                std::string_view flag, std::string_view) {
  field = true;
  return std::string(flag);
}

/// An integer >= min; `note` follows what is expected in its errors.
struct AtLeast {
  static constexpr bool takesValue = true;
  explicit AtLeast(int64_t min, const char *note = "") : min(min), note(note) {}
  int64_t min;
  const char *note;
  std::string expected() const {
    return "an integer >= " + std::to_string(min) + note;
  }
};

Expected<std::string> readValue(int64_t &field, const AtLeast &kind,
                                std::string_view flag, std::string_view text) {
  int64_t n;
  if (!parseInteger(text, n) || n < kind.min)
    return Error(invalid(flag, text, kind.expected()));
  field = n;
  return std::string(flag);
}

// An int's upper end is within reach of a typo, so a bad value's error
// names the whole range.
Expected<std::string> readValue(int &field, const AtLeast &kind,
                                std::string_view flag, std::string_view text) {
  int n;
  if (!parseInteger(text, n) || n < kind.min)
    return Error(invalid(flag, text,
                         "an integer in " + std::to_string(kind.min) + ".." +
                             std::to_string(INT_MAX) + kind.note));
  field = n;
  return std::string(flag);
}

/// Any uint64_t.
struct AnyUnsigned {
  static constexpr bool takesValue = true;
  std::string expected() const {
    return "an integer in 0.." +
           std::to_string(std::numeric_limits<uint64_t>::max());
  }
};

Expected<std::string> readValue(uint64_t &field, const AnyUnsigned &kind,
                                std::string_view flag, std::string_view text) {
  uint64_t n;
  if (!parseInteger(text, n))
    return Error(invalid(flag, text, kind.expected()));
  field = n;
  return std::string(flag);
}

/// A finite number >= 0, into a double or an optional one.
struct NonNegative {
  static constexpr bool takesValue = true;
  explicit NonNegative(const char *text = "a finite number >= 0")
      : text(text) {}
  const char *text;
  std::string expected() const { return text; }
};

template <typename Field>
Expected<std::string> readValue(Field &field, const NonNegative &kind,
                                std::string_view flag, std::string_view text) {
  double number;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, number);
  if (text.empty() || ec != std::errc() || ptr != end ||
      !std::isfinite(number) || number < 0)
    return Error(invalid(flag, text, kind.expected()));
  field = number;
  return std::string(flag);
}

/// A file or directory name; an empty one is a missing value.
struct Path {
  static constexpr bool takesValue = true;
  explicit Path(const char *text) : text(text) {}
  const char *text;
  std::string expected() const { return text; }
};

Expected<std::string> readValue(std::string &field, const Path &kind,
                                std::string_view flag, std::string_view text) {
  if (text.empty())
    return Error(std::string(flag) + " needs a value: " + kind.expected());
  field = std::string(text);
  return std::string(flag);
}

/// What `parse` (text -> std::optional<T>) accepts, described by `text`.
template <typename Parse> struct OneOf {
  static constexpr bool takesValue = true;
  OneOf(Parse parse, const char *text) : parse(parse), text(text) {}
  Parse parse;
  const char *text;
  std::string expected() const { return text; }
};

template <typename Field, typename Parse>
Expected<std::string> readValue(Field &field, const OneOf<Parse> &kind,
                                std::string_view flag, std::string_view text) {
  auto parsed = kind.parse(text);
  if (!parsed)
    return Error(invalid(flag, text, kind.expected()));
  field = *parsed;
  return std::string(flag);
}

/// core/StopHook.h's STEP:RANK:POINT, whose parser words its own errors.
struct StopRankAt {
  static constexpr bool takesValue = true;
  std::string expected() const { return "STEP:RANK:POINT"; }
};

Expected<std::string> readValue(StopHook &field, const StopRankAt &,
                                std::string_view flag, std::string_view text) {
  Expected<StopHook> stop = parseStopHook(text);
  if (!stop)
    return Error(stop.message());
  field = *stop;
  // Only a point in a checkpoint's save or resume needs --checkpoint-dir,
  // and which one is part of what the error names.
  if (!stop->inCheckpoint())
    return std::string();
  return std::string(flag) + " " + std::string(text);
}

const DriverFlag *findFlag(std::string_view name) {
  for (const DriverFlag &flag : driverFlags())
    if (flag.name == name)
      return &flag;
  return nullptr;
}

/// The last use of a flag that needs each Needs (empty: none).
using NeedsUses = std::array<std::string, size_t(Needs::CheckpointDir) + 1>;

/// The rules between flags, once all are read.
Status checkCombination(const Options &options, const NeedsUses &uses) {
  auto use = [&](Needs needs) -> const std::string & {
    return uses[size_t(needs)];
  };
  if (!use(Needs::Trace).empty() && options.traceFile.empty())
    return Error(use(Needs::Trace) +
                 " applies to --trace FILE, which is not given");
  if (options.traceSteps && options.traceSteps->first > options.steps)
    return Error("--trace-steps " + std::to_string(options.traceSteps->first) +
                 ":" + std::to_string(options.traceSteps->last) +
                 " starts after the run's last step, " +
                 std::to_string(options.steps) +
                 " (--steps): the trace would be empty");
  if (!use(Needs::EvalEvery).empty() && options.evalEvery == 0)
    return Error(use(Needs::EvalEvery) +
                 " applies to --eval-every N, which is not given");
  // A token file's windows are random: evaluating on the training file
  // would report a training loss as a held-out one.
  if (options.evalEvery > 0 && !options.dataFile.empty() &&
      options.evalDataFile.empty())
    return Error("--eval-every evaluates held-out batches: give them with "
                 "--eval-data FILE (the training data of --data would give "
                 "a training loss)");
  const LrScheduleOptions &schedule = options.lrSchedule;
  if (!use(Needs::DecayingLr).empty() && schedule.kind == LrSchedule::Constant)
    return Error(use(Needs::DecayingLr) +
                 " shapes a decaying learning rate: it applies to "
                 "--lr-schedule cosine or linear");
  if (schedule.decaySteps > 0 && schedule.decaySteps <= schedule.warmupSteps)
    return Error("--decay-steps " + std::to_string(schedule.decaySteps) +
                 " must be after the warmup's " +
                 std::to_string(schedule.warmupSteps) +
                 " steps (--warmup-steps): the decay starts when the warmup "
                 "ends");
  if (!use(Needs::CheckpointDir).empty() && options.checkpointDir.empty())
    return Error(use(Needs::CheckpointDir) +
                 " applies to --checkpoint-dir DIR, which is not given");
  // Either could set the initial parameters; neither silently wins.
  if (options.resume && !options.loadParamsFile.empty())
    return Error("--resume and --load-params both set the initial state; "
                 "use one (a consolidated checkpoint loads with "
                 "--load-params, a sharded one with --resume)");
  // Synthetic batches have no format; ignoring the flag would hide a
  // forgotten --data.
  if (options.dataFormat != DataFormat::Auto && options.dataFile.empty())
    return Error(std::string("--data-format=") +
                 dataFormatName(options.dataFormat) +
                 " applies to --data FILE, which is not given");
  return Status();
}

} // namespace

std::optional<StepWindow> parseStepWindow(std::string_view text) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    return std::nullopt;
  StepWindow window;
  if (!parseInteger(text.substr(0, colon), window.first) ||
      !parseInteger(text.substr(colon + 1), window.last) || window.first < 1 ||
      window.last < window.first)
    return std::nullopt;
  return window;
}

const std::vector<DriverFlag> &driverFlags() {
  static const std::vector<DriverFlag> flags = {
#define DRIVER_PART_FLAG(PART, NAME, VALUE_NAME, VALUE, NEEDS, HELP)           \
  {NAME,                                                                       \
   VALUE_NAME,                                                                 \
   decltype(VALUE)::takesValue,                                                \
   HELP,                                                                       \
   Needs::NEEDS,                                                               \
   [] { return VALUE.expected(); },                                            \
   [](Options &options, std::string_view flag, std::string_view value) {       \
     return readValue(options.PART, VALUE, flag, value);                       \
   }},
#define DRIVER_FLAG(TYPE, FIELD, DEFAULT, NAME, VALUE_NAME, VALUE, NEEDS,      \
                    HELP)                                                      \
  DRIVER_PART_FLAG(FIELD, NAME, VALUE_NAME, VALUE, NEEDS, HELP)
#include "driver/Options.def"
  };
  return flags;
}

Expected<Options> parseOptions(const std::vector<std::string> &args) {
  Options options;
  NeedsUses uses;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      if (arg == "-h") {
        options.help = true;
        continue;
      }
      return Error("unexpected argument '" + std::string(arg) +
                   "'; every option starts with '--'");
    }
    std::string_view name = arg;
    std::optional<std::string_view> inlineValue;
    if (size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      inlineValue = arg.substr(eq + 1);
    }
    const DriverFlag *flag = findFlag(name);
    if (!flag)
      return Error("unknown option '" + std::string(name) +
                   "'; run with --help to see the options");

    std::string_view value;
    if (!flag->takesValue) {
      if (inlineValue)
        return Error(std::string(name) + " takes no value");
    } else if (inlineValue) {
      value = *inlineValue;
    } else {
      // A following option is a missing value, not a value: `--data --lr
      // 0.1` must not read a file named "--lr". Negative numbers still
      // reach the value check and get a precise message.
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
        return Error(std::string(name) + " needs a value: " + flag->expected());
      value = args[++i];
    }
    Expected<std::string> use = flag->read(options, name, value);
    if (!use)
      return Error(use.message());
    if (flag->needs != Needs::Nothing && !use->empty())
      uses[size_t(flag->needs)] = std::move(*use);
  }
  if (Status s = checkCombination(options, uses); !s)
    return Error(s.message());
  return options;
}

std::string launchUsage(std::string_view program,
                        const LaunchSupport &support) {
  std::string p(program);
  std::string mpi =
      !support.mpi ? "not this binary: its runtime was built without MPI"
      : support.ownCollectives
          ? "the backend's own collectives (NCCL) where it has them, "
            "else\n      MPI's"
          : "collectives over MPI";
  std::string tcp =
      support.ownCollectives
          ? "the backend's own collectives (NCCL) where it has them, "
            "else\n      " +
                std::string(support.gloo ? "Gloo's over TCP"
                                         : "none: world size 1 only")
      : support.gloo
          ? "collectives over Gloo (TCP)"
          : "world size 1 only: this runtime was built without Gloo\n"
            "      (install libgloo-dev and rebuild), so several ranks need "
            "mpirun";
  return "Runs the compiled training step on the world size N it was "
         "compiled for.\n"
         "Launches:\n"
         "  mpirun -np N ./" + p + " [options]\n"
         "      " + mpi + "\n"
         "  torchrun --nproc-per-node=N --no-python ./" + p + " [options]\n"
         "      or, per rank, RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and\n"
         "      LOCAL_RANK, LOCAL_WORLD_SIZE) set by hand:\n"
         "      " + tcp + "\n"
         "  ./" + p + " [options]\n"
         "      one process, for world size 1\n";
}

std::string usageText(std::string_view program, const LaunchSupport &support) {
  // Help starts in this column, beside the flag where it fits.
  constexpr size_t helpColumn = 23;
  const std::string indent(helpColumn, ' ');
  std::string usage = "usage: " + std::string(program) + " [options]\n" +
                      launchUsage(program, support) + "\n";
  for (const DriverFlag &flag : driverFlags()) {
    if (flag.help.empty())
      continue;
    std::string head = "  " + std::string(flag.name);
    if (flag.takesValue)
      head += " " + std::string(flag.valueName);
    usage += head;
    usage += head.size() < helpColumn
                 ? std::string(helpColumn - head.size(), ' ')
                 : "\n" + indent;
    for (char c : flag.help)
      usage += c == '\n' ? "\n" + indent : std::string(1, c);
    usage += '\n';
  }
  return usage;
}

int defaultThreads(unsigned hardwareThreads, int ranksOnNode) {
  int ranks = ranksOnNode > 0 ? ranksOnNode : 1;
  int threads = static_cast<int>(hardwareThreads) / ranks;
  return threads > 0 ? threads : 1;
}

Expected<KernelThreads>
chooseKernelThreads(int flagThreads, const char *(*getenv)(const char *),
                    unsigned hardwareThreads, int ranksOnNode) {
  if (flagThreads > 0)
    return KernelThreads{flagThreads, "--threads"};
  for (const char *name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char *raw = getenv(name);
    std::string_view text = raw ? raw : "";
    if (text.empty())
      continue;
    std::string_view first = text.substr(0, text.find(','));
    int n;
    if (!parseInteger(first, n) || n < 1)
      return Error(std::string(name) + "='" + std::string(text) +
                   "' is not a thread count; expected an integer in 1.." +
                   std::to_string(INT_MAX) +
                   " (or unset it; --threads N takes precedence)");
    return KernelThreads{n, std::string(name) + "=" + std::to_string(n)};
  }
  int ranks = ranksOnNode > 0 ? ranksOnNode : 1;
  return KernelThreads{defaultThreads(hardwareThreads, ranksOnNode),
                       "default: " + std::to_string(hardwareThreads) +
                           " hardware threads / " + std::to_string(ranks) +
                           (ranks == 1 ? " rank" : " ranks") + " on the node"};
}

} // namespace autoshard::rt
