// The training binary's command line, parsed by a pure function.
#include "driver/Options.h"

#include <charconv>
#include <climits>
#include <cmath>

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

Expected<Options> parseOptions(const std::vector<std::string> &args) {
  Options options;
  // Checkpoint flags that need --checkpoint-dir, for the check at the end.
  std::string needsCheckpointDir;
  // --min-lr or --decay-steps, which a constant schedule would ignore.
  std::string decayFlag;
  // --eval-steps, --eval-data or --save-best, which need --eval-every.
  std::string evalFlag;
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
    std::string_view flag = arg;
    std::optional<std::string_view> inlineValue;
    if (size_t eq = arg.find('='); eq != std::string_view::npos) {
      flag = arg.substr(0, eq);
      inlineValue = arg.substr(eq + 1);
    }

    if (flag == "--help" || flag == "--print-manifest" ||
        flag == "--print-eval-manifest" || flag == "--resume" ||
        flag == "--device-op-times" || flag == "--eval-at-start") {
      if (inlineValue)
        return Error(std::string(flag) + " takes no value");
      (flag == "--help"                  ? options.help
       : flag == "--print-manifest"      ? options.printManifest
       : flag == "--print-eval-manifest" ? options.printEvalManifest
       : flag == "--resume"              ? options.resume
       : flag == "--eval-at-start"       ? options.evalAtStart
                                         : options.deviceOpTimes) = true;
      if (flag == "--resume")
        needsCheckpointDir = "--resume";
      if (flag == "--eval-at-start")
        evalFlag = std::string(flag);
      continue;
    }

    const char *expected = nullptr;
    if (flag == "--steps" || flag == "--log-every" || flag == "--threads" ||
        flag == "--eval-every" || flag == "--eval-steps" ||
        flag == "--checkpoint-every" || flag == "--keep-checkpoints" ||
        flag == "--exit-after-step" || flag == "--exit-during-checkpoint")
      expected = "an integer >= 1";
    else if (flag == "--optimizer-threads")
      expected = "an integer >= 0 (0: the node's hardware threads divided "
                 "among its ranks)";
    else if (flag == "--seed")
      expected = "an integer in 0..18446744073709551615";
    else if (flag == "--lr" || flag == "--min-lr")
      expected = "a finite number >= 0";
    else if (flag == "--lr-schedule")
      expected = "constant, cosine or linear";
    else if (flag == "--warmup-steps")
      expected = "an integer >= 0";
    else if (flag == "--decay-steps")
      expected = "an integer >= 1";
    else if (flag == "--collective-timeout")
      expected = "a number of seconds >= 0 (0 waits forever)";
    else if (flag == "--trace")
      expected = "a file name";
    else if (flag == "--trace-steps")
      expected = "A:B, the first and last step to trace (1 <= A <= B)";
    else if (flag == "--log-format")
      expected = "text or json";
    else if (flag == "--data-format")
      expected = "auto, asdata or tokens";
    else if (flag == "--data" || flag == "--eval-data" ||
             flag == "--save-best" || flag == "--load-params" ||
             flag == "--save-params" || flag == "--save-grads" ||
             flag == "--stats-json" || flag == "--device-spec")
      expected = "a file name";
    else if (flag == "--checkpoint-dir" || flag == "--offload-dir")
      expected = "a directory name";
    else if (flag == "--stop-rank-at")
      expected = "STEP:RANK:POINT";
    else
      return Error("unknown option '" + std::string(flag) +
                   "'; run with --help to see the options");

    std::string_view value;
    if (inlineValue) {
      value = *inlineValue;
    } else {
      // A following option is a missing value, not a value: `--data --lr
      // 0.1` must not read a file named "--lr". Negative numbers still
      // reach the value check below and get a precise message.
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
        return Error(std::string(flag) + " needs a value: " + expected);
      value = args[++i];
    }

    if (flag == "--lr-schedule") {
      std::optional<LrSchedule> schedule = parseLrSchedule(value);
      if (!schedule)
        return Error(invalid(flag, value, expected));
      options.lrSchedule.kind = *schedule;
    } else if (flag == "--warmup-steps" || flag == "--decay-steps") {
      int64_t n;
      if (!parseInteger(value, n) || n < (flag == "--warmup-steps" ? 0 : 1))
        return Error(invalid(flag, value, expected));
      (flag == "--warmup-steps" ? options.lrSchedule.warmupSteps
                                : options.lrSchedule.decaySteps) = n;
      if (flag == "--decay-steps")
        decayFlag = "--decay-steps";
    } else if (flag == "--steps" || flag == "--log-every" ||
               flag == "--eval-every" || flag == "--eval-steps") {
      int64_t n;
      if (!parseInteger(value, n) || n < 1)
        return Error(invalid(flag, value, expected));
      (flag == "--steps"        ? options.steps
       : flag == "--log-every"  ? options.logEvery
       : flag == "--eval-every" ? options.evalEvery
                                : options.evalSteps) = n;
      if (flag == "--eval-steps")
        evalFlag = "--eval-steps";
    } else if (flag == "--checkpoint-every" || flag == "--exit-after-step" ||
               flag == "--exit-during-checkpoint") {
      int64_t n;
      if (!parseInteger(value, n) || n < 1)
        return Error(invalid(flag, value, expected));
      (flag == "--checkpoint-every"  ? options.checkpointEvery
       : flag == "--exit-after-step" ? options.exitAfterStep
                                     : options.exitDuringCheckpoint) = n;
      if (flag != "--exit-after-step")
        needsCheckpointDir = std::string(flag);
    } else if (flag == "--keep-checkpoints") {
      int n;
      if (!parseInteger(value, n) || n < 1)
        return Error(invalid(flag, value,
                             "an integer in 1.." + std::to_string(INT_MAX)));
      options.keepCheckpoints = n;
      needsCheckpointDir = "--keep-checkpoints";
    } else if (flag == "--stop-rank-at") {
      Expected<StopHook> stop = parseStopHook(value);
      if (!stop)
        return Error(stop.message());
      options.stopRankAt = *stop;
      // Its checkpoint points lie in a save or resume; an evaluation or
      // offload point is never reached by a binary without one.
      if (stop->inCheckpoint())
        needsCheckpointDir = std::string(flag) + " " + std::string(value);
    } else if (flag == "--checkpoint-dir") {
      if (value.empty())
        return Error("--checkpoint-dir needs a value: a directory name");
      options.checkpointDir = std::string(value);
    } else if (flag == "--offload-dir") {
      if (value.empty())
        return Error("--offload-dir needs a value: a directory name");
      options.offloadDir = std::string(value);
    } else if (flag == "--threads") {
      int n;
      if (!parseInteger(value, n) || n < 1)
        return Error(invalid(flag, value,
                             "an integer in 1.." + std::to_string(INT_MAX)));
      options.threads = n;
    } else if (flag == "--optimizer-threads") {
      int n;
      if (!parseInteger(value, n) || n < 0)
        return Error(invalid(flag, value,
                             "an integer in 0.." + std::to_string(INT_MAX) +
                                 " (0: the node's hardware threads divided "
                                 "among its ranks)"));
      options.optimizerThreads = n;
    } else if (flag == "--seed") {
      uint64_t seed;
      if (!parseInteger(value, seed))
        return Error(invalid(flag, value, expected));
      options.seed = seed;
    } else if (flag == "--lr" || flag == "--min-lr" ||
               flag == "--collective-timeout") {
      double number;
      const char *end = value.data() + value.size();
      auto [ptr, ec] = std::from_chars(value.data(), end, number);
      if (value.empty() || ec != std::errc() || ptr != end ||
          !std::isfinite(number) || number < 0)
        return Error(invalid(flag, value, expected));
      if (flag == "--lr") {
        options.lr = number;
      } else if (flag == "--min-lr") {
        options.lrSchedule.minLr = number;
        decayFlag = "--min-lr";
      } else {
        options.collectiveTimeout = number;
      }
    } else if (flag == "--trace") {
      if (value.empty())
        return Error("--trace needs a value: a file name");
      options.traceFile = std::string(value);
    } else if (flag == "--trace-steps") {
      std::optional<StepWindow> window = parseStepWindow(value);
      if (!window)
        return Error(invalid(flag, value, expected));
      options.traceSteps = *window;
    } else if (flag == "--log-format") {
      std::optional<LogFormat> format = parseLogFormat(value);
      if (!format)
        return Error(invalid(flag, value, expected));
      options.logFormat = *format;
    } else if (flag == "--data-format") {
      if (value == "auto")
        options.dataFormat = DataFormat::Auto;
      else if (value == "asdata")
        options.dataFormat = DataFormat::Asdata;
      else if (value == "tokens")
        options.dataFormat = DataFormat::Tokens;
      else
        return Error(invalid(flag, value, expected));
    } else {
      if (value.empty())
        return Error(std::string(flag) + " needs a value: a file name");
      std::string &target = flag == "--data"          ? options.dataFile
                            : flag == "--eval-data"   ? options.evalDataFile
                            : flag == "--save-best"   ? options.saveBestFile
                            : flag == "--load-params" ? options.loadParamsFile
                            : flag == "--save-params" ? options.saveParamsFile
                            : flag == "--save-grads"  ? options.saveGradsFile
                            : flag == "--device-spec" ? options.deviceSpecFile
                                                      : options.statsJsonFile;
      target = std::string(value);
      if (flag == "--eval-data" || flag == "--save-best")
        evalFlag = std::string(flag);
    }
  }
  if (options.traceSteps && options.traceFile.empty())
    return Error("--trace-steps applies to --trace FILE, which is not given");
  if (options.traceSteps && options.traceSteps->first > options.steps)
    return Error("--trace-steps " + std::to_string(options.traceSteps->first) +
                 ":" + std::to_string(options.traceSteps->last) +
                 " starts after the run's last step, " +
                 std::to_string(options.steps) +
                 " (--steps): the trace would be empty");
  if (!evalFlag.empty() && options.evalEvery == 0)
    return Error(evalFlag + " applies to --eval-every N, which is not given");
  // A token file's windows are random: evaluating on the training file
  // would report a training loss as a held-out one.
  if (options.evalEvery > 0 && !options.dataFile.empty() &&
      options.evalDataFile.empty())
    return Error("--eval-every evaluates held-out batches: give them with "
                 "--eval-data FILE (the training data of --data would give "
                 "a training loss)");
  const LrScheduleOptions &schedule = options.lrSchedule;
  if (!decayFlag.empty() && schedule.kind == LrSchedule::Constant)
    return Error(decayFlag + " shapes a decaying learning rate: it applies to "
                             "--lr-schedule cosine or linear");
  if (schedule.decaySteps > 0 && schedule.decaySteps <= schedule.warmupSteps)
    return Error("--decay-steps " + std::to_string(schedule.decaySteps) +
                 " must be after the warmup's " +
                 std::to_string(schedule.warmupSteps) +
                 " steps (--warmup-steps): the decay starts when the warmup "
                 "ends");
  if (!needsCheckpointDir.empty() && options.checkpointDir.empty())
    return Error(needsCheckpointDir +
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

std::string usageText(std::string_view program,
                      const LaunchSupport &support) {
  std::string p(program);
  return "usage: " + p + " [options]\n" + launchUsage(program, support) +
         "\n"
         "  --steps N            training steps to run (default 10)\n"
         "  --seed S             seed of the initialisation, the synthetic "
         "data "
         "and the\n"
         "                       token files' random windows (default 0)\n"
         "  --lr F               learning rate; overrides the step's hyper "
         "'lr'\n"
         "  --lr-schedule S      constant (default), cosine or linear: the "
         "learning rate\n"
         "                       decays from --lr (or the hyper's initial "
         "value) to\n"
         "                       --min-lr (default 0) by --decay-steps "
         "(default --steps)\n"
         "  --warmup-steps W     raise the learning rate linearly over the "
         "first W steps\n"
         "  --min-lr F           where cosine and linear decay end\n"
         "  --decay-steps N      the step by which they reach --min-lr\n"
         "  --log-every K        print a step line every K steps, and for "
         "the first and\n"
         "                       the last (default 1): loss, ms, lr, "
         "grad_norm, tokens/s\n"
         "                       (samples/s), MFU and memory\n"
         "  --log-format F       text (default) or json: one JSON object per "
         "logged step\n"
         "                       and evaluation, for a plot or a tracker\n"
         "  --device-spec FILE   a device file (data/devices/*.json) whose "
         "peak MFU is\n"
         "                       against (default on the CPU: a GEMM peak "
         "measured at start)\n"
         "  --data FILE          read batches from an asdata or token file "
         "(default:\n"
         "                       synthetic)\n"
         "  --data-format F      auto, asdata or tokens (default auto: asdata "
         "when the\n"
         "                       file starts with its magic, else uint16 "
         "tokens)\n"
         "  --eval-every N       evaluate every N steps and after the last "
         "(a binary\n"
         "                       compiled with shard-compile --with-eval): "
         "the mean loss\n"
         "                       of --eval-steps held-out batches\n"
         "  --eval-steps K       batches per evaluation (default 10): the "
         "first K of\n"
         "                       --eval-data, or with synthetic data the K "
         "after the\n"
         "                       last training step's\n"
         "  --eval-data FILE     the held-out batches (needed with --data)\n"
         "  --eval-at-start      also evaluate before the first step (the "
         "parameters as\n"
         "                       initialised, loaded or resumed; never "
         "--save-best's)\n"
         "  --save-best FILE     write the parameters as safetensors after "
         "each evaluation\n"
         "                       that lowers the best held-out loss "
         "(replaced atomically)\n"
         "  --load-params FILE   replace the initial params and opt_states by "
         "those in a\n"
         "                       safetensors file (every param must be "
         "there)\n"
         "  --save-params FILE   write the parameters after the last step as "
         "safetensors\n"
         "  --save-grads FILE    write the last step's gradients as "
         "safetensors (needs a\n"
         "                       step compiled with exposed gradients)\n"
         "  --stats-json FILE    write the runtime's statistics as JSON\n"
         "  --device-op-times    on a GPU, also time each op's kernels on the "
         "device (CUDA\n"
         "                       events; device_ms in --stats-json, a "
         "summary line);\n"
         "                       costs about 2 us of queuing per op\n"
         "  --checkpoint-dir DIR write sharded checkpoints into DIR (after "
         "the last step,\n"
         "                       and every K steps with --checkpoint-every)\n"
         "  --checkpoint-every K write a checkpoint after every K-th step\n"
         "  --keep-checkpoints N keep the newest N complete checkpoints "
         "(default 2)\n"
         "  --resume             continue from the newest complete checkpoint "
         "in\n"
         "                       --checkpoint-dir (any world size or "
         "strategy of the\n"
         "                       same model); --steps counts the steps before "
         "it too\n"
         "  --offload-dir DIR    keep the step's memory=nvme tensors in files "
         "under DIR\n"
         "                       (a directory on a fast local disk; each "
         "rank makes\n"
         "                       its own directory there and removes it at "
         "the end)\n"
         "  --threads N          kernel threads per rank, BLAS's and the "
         "generic CPU\n"
         "                       kernels' (default: OPENBLAS_NUM_THREADS,\n"
         "                       else OMP_NUM_THREADS, else the node's "
         "cores divided\n"
         "                       among its ranks)\n"
         "  --optimizer-threads N\n"
         "                       threads of the CPU optimizer step per rank "
         "(default 1;\n"
         "                       0: the node's hardware threads divided "
         "among its ranks)\n"
         "  --collective-timeout S\n"
         "                       fail the run when a collective does not "
         "complete within\n"
         "                       S seconds, as when a rank died or hangs "
         "(default 300;\n"
         "                       0 waits forever)\n"
         "  --trace FILE         write a Chrome/Perfetto trace of the steps "
         "(every rank's\n"
         "                       compute, collectives and waits) to FILE\n"
         "  --trace-steps A:B    trace steps A to B only (default: every "
         "step); events of\n"
         "                       the others are neither recorded nor kept\n"
         "  --print-manifest     print the compiled step's manifest and exit\n"
         "  --print-eval-manifest\n"
         "                       print the evaluation step's manifest and "
         "exit\n"
         "  --help               print this help and exit\n";
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
