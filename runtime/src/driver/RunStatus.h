// How a phase of the training run ends, and the exit status it maps to.
#pragma once

namespace autoshard::rt {

/// What a phase of the run (Trainer) tells the next: go on, or stop with
/// the exit status the status maps to.
enum class RunStatus {
  /// Go on to the next phase.
  Continue,
  /// The run is over and succeeded (--help, --print-manifest, a finished
  /// run): exit status 0.
  Done,
  /// A runtime problem, reported by every rank alike: exit status 1.
  Failed,
  /// A bad command line: exit status 2.
  BadUsage,
};

/// The process's exit status for the run ending in `status`.
constexpr int exitStatus(RunStatus status) {
  switch (status) {
  case RunStatus::Continue:
  case RunStatus::Done:
    return 0;
  case RunStatus::Failed:
    return 1;
  case RunStatus::BadUsage:
    return 2;
  }
  return 1;
}

} // namespace autoshard::rt
