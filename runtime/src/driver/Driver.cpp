// The training binary's checks and messages, and how it joins its job.
#include "driver/Driver.h"
#include "ckpt/CheckpointDir.h"
#include "comm/Comm.h"
#include "comm/Rendezvous.h"
#include "core/Context.h"
#include "core/Dtype.h"
#include "driver/Options.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace autoshard::rt {

std::string worldSizeMismatchMessage(const Manifest &manifest, int worldSize,
                                     std::string_view launcher) {
  std::string compiled = std::to_string(manifest.worldSize());
  std::string launch =
      launcher == "tcp"
          ? "with WORLD_SIZE=" + compiled + " (torchrun --nproc-per-node=" +
                compiled + " on one node)"
          : "with 'mpirun -np " + compiled + "'";
  return "this binary was compiled for world size " + compiled + " (grid " +
         manifest.gridString() + ") but was started with " +
         std::to_string(worldSize) + (worldSize == 1 ? " rank" : " ranks") +
         "; launch it " + launch + " or recompile with --world-size=" +
         std::to_string(worldSize);
}

std::string nonFiniteLossMessage(int64_t step, double loss,
                                 const Options &options,
                                 int64_t newestCheckpoint, bool evaluation,
                                 const char *what) {
  char value[32];
  // A NaN's sign means nothing; printf would write "-nan" for some.
  std::snprintf(value, sizeof value, "%g", std::isnan(loss) ? NAN : loss);
  const std::string is = std::string(": the ") + what + " is ";
  if (evaluation)
    return "step " + std::to_string(step) + is + value +
           "; this evaluation step trains nothing, so the parameters it " +
           "evaluates give it: check " +
           (options.loadParamsFile.empty()
                ? std::string("them (none were loaded: --load-params)")
                : "'" + options.loadParamsFile + "'");
  std::string message = "step " + std::to_string(step) + is + value +
                        "; training diverged, and the run stops before "
                        "it saves this state";
  std::string lower = "a lower --lr";
  if (options.lr) {
    char lr[32];
    std::snprintf(lr, sizeof lr, "%g", *options.lr);
    lower += std::string(" (this run's is ") + lr + ")";
  }
  if (options.checkpointDir.empty())
    return message + ". Rerun with " + lower +
           "; with --checkpoint-dir a run keeps checkpoints to resume from";
  message += " or removes an older checkpoint";
  if (newestCheckpoint < 0)
    return message + ". No checkpoint was written before this step; " +
           "rerun with " + lower;
  std::string newest = "'" + options.checkpointDir + "/" +
                       checkpointDirName(newestCheckpoint) + "'";
  if (newestCheckpoint == step - 1)
    // The loss of step N is computed from the state after step N - 1, so
    // that checkpoint gives the same loss again, whatever the --lr.
    return message + ". The newest checkpoint, " + newest +
           ", is kept, but it holds the state this " + what +
           " was computed from: resumed, it gives this " + what +
           " again at step " + std::to_string(step) +
           ". Move it away and resume from an older one with --resume and " +
           lower + ", or rerun from the start with a lower --lr";
  return message + ". The newest good checkpoint, " + newest + " (step " +
         std::to_string(newestCheckpoint) +
         "), is kept: resume from it with --resume and " + lower;
}

Expected<std::vector<int>> evaluationParamSources(const Manifest &train,
                                                  const Manifest &eval) {
  if (train.grid != eval.grid)
    return Error("the evaluation step was compiled for grid " +
                 eval.gridString() + ", the training step for " +
                 train.gridString() +
                 "; compile both with shard-compile "
                 "--with-eval");
  auto layout = [](const TensorSpec &spec) {
    std::string text =
        std::string(dtypeName(spec.dtype)) + " " + formatShape(spec.shape);
    if (spec.isSharded())
      text += " (a shard of " + formatShape(spec.fullShape) + ", axes mask " +
              std::to_string(spec.shardAxes) + ")";
    text += std::string(" in ") + memoryKindName(spec.memory) + " memory";
    return text;
  };
  std::vector<int> sources(eval.args.size(), -1);
  for (const TensorSpec &arg : eval.args) {
    if (arg.role != Role::Param)
      continue;
    const TensorSpec *shared = train.findArg(arg.name);
    if (!shared || shared->role != Role::Param)
      return Error("the evaluation step reads parameter '" + arg.name +
                   "', which the training step does not have");
    if (shared->dtype != arg.dtype || shared->shape != arg.shape ||
        shared->globalShape() != arg.globalShape() ||
        shared->shardAxes != arg.shardAxes || shared->memory != arg.memory)
      return Error("the evaluation step holds parameter '" + arg.name +
                   "' as " + layout(arg) + ", the training step as " +
                   layout(*shared) +
                   "; the two steps must share it (shard-compile "
                   "--with-eval checks this)");
    sources[arg.index] = shared->index;
  }
  return sources;
}

