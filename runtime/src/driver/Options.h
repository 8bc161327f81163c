// The training binary's command line, parsed by a pure function.
#pragma once

#include "ckpt/Checkpointer.h"
#include "core/StopHook.h"
#include "data/Data.h"
#include "core/Expected.h"
#include "driver/LrSchedule.h"
#include "driver/StepLog.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autoshard::rt {

/// A range of 1-based steps, both ends included (--trace-steps A:B).
struct StepWindow {
  int64_t first = 1;
  int64_t last = 1;
  bool contains(int64_t step) const { return first <= step && step <= last; }
};

/// "A:B" with 1 <= A <= B; nullopt for anything else.
std::optional<StepWindow> parseStepWindow(std::string_view text);

struct Options {
  int64_t steps = 10;
  uint64_t seed = 0;
  /// Overrides the hyper named `lr` when set.
  std::optional<double> lr;
  /// How the hyper `lr` changes from step to step (--lr-schedule,
  /// --warmup-steps, --min-lr, --decay-steps); its peak is --lr, or the
  /// hyper's constant initial value.
  LrScheduleOptions lrSchedule;
  int64_t logEvery = 1;
  /// How step lines are printed: text, or one JSON object each.
  LogFormat logFormat = LogFormat::Text;
  /// A device file whose peak MFU is reported against; empty: the
  /// backend's measured peak (the CPU's), or no MFU.
  std::string deviceSpecFile;
  /// Empty: synthetic batches.
  std::string dataFile;
  /// How to read dataFile; anything but Auto needs a dataFile.
  DataFormat dataFormat = DataFormat::Auto;
  /// In-run evaluation (a binary compiled with shard-compile --with-eval):
  /// every evalEvery training steps (0: never) and after the last, the
  /// mean loss of the evaluation step over evalSteps held-out batches: the
  /// first evalSteps batches of evalDataFile, or, with synthetic data,
  /// the synthetic batches after the run's last step.
  int64_t evalEvery = 0;
  int64_t evalSteps = 10;
  std::string evalDataFile;
  /// The parameters after each evaluation that lowers the best held-out
  /// loss so far (nanoGPT's checkpoint on improvement), replaced
  /// atomically; empty: none.
  std::string saveBestFile;
  /// Params (and optionally opt_states) that replace the initial values.
  std::string loadParamsFile;
  std::string saveParamsFile;
  /// The step's exposed gradients after the last step.
  std::string saveGradsFile;
  std::string statsJsonFile;
  /// Time each compute op's work on the device too (a GPU's kernels run
  /// after the call that queued them returns); no effect on the CPU, whose
  /// op times are the work itself.
  /// --eval-at-start: an evaluation before the first step too (nanoGPT's
  /// at iter 0), which --save-best does not count.
  bool evalAtStart = false;
  bool deviceOpTimes = false;
  /// Kernel threads per rank; 0 means "choose" (defaultThreads).
  int threads = 0;
  /// Threads of the CPU optimizer step per rank; 0 means "choose"
  /// (defaultThreads). 1 by default: the step stays on the calling thread,
  /// as ranks usually share the node's cores with BLAS threads.
  int optimizerThreads = 1;
  /// Seconds a wait for a collective (asrt_wait, a blocking collective)
  /// may block before the run fails as hung; 0 waits forever.
  double collectiveTimeout = 300.0;
  /// Where to write a Chrome/Perfetto trace of the steps; empty: no trace.
  std::string traceFile;
  /// The steps --trace records; nullopt: every step.
  std::optional<StepWindow> traceSteps;
  /// Sharded checkpoints (docs/Reliability.md): the directory (empty: none),
  /// a checkpoint every K steps (0: after the last step only), how many
  /// complete ones to keep, and whether to continue from the newest.
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  int keepCheckpoints = 2;
  bool resume = false;
  /// Offload (docs/RuntimeABI.md, "Offload"): the directory, on a fast
  /// local disk, under which each rank keeps the files of memory=nvme
  /// arguments (in a directory of its own, removed when the run ends).
  /// Empty: none; a step with memory=nvme arguments then cannot run.
  std::string offloadDir;
  /// Hidden test hooks (not in --help): end the job abruptly (MPI_Abort,
  /// status 3) right after step K, before its checkpoint; or while saving
  /// step K's checkpoint, after the shard files and before the MANIFEST.
  /// 0: never.
  int64_t exitAfterStep = 0;
  int64_t exitDuringCheckpoint = 0;
  /// --stop-rank-at STEP:RANK:POINT: that rank stops itself (SIGSTOP) at
  /// that point of step STEP: a checkpoint's save or resume, an
  /// evaluation, an offload wait (core/StopHook.h).
  StopHook stopRankAt;
  bool printManifest = false;
  /// The evaluation step's (shard-compile --with-eval).
  bool printEvalManifest = false;
  bool help = false;
};

/// Parses the arguments after the program name. Flags take their value as
/// the next argument or after '=' (`--steps 5`, `--steps=5`); a later
/// occurrence of a flag overrides an earlier one. Errors name the flag, the
/// bad value and what is valid.
Expected<Options> parseOptions(const std::vector<std::string> &args);

/// What a training binary can be launched with, which depends on how its
/// runtime was built and on its backend.
struct LaunchSupport {
  bool mpi = true;  // the runtime has MPI: mpirun launches
  bool gloo = true; // the runtime has Gloo: host ranks without MPI
  /// The backend has collectives of its own (NCCL), which it uses under
  /// either launcher.
  bool ownCollectives = false;
};

/// The --help text's paragraph on launching (docs/RuntimeABI.md,
/// "Launching").
std::string launchUsage(std::string_view program, const LaunchSupport &support);

/// The --help text.
std::string usageText(std::string_view program,
                      const LaunchSupport &support = {});

/// max(1, hardwareThreads / ranksOnNode): ranks sharing a node split its
/// cores instead of each starting one thread per core.
int defaultThreads(unsigned hardwareThreads, int ranksOnNode);

/// The kernel (BLAS) threads per rank and where the number came from, for
/// the startup header.
struct KernelThreads {
  int count = 1;
  /// "--threads", "OPENBLAS_NUM_THREADS=N", "OMP_NUM_THREADS=N" or
  /// "default: H hardware threads / R ranks on the node".
  std::string source;
};

/// The kernel threads a torch or numpy user expects: --threads when given
/// (`flagThreads` > 0), else OPENBLAS_NUM_THREADS (which OpenBLAS itself
/// reads before OMP_NUM_THREADS), else OMP_NUM_THREADS (its first entry:
/// OpenMP allows a list, one per nesting level), else defaultThreads. An
/// unset or empty variable is not given; any other value that is not a
/// positive integer is an error naming the variable: ignored, it would
/// leave the user believing it applied.
/// `getenv` is a parameter so that tests need not touch the environment.
Expected<KernelThreads>
chooseKernelThreads(int flagThreads, const char *(*getenv)(const char *),
                    unsigned hardwareThreads, int ranksOnNode);

} // namespace autoshard::rt
