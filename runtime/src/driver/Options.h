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

/// What the training binary was launched with: a field per flag of
/// Options.def, with its default.
struct Options {
#define DRIVER_FLAG(TYPE, FIELD, DEFAULT, NAME, VALUE_NAME, VALUE, NEEDS,      \
                    HELP)                                                      \
  TYPE FIELD = DEFAULT;
#define DRIVER_FIELD(TYPE, FIELD, DEFAULT) TYPE FIELD = DEFAULT;
#include "driver/Options.def"
};

/// The flag another flag only applies with (Options.def's NEEDS); given
/// without it, the parse fails naming both.
enum class Needs {
  Nothing,
  Trace,         // --trace FILE
  EvalEvery,     // --eval-every N
  DecayingLr,    // --lr-schedule cosine or linear
  CheckpointDir, // --checkpoint-dir DIR
};

/// One entry of Options.def, as parseOptions and usageText read it.
struct DriverFlag {
  std::string_view name;      // "--steps"
  std::string_view valueName; // "N"; empty for a switch
  /// False for a switch (`--resume`), which a value after '=' is an error
  /// for.
  bool takesValue;
  /// Lines separated by '\n'; empty: a test hook, not in --help.
  std::string_view help;
  Needs needs;
  /// What a valid value is, for "needs a value: ..." ("an integer >= 1").
  std::string (*expected)();
  /// Reads `value` (empty for a switch) into its field. On success, the
  /// words a later "applies to" error names this use by: the flag, or for
  /// --stop-rank-at the flag and its value, or nothing when this value
  /// applies without NEEDS.
  Expected<std::string> (*read)(Options &options, std::string_view flag,
                                std::string_view value);
};

/// Options.def's flags, in its order (the --help order).
const std::vector<DriverFlag> &driverFlags();

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