Status checkLrOverride(const Manifest &manifest, const char *flag) {
  const TensorSpec *lr = manifest.findArg("lr");
  if (lr && lr->role == Role::Hyper && isFloatDtype(lr->dtype) &&
      lr->numElements() == 1)
    return Status::success();
  if (lr && lr->role == Role::Hyper)
    return Error(std::string(flag) + ": the step's hyper 'lr' is " +
                 std::string(dtypeName(lr->dtype)) + " " +
                 formatShape(lr->shape) + ", not a single float that " + flag +
                 " could set");
  std::string hypers;
  for (const TensorSpec &arg : manifest.args)
    if (arg.role == Role::Hyper)
      hypers += (hypers.empty() ? "" : ", ") + arg.name;
  return Error(std::string(flag) + ": step '" + manifest.step +
               "' has no hyper-parameter named 'lr' (" +
               (hypers.empty() ? "it has no hypers" : "its hypers: " + hypers) +
               ")");
}

Expected<double> scheduledPeakLr(const Manifest &manifest,
                                 const Options &options) {
  double peak = 0;
  if (options.lr) {
    peak = *options.lr;
  } else {
    const TensorSpec *lr = manifest.findArg("lr");
    if (!lr || !lr->init ||
        (lr->init->kind != InitKind::Constant &&
         lr->init->kind != InitKind::Zeros))
      return Error("--lr-schedule: the step's hyper 'lr' has no constant "
                   "initial value to start from; give the peak learning "
                   "rate with --lr");
    peak = lr->init->kind == InitKind::Constant ? lr->init->value : 0.0;
  }
  if (options.lrSchedule.minLr > peak) {
    char text[96];
    std::snprintf(text, sizeof text,
                  "--min-lr %g is above the peak learning "
                  "rate %g",
                  options.lrSchedule.minLr, peak);
    return Error(std::string(text) +
                 (options.lr ? " (--lr)" : " (the step's initial 'lr')") +
                 "; a schedule decays from the peak down to --min-lr");
  }
  return peak;
}

namespace {

bool startedByMpirun() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name))
      return true;
  return false;
}

} // namespace

Expected<std::unique_ptr<ControlPlane>> launchControl(int *argc,
                                                      char ***argv) {
#if ASRT_HAVE_MPI
  if (startedByMpirun())
    return createMpiControl(argc, argv);
#else
  (void)argc;
  (void)argv;
  if (startedByMpirun())
    return Error("this training binary was started by mpirun, but its "
                 "runtime was built without MPI; launch it with torchrun "
                 "(or RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set), or "
                 "as one process for world size 1");
#endif
  Expected<std::optional<LaunchEnv>> env = launchEnvFromVariables(
      [](const char *name) -> const char * { return std::getenv(name); });
  if (!env)
    return Error(env.message());
  if (*env) {
    Expected<TcpGroup> group = TcpGroup::join(**env);
    if (!group)
      return Error("joining the job at " + (*env)->masterAddr + ":" +
                   std::to_string((*env)->rendezvousPort()) + " as rank " +
                   std::to_string((*env)->rank) + ": " + group.message());
    // Named in fatal errors, as under MPI.
    setFatalRank((*env)->rank);
    return createTcpControl(std::move(*group), **env);
  }
#if ASRT_HAVE_MPI
  return createMpiControl(argc, argv);
#else
  return makeSingleProcessControl();
#endif
}

} // namespace autoshard::rt
