// The training binary's run, in phases: join, configure, start the
// backend, allocate, load, restore, train (with evaluation), finalize.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Backend.h"
#include "core/Control.h"
#include "data/Data.h"
#include "io/Manifest.h"
#include "stats/Stats.h"
#include "driver/Driver.h"
#include "driver/Options.h"
#include "driver/Params.h"
#include "driver/RunStatus.h"
#include "driver/StepLog.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autoshard::rt {

class CheckpointPolicy;
class Evaluator;
class NvmeStore;
class StagedArgs;
class Trace;

/// One run of a training binary. Each phase returns how the run goes on;
/// runDriver calls them in order while they return RunStatus::Continue.
/// Every phase is collective: all ranks run the same phases and reach the
/// same status (an error one rank meets is agreed by all, allRanksOk).
///
/// The members are declared in the order the run creates them, so that
/// they are destroyed in reverse: what uses the context (staged host
/// views, checkpoints, the NVMe store) before the context, the context
/// before the control plane the job joined through.
class Trainer {
public:
  explicit Trainer(const DriverHooks &hooks);
  ~Trainer();
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  /// Joins the job (launchControl); a launch that cannot join is a bad
  /// command line.
  RunStatus join(int argc, char **argv);
  /// The command line and the manifests, and every check that needs no
  /// buffer: the world size, --lr and its schedule, --eval-every, files
  /// to load from and write to, the kernel threads. --help and
  /// --print-manifest end the run here.
  RunStatus configure();
  /// The context, the backend, the step's communicator (the group's
  /// collectives), the MFU peak and the NVMe store.
  RunStatus startBackend();
  /// Every argument, result and arena of the training step and of the
  /// evaluation step, initialised from init= and --lr.
  RunStatus allocate();
  /// --load-params, the batches, and the startup header.
  RunStatus loadInputs();
  /// --resume's checkpoint (or none), and the line naming what the step
  /// lines measure against.
  RunStatus restore();
  /// The steps, each logged and checked, with evaluations and checkpoints
  /// between them.
  RunStatus train();
  /// --trace, --save-params, --save-grads, --stats-json, the summary, and
  /// the buffers freed.
  RunStatus finalize();

private:
  /// The loop's state before its first step: tracing, the step lines'
  /// common fields, host views of the batch, the best evaluation to beat.
  RunStatus prepareSteps();
  /// Runs 0-based `step` and what follows it (its line, the divergence
  /// checks, an evaluation, a checkpoint).
  RunStatus trainStep(int64_t step);
  /// --trace-steps: whether the context traces from 1-based step
  /// `oneBased` on.
  void traceStepsFrom(int64_t oneBased);
  /// Writes the scheduled learning rate of 0-based `step` into the hyper
  /// `lr` (through a host copy on a GPU).
  void writeScheduledLr(int64_t step);

  const DriverHooks &hooks;
  std::unique_ptr<ControlPlane> control;
  std::string program;
  int argc = 0;
  char **argv = nullptr;
  Options options;
  Manifest manifest;
  /// --lr-schedule's peak rate.
  std::optional<double> peakLr;
  KernelThreads kernelThreads;
  BackendOptions backend;

  std::unique_ptr<asrt_context> ctx;
  ComputePeak peak;
  /// Offload (docs/RuntimeABI.md, "Offload"): this rank's directory of
  /// NVMe files; removed when it goes, on every way out of the run.
  std::unique_ptr<NvmeStore> nvme;
  std::vector<void *> args, results, ownedResults;
  /// --eval-every's step; null without it.
  std::unique_ptr<Evaluator> evaluator;
  LoadedParams loaded;
  std::unique_ptr<BatchSource> batches;
  std::unique_ptr<CheckpointPolicy> checkpoints;
  /// The 0-based step the loop starts from (after --resume's checkpoint).
  int64_t firstStep = 0;

  std::unique_ptr<Trace> trace;
  /// A step that updates nothing: an evaluation step (--forward-only).
  bool evaluationOnly = false;
  double totalMs = 0, totalLoss = 0;
  std::vector<double> stepMs;
  std::vector<StepSample> series;
  int64_t stepsRun = 0;
  /// What every step line shares: the global batch's tokens (or samples),
  /// the step's FLOPs and the peak they are a fraction of.
  StepLogEntry logEntry;
  /// Host copies of the data arguments on a GPU (the same buffers every
  /// step), copied up after each batch is written.
  std::unique_ptr<StagedArgs> batchArgs;
  /// The hyper the schedule writes (null without --lr-schedule) and the
  /// steps its decay spans.
  const TensorSpec *lrArg = nullptr;
  int64_t decaySteps = 0;
  std::optional<double> stepLr;
};

/// Runs the training binary: the Trainer's phases in order, until one
/// stops the run; returns the exit status its status maps to (0, 1 for a
/// runtime problem, which every rank returns, 2 for a bad command line).
int runDriver(int argc, char **argv, const DriverHooks &hooks);

} // namespace autoshard::rt
