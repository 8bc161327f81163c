// The training binary's run, in phases: join, configure, start the
// backend, allocate, load, restore, train (with evaluation), finalize.
#include "driver/Trainer.h"
#include "ckpt/AtomicFile.h"
#include "ckpt/CheckpointManifest.h"
#include "comm/Comm.h"
#if ASRT_HAVE_GLOO
#include "comm/GlooComm.h"
#endif
#include "comm/Rendezvous.h"
#include "core/CommStream.h"
#include "core/Context.h"
#include "core/NameList.h"
#include "memory/Device.h"
#include "core/Dtype.h"
#include "memory/NvmeStore.h"
#include "io/RegularFile.h"
#include "stats/Trace.h"
#include "driver/ArgBuffers.h"
#include "driver/CheckpointPolicy.h"
#include "driver/Evaluator.h"
#include "driver/LrSchedule.h"
#include "driver/OffloadArgs.h"
#include "driver/OutputFiles.h"
#include "driver/RankErrors.h"
#include "driver/StepCall.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

namespace autoshard::rt {

namespace {

/// Writes `path` through `write`; an error names `option`, the path and,
/// where the system gave one, the reason (a full disk: "No space left on
/// device"; a FIFO without a reader, which would block the run's end
/// forever).
template <typename Write>
Status writeTextFile(const char *option, const std::string &path,
                     Write write) {
  std::ostringstream text;
  write(text);
  const std::string &bytes = text.str();
  return writeOutputFile(path, [&](const std::string &target) -> Status {
    Expected<std::FILE *> out = openForWriting(target);
    if (!out)
      return Error(std::string(option) + ": " + out.message());
    errno = 0;
    bool ok =
        std::fwrite(bytes.data(), 1, bytes.size(), *out) == bytes.size();
    int err = errno;
    if (std::fclose(*out) != 0) {
      ok = false;
      err = err ? err : errno;
    }
    if (!ok)
      return Error(std::string(option) + ": cannot write '" + target + "'" +
                   (err ? std::string(": ") + std::strerror(err) : ""));
    return Status::success();
  });
}

Status writeStatsFile(const std::string &path, const Stats::Snapshot &stats,
                      const RunInfo &run) {
  return writeTextFile("--stats-json", path, [&](std::ostream &out) {
    writeStatsJson(out, stats, run);
  });
}

/// --trace: rank 0 gathers every rank's events and writes one file, each
/// rank a process (pid = rank). Collective; rank 0 alone decides on the
/// file.
Status writeTrace(const std::string &path, const Trace &trace,
                  ControlPlane &control) {
  std::vector<std::string> ranks =
      control.gather(trace.jsonEvents(control.rank()));
  if (control.rank() != 0)
    return Status::success();
  return writeTextFile("--trace", path, [&](std::ostream &out) {
    writeTraceFile(out, ranks);
  });
}

/// A language model's tokens per step: the elements of its integer input
/// (token ids) over the global batch; 0 for a step without one.
int64_t tokensPerStep(const Manifest &manifest) {
  for (const TensorSpec &arg : manifest.args)
    if (arg.role == Role::Input && isIntegerDtype(arg.dtype) &&
        arg.batchDim >= 0 && arg.localRows() > 0)
      return arg.numElements() / arg.localRows() * arg.globalRows;
  return 0;
}

/// The global batch's rows (samples); 0 for a step without a batch.
int64_t samplesPerStep(const Manifest &manifest) {
  for (const TensorSpec &arg : manifest.args)
    if ((arg.role == Role::Input || arg.role == Role::Label) &&
        arg.batchDim >= 0)
      return arg.globalRows;
  return 0;
}

/// Whether the step computes in 16-bit floats (a bf16 or f16 tensor among
/// its arguments or results): its MFU is then against the device's 16-bit
/// peak.
bool computesInLowPrecision(const Manifest &manifest) {
  auto low = [](const TensorSpec &spec) {
    return spec.dtype == ASRT_DTYPE_BF16 || spec.dtype == ASRT_DTYPE_F16;
  };
  return std::any_of(manifest.args.begin(), manifest.args.end(), low) ||
         std::any_of(manifest.results.begin(), manifest.results.end(), low);
}

/// --device-spec's peak, or else the backend's measured one (0 when it
/// measures none).
Expected<ComputePeak> computePeak(const Manifest &manifest,
                                  const Options &options,
                                  const BackendOptions &backend,
                                  const DriverHooks &hooks,
                                  ControlPlane &control) {
  if (!options.deviceSpecFile.empty()) {
    Expected<RegularFile> file =
        RegularFile::open(options.deviceSpecFile, "--device-spec");
    if (!file)
      return Error(file.message());
    Expected<std::string> text = file->readAll(options.deviceSpecFile);
    if (!text)
      return Error("--device-spec: " + text.message());
    return peakFromDeviceFile(*text, options.deviceSpecFile,
                              computesInLowPrecision(manifest));
  }
  ComputePeak measured;
  if (hooks.measurePeakFlopPerS)
    measured.flopPerS = hooks.measurePeakFlopPerS(backend, measured.source);
  // The best rank's: ranks measure at once, as they compute, and a rank
  // the OS delayed would take its own delay for the machine's peak.
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", measured.flopPerS);
  for (const std::string &rank : control.allGather(text))
    measured.flopPerS = std::max(measured.flopPerS,
                                 std::strtod(rank.c_str(), nullptr));
  if (control.size() > 1 && measured.flopPerS > 0)
    measured.source += ", the best of the " +
                       std::to_string(control.size()) + " ranks";
  return measured;
}

std::string programName(int argc, char **argv) {
  if (argc < 1 || !argv[0])
    return "train";
  std::string path = argv[0];
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The step's communicator: the backend's own (NCCL) when it has one,
/// else MPI's under mpirun, else Gloo's over TCP in a torchrun-style launch
/// (for device memory, both through host copies), else none for a world of
/// one. Null with `error` set when a world of several has no way to
/// communicate.
std::unique_ptr<Comm> createComm(asrt_context &ctx, ControlPlane &control,
                                 const Manifest &manifest,
                                 const DriverHooks &hooks,
                                 std::string &error) {
  if (hooks.createComm)
    if (std::unique_ptr<Comm> own =
            hooks.createComm(&ctx, control, manifest.grid))
      return own;
  std::unique_ptr<Comm> comm;
#if ASRT_HAVE_MPI
  if (std::string(control.kind()) == "mpi")
    comm = createMpiComm(manifest.grid, control.timeout());
#endif
#if ASRT_HAVE_GLOO
  if (std::string(control.kind()) == "tcp" && control.size() > 1) {
    // The control plane joined from these variables; they were valid.
    Expected<std::optional<LaunchEnv>> env = launchEnvFromVariables(
        [](const char *name) -> const char * { return std::getenv(name); });
    Expected<std::unique_ptr<Comm>> gloo = createGlooComm(
        control, manifest.grid, env && *env ? (*env)->masterAddr : "");
    if (!gloo) {
      error = gloo.message();
      return nullptr;
    }
    comm = std::move(*gloo);
  }
#endif
  if (comm) {
    // A GPU's memory goes through host copies: OpenMPI as Debian builds it
    // is not CUDA-aware, and Gloo's TCP transport reads host memory only.
    if (!ctx.device->hostAccessible())
      comm = stageThroughHost(std::move(comm), *ctx.device);
    return comm;
  }
  if (control.size() > 1)
    error = std::string("the ") + hooks.backendName() +
            " backend has no communicator of its own for " +
            std::to_string(control.size()) + " ranks and this job has no "
            "MPI (launched by " + control.kind() + ")" +
            (ASRT_HAVE_GLOO ? std::string(": launch it with mpirun")
                            : std::string(
                                  ", and its runtime was built without Gloo, "
                                  "the collectives of torchrun-style "
                                  "launches: launch it with mpirun, or "
                                  "install libgloo-dev and rebuild the "
                                  "runtime and this binary"));
  return nullptr;
}

} // namespace

Trainer::Trainer(const DriverHooks &hooks) : hooks(hooks) {}

Trainer::~Trainer() = default;

RunStatus Trainer::join(int argcIn, char **argvIn) {
  Expected<std::unique_ptr<ControlPlane>> launched =
      launchControl(&argcIn, &argvIn);
  if (!launched) {
    std::fprintf(stderr, "error: %s\n", launched.message().c_str());
    return RunStatus::BadUsage;
  }
  // The job's plane outlives everything that uses it (the first member).
  control = std::move(*launched);
  // MPI may have taken its own arguments out.
  argc = argcIn;
  argv = argvIn;
  return RunStatus::Continue;
}

RunStatus Trainer::configure() {
  program = programName(argc, argv);
  std::vector<std::string> arguments(argv + (argc > 0 ? 1 : 0), argv + argc);
  Expected<Options> parsed = parseOptions(arguments);
  if (!parsed) {
    printErrorOnRankZero(*control, parsed.message() + "\nrun '" + program +
                                       " --help' to see the options");
    return RunStatus::BadUsage;
  }
  options = std::move(*parsed);
  if (options.help) {
    if (control->rank() == 0) {
      // The CUDA backend is the one with collectives of its own (NCCL);
      // the others' createBackendComm returns none.
      bool own = std::string(hooks.backendName()) == "cuda";
      std::fputs(
          usageText(program, {ASRT_HAVE_MPI != 0, ASRT_HAVE_GLOO != 0, own})
              .c_str(),
          stdout);
    }
    return RunStatus::Done;
  }

  Expected<Manifest> parsedManifest = parseManifest(hooks.manifest);
  if (!parsedManifest) {
    printErrorOnRankZero(*control, "the manifest compiled into this binary is "
                                   "invalid: " +
                                       parsedManifest.message());
    return RunStatus::Failed;
  }
  manifest = std::move(*parsedManifest);
  if (options.printManifest) {
    if (control->rank() == 0)
      std::fputs(hooks.manifest, stdout);
    return RunStatus::Done;
  }
  if (options.printEvalManifest) {
    if (!hooks.evalManifest) {
      printErrorOnRankZero(*control, "--print-eval-manifest: this binary has "
                                     "no evaluation step (shard-compile "
                                     "--with-eval links one)");
      return RunStatus::BadUsage;
    }
    if (control->rank() == 0)
      std::fputs(hooks.evalManifest, stdout);
    return RunStatus::Done;
  }
  if (manifest.worldSize() != control->size()) {
    printErrorOnRankZero(*control,
                         worldSizeMismatchMessage(manifest, control->size(),
                                                  control->kind()));
    return RunStatus::Failed;
  }
  if (options.lr) {
    if (Status s = checkLrOverride(manifest); !s) {
      printErrorOnRankZero(*control, s.message());
      return RunStatus::BadUsage;
    }
  }
  // In-run evaluation (--eval-every): the evaluation step linked beside
  // the training step (shard-compile --with-eval) reads its parameters.
  if (options.evalEvery > 0) {
    if (!hooks.evalManifest || !hooks.evalStep) {
      printErrorOnRankZero(
          *control, "--eval-every: this binary has no evaluation step; "
                    "compile it with shard-compile --with-eval (or evaluate "
                    "the parameters --save-params writes with a binary "
                    "compiled --forward-only)");
      return RunStatus::BadUsage;
    }
    auto paired = std::make_unique<Evaluator>(options, hooks.evalStep, *control);
    if (Status s = paired->configure(hooks.evalManifest, manifest); !s) {
      printErrorOnRankZero(*control, s.message());
      return RunStatus::Failed;
    }
    evaluator = std::move(paired);
  }
  // The schedule writes the hyper 'lr' before every step, from its peak.
  if (options.lrSchedule.active()) {
    if (Status s = checkLrOverride(manifest, "--lr-schedule"); !s) {
      printErrorOnRankZero(*control, s.message());
      return RunStatus::BadUsage;
    }
    Expected<double> peakRate = scheduledPeakLr(manifest, options);
    if (!peakRate) {
      printErrorOnRankZero(*control, peakRate.message());
      return RunStatus::BadUsage;
    }
    peakLr = *peakRate;
  }
  // Arguments with init=load have no value of their own: without a file
  // to give it, the run would train from placeholders.
  if (Status s = checkInitFromFile(manifest, !options.loadParamsFile.empty() ||
                                                 options.resume);
      !s) {
    printErrorOnRankZero(*control, s.message());
    return RunStatus::BadUsage;
  }
  // Before training, not after it: the step cannot grow gradients later.
  if (!options.saveGradsFile.empty()) {
    if (Status s = checkSaveGrads(manifest); !s) {
      printErrorOnRankZero(*control, s.message());
      return RunStatus::BadUsage;
    }
  }
  // The files written at the end, by rank 0, before the run rather than
  // after it; and no output may overwrite an input, another output or a
  // checkpoint.
  Status writable;
  if (control->rank() == 0)
    writable = checkRunFiles(options);
  if (!allRanksOk(writable, *control))
    return RunStatus::Failed;
  // Offload: memory=nvme arguments need a directory for their files.
  if (Status s = checkOffloadDirGiven(manifest, options.offloadDir); !s) {
    printErrorOnRankZero(*control, s.message());
    return RunStatus::BadUsage;
  }

  // OPENBLAS_NUM_THREADS / OMP_NUM_THREADS count as they do for numpy and
  // torch; agreed, since a launcher may give ranks different environments.
  Expected<KernelThreads> threads = chooseKernelThreads(
      options.threads,
      [](const char *name) -> const char * { return std::getenv(name); },
      std::thread::hardware_concurrency(), control->localSize());
  if (!allRanksOk(threads.status(), *control))
    return RunStatus::BadUsage;
  kernelThreads = std::move(*threads);
  backend.threads = kernelThreads.count;
  backend.localRank = control->localRank();
  return RunStatus::Continue;
}

RunStatus Trainer::startBackend() {
#if ASRT_HAVE_MPI
  // Collectives run on a communication thread while this one computes.
  if (std::string(control->kind()) == "mpi")
    if (std::string error = mpiThreadLevelError(); !error.empty()) {
      printErrorOnRankZero(*control, error);
      return RunStatus::Failed;
    }
#endif
  ctx = std::make_unique<asrt_context>();
  ctx->stream->setTimeout(options.collectiveTimeout);
  ctx->offloadStream->setTimeout(options.collectiveTimeout);
  if (options.stopRankAt.point == StopPoint::Offload &&
      options.stopRankAt.rank == control->rank())
    ctx->setOffloadStop(&options.stopRankAt);
  // The driver's and the checkpoints' exchanges between steps wait for a
  // hung peer no longer than a step's collectives do.
  control->setTimeout(options.collectiveTimeout);
  hooks.initBackend(ctx.get(), backend);
  // The context owns the communicator: its communication thread uses it
  // to the end, and its buffers may live in the context's device.
  std::string commError;
  ctx->ownedComm = createComm(*ctx, *control, manifest, hooks, commError);
  if (!allRanksOk(commError.empty() ? Status::success() : Error(commError),
                  *control))
    return RunStatus::Failed;
  ctx->comm = ctx->ownedComm.get();
  // A collective's timeout names the ranks it may be waiting for, and
  // which of them it waits for where the communicator can tell.
  if (ctx->comm) {
    ctx->stream->setGroupNamer([comm = ctx->comm](int32_t mask) {
      std::vector<std::string> others;
      for (int member : comm->groupRanks(mask))
        if (member != comm->rank())
          others.push_back(std::to_string(member));
      return (others.size() == 1 ? "rank " : "ranks ") + listNames(others, 8);
    });
    ctx->stream->setWaitReporter(
        [comm = ctx->comm] { return comm->describeWait(); });
  }
  // The peak the step lines' MFU is against: a device file's figure, or
  // the backend's GEMM measured here (the CPU's); none without either.
  Expected<ComputePeak> measured =
      computePeak(manifest, options, backend, hooks, *control);
  if (!allRanksOk(measured.status(), *control))
    return RunStatus::BadUsage;
  peak = std::move(*measured);
  // The CPU's generic tensor kernels split over as many threads as BLAS
  // gets (--threads and its environment), on the same pool as the
  // optimizer's: one count for the rank's compute.
  ctx->setKernelThreads(kernelThreads.count);
  // --optimizer-threads: the CPU optimizer step's threads (0: the node's
  // hardware threads divided among its ranks).
  ctx->setOptimizerThreads(
      options.optimizerThreads > 0
          ? options.optimizerThreads
          : defaultThreads(std::thread::hardware_concurrency(),
                           control->localSize()));
  // --device-op-times: resolved after each step (the device marks nothing
  // on the CPU).
  ctx->setDeviceOpTimes(options.deviceOpTimes);
  // Rank r holds block r of every batch (makeSyntheticBatches,
  // openDataFile), which is what asrt_dropout's batchRank means.
  ctx->setRandomSeed(options.seed);
  ctx->setBatchRank(control->rank());

  // Offload (docs/RuntimeABI.md, "Offload"): this rank's directory of
  // NVMe files.
  Expected<std::unique_ptr<NvmeStore>> store =
      openNvmeStore(manifest, options.offloadDir, control->rank());
  if (!allRanksOk(store.status(), *control))
    return RunStatus::Failed;
  nvme = std::move(*store);
  ctx->setNvme(nvme.get());
  return RunStatus::Continue;
}

RunStatus Trainer::allocate() {
  // The step's intermediate tensors live at fixed offsets in one arena; a
  // binary's two steps never run at once, so they share the larger one.
  int64_t arena = manifest.plannedBytes("arena");
  int64_t hostArena = manifest.plannedBytes("host_arena");
  // Named by an out-of-memory error.
  int64_t plannedPeak = manifest.plannedBytes("peak");
  if (evaluator)
    evaluator->planMemory(arena, hostArena, plannedPeak);
  ctx->setPlannedPeakBytes(plannedPeak);
  args = allocateArgs(*ctx, manifest, options, control->rank(), ctx->nvme());
  if (ctx->nvme())
    ctx->stats->setNvmeBytes(ctx->nvme()->totalBytes());
  results = allocateResults(*ctx, manifest, args, ownedResults);
  if (evaluator)
    evaluator->allocate(*ctx, control->rank(), manifest, args);
  if (arena > 0)
    ctx->setArena(asrt_alloc(ctx.get(), arena));
  if (hostArena > 0)
    ctx->setHostArena(hostAlloc(ctx.get(), hostArena));
  return RunStatus::Continue;
}

RunStatus Trainer::loadInputs() {
  // Every rank reads the file and keeps what it holds: a replicated
  // argument whole, a sharded one its block.
  Expected<LoadedParams> read = LoadedParams();
  if (!options.loadParamsFile.empty()) {
    // memory=nvme arguments (and a GPU's) load through host copies, stored
    // back after.
    StagedArgs staged(*ctx, manifest, args);
    read = loadParams(options.loadParamsFile, manifest, staged.args(),
                      control->rank());
    if (read)
      staged.writeBack();
  }
  if (!allRanksOk(read.status(), *control))
    return RunStatus::Failed;
  loaded = *read;

  Expected<std::unique_ptr<BatchSource>> opened =
      options.dataFile.empty()
          ? makeSyntheticBatches(manifest, options.seed, control->rank(),
                                 control->size())
          : openDataFile(options.dataFile, manifest, control->rank(),
                         control->size(), options.dataFormat, options.seed);
  if (!allRanksOk(opened.status(), *control))
    return RunStatus::Failed;
  batches = std::move(*opened);
  // Held-out batches: the first --eval-steps of --eval-data, or the
  // synthetic batches after the run's last training step.
  Status heldOut;
  if (evaluator)
    heldOut = evaluator->openBatches(control->rank(), control->size());
  if (!allRanksOk(heldOut, *control))
    return RunStatus::Failed;

  if (control->rank() == 0) {
    std::printf("autoshard: step %s, strategy %s, grid %s (%d %s), backend "
                "%s, %d %s per rank (%s), data %s\n",
                manifest.step.c_str(), manifest.strategy.c_str(),
                manifest.gridString().c_str(), control->size(),
                control->size() == 1 ? "rank" : "ranks", hooks.backendName(),
                backend.threads, backend.threads == 1 ? "thread" : "threads",
                kernelThreads.source.c_str(), batches->describe().c_str());
    if (int host = manifest.countArgsIn(MemoryKind::Host); host > 0)
      std::printf("autoshard: offload: %d %s (%" PRId64
                  " bytes per rank) in host memory\n",
                  host, host == 1 ? "tensor" : "tensors",
                  manifest.argBytesIn(MemoryKind::Host));
    if (ctx->nvme())
      std::printf("autoshard: offload: %zu %s (%" PRId64
                  " bytes per rank) in NVMe files, rank 0's under '%s'\n",
                  ctx->nvme()->indices().size(),
                  ctx->nvme()->indices().size() == 1 ? "tensor" : "tensors",
                  ctx->nvme()->totalBytes(), ctx->nvme()->directory().c_str());
    else if (!options.offloadDir.empty())
      std::printf("autoshard: offload: --offload-dir '%s' is not used; this "
                  "step keeps no tensor in NVMe files\n",
                  options.offloadDir.c_str());
    if (evaluator)
      evaluator->printHeader();
    if (!options.loadParamsFile.empty())
      std::printf("autoshard: loaded %d %s and %d %s from '%s'\n",
                  loaded.params, loaded.params == 1 ? "param" : "params",
                  loaded.optStates,
                  loaded.optStates == 1 ? "opt_state" : "opt_states",
                  options.loadParamsFile.c_str());
    std::fflush(stdout);
  }
  return RunStatus::Continue;
}

RunStatus Trainer::restore() {
  // Sharded checkpoints (docs/Reliability.md): --resume replaces the
  // initial state by the newest complete checkpoint's, resharded to this
  // binary's plan, and the run continues after its step.
  Expected<std::string> dataSource = describeDataSource(options.dataFile);
  if (!allRanksOk(dataSource.status(), *control))
    return RunStatus::Failed;
  checkpoints = std::make_unique<CheckpointPolicy>(
      options, manifest, hooks.manifest, *dataSource, *control);
  Expected<int64_t> start = checkpoints->restore(*ctx, args);
  if (!allRanksOk(start.status(), *control))
    return RunStatus::Failed;
  firstStep = *start;

  // What the step lines' MFU and memory are measured against.
  if (control->rank() == 0) {
    std::string mfu;
    if (manifest.stepFlops <= 0)
      mfu = "no MFU (the manifest counts no FLOPs)";
    else if (peak.flopPerS <= 0)
      mfu = "no MFU (no peak: give the device's with --device-spec "
            "data/devices/<device>.json)";
    else {
      char text[64];
      std::snprintf(text, sizeof text, "MFU against %.4g GFLOP/s per rank",
                    peak.flopPerS * 1e-9);
      mfu = std::string(text) + " (" + peak.source + ")";
    }
    std::printf("autoshard: step lines: %s; mem and peak: rank 0's "
                "tensors and arena as the runtime allocates them (%s)\n",
                mfu.c_str(),
                ctx->device->hostAccessible()
                    ? "host memory on this backend, not the process's RSS"
                    : "device memory");
    std::fflush(stdout);
  }
  return RunStatus::Continue;
}

RunStatus Trainer::prepareSteps() {
  // --trace records the steps. The ranks take their time origin together,
  // after a barrier, so that their tracks line up.
  if (!options.traceFile.empty()) {
    control->barrier();
    trace = std::make_unique<Trace>(steadyClockNs());
  }
  evaluationOnly = std::none_of(
      manifest.results.begin(), manifest.results.end(),
      [](const TensorSpec &result) { return result.updates >= 0; });
  logEntry.tokens = tokensPerStep(manifest);
  logEntry.samples = samplesPerStep(manifest);
  logEntry.flops = manifest.stepFlops;
  logEntry.peakFlopPerS = peak.flopPerS;
  batchArgs = std::make_unique<StagedArgs>(
      *ctx, manifest, args, std::vector<Role>{Role::Input, Role::Label},
      Staging::WriteOnly);
  // The scheduled rate goes into the hyper's buffer before each step; a
  // resumed run continues the schedule.
  lrArg = peakLr ? manifest.findArg("lr") : nullptr;
  decaySteps = options.lrSchedule.decaySteps > 0
                   ? options.lrSchedule.decaySteps
                   : options.steps;
  if (evaluator)
    evaluator->stageBatches();
  // The best held-out loss so far, which a new best must beat: on a
  // resumed run with --save-best, first the one the file holds from
  // before.
  if (evaluator && options.resume && !options.saveBestFile.empty() &&
      !checkpoints->restoreBest())
    return RunStatus::Failed;
  return RunStatus::Continue;
}

void Trainer::traceStepsFrom(int64_t oneBased) {
  // --trace-steps: only the steps in its window are recorded (the context
  // traces while one runs, and the evaluations after it).
  if (trace)
    ctx->setTrace(!options.traceSteps || options.traceSteps->contains(oneBased)
                      ? trace.get()
                      : nullptr);
}

void Trainer::writeScheduledLr(int64_t step) {
  stepLr = scheduledLr(options.lrSchedule, *peakLr, step, decaySteps);
  void *buffer = args[lrArg->index];
  if (lrArg->memory == MemoryKind::Host || ctx->device->hostAccessible()) {
    storeElement(buffer, lrArg->dtype, 0, *stepLr);
  } else {
    alignas(8) char staged[8];
    storeElement(staged, lrArg->dtype, 0, *stepLr);
    ctx->device->toDevice(Lane::Compute, buffer, staged,
                          dtypeSize(lrArg->dtype));
  }
}

RunStatus Trainer::train() {
  if (RunStatus s = prepareSteps(); s != RunStatus::Continue)
    return s;
  // nanoGPT's evaluation at iter 0: the parameters this run starts from.
  traceStepsFrom(firstStep + 1);
  if (evaluator && options.evalAtStart &&
      !evaluator->evaluate(firstStep, /*atStart=*/true, *checkpoints))
    return RunStatus::Failed;
  for (int64_t step = firstStep; step < options.steps; ++step)
    if (RunStatus s = trainStep(step); s != RunStatus::Continue)
      return s;
  return RunStatus::Continue;
}

RunStatus Trainer::trainStep(int64_t step) {
  traceStepsFrom(step + 1);
  batches->fill(step, batchArgs->args().data());
  ctx->setRandomStep(step);
  batchArgs->writeBack();
  if (lrArg)
    writeScheduledLr(step);
  // Only the step itself is timed: batch synthesis is not part of
  // training.
  int64_t oneBased = step + 1;
  // Test hook: this rank hangs before the step, its peers in the step's
  // collectives.
  if (options.stopRankAt.due(StopPoint::Step, oneBased, control->rank()))
    stopThisRank();
  StepRun run = runCompiledStep(*ctx, hooks.step, args, results,
                                manifest.lossResult(),
                                manifest.gradNormSqResult(), oneBased, "step",
                                manifest, "step " + std::to_string(oneBased));
  const double ms = run.ms;
  const float loss = run.loss;
  totalMs += ms;
  stepMs.push_back(ms);
  StepSample sample;
  sample.step = oneBased;
  sample.loss = loss;
  sample.ms = ms;
  sample.lr = stepLr.value_or(NAN);
  sample.gradNorm = run.gradNorm.value_or(NAN);
  series.push_back(sample);
  if (control->rank() == 0 &&
      isLoggedStep(oneBased, firstStep + 1, options.logEvery, options.steps)) {
    StepLogEntry entry = logEntry;
    entry.step = oneBased;
    entry.loss = loss;
    entry.ms = ms;
    entry.lr = stepLr;
    entry.gradNorm = run.gradNorm;
    Stats::Snapshot memory = ctx->stats->snapshot();
    entry.memoryBytes = memory.currentBytes;
    entry.peakMemoryBytes = memory.peakBytes;
    std::printf("%s\n", (options.logFormat == LogFormat::Json
                             ? formatStepJson(entry)
                             : formatStepLine(entry))
                            .c_str());
    std::fflush(stdout);
  }
  // A diverged run stops before its state replaces a good checkpoint:
  // every rank sees the same loss, so all of them stop here together.
  if (!std::isfinite(loss)) {
    printErrorOnRankZero(*control, nonFiniteLossMessage(
                                       oneBased, loss, options,
                                       checkpoints->newestStep(),
                                       evaluationOnly));
    return RunStatus::Failed;
  }
  // So is a step whose gradients overflowed: clipping by an infinite norm
  // zeroes them, a NaN one poisons the update.
  if (run.gradNorm && !std::isfinite(*run.gradNorm)) {
    printErrorOnRankZero(*control, nonFiniteLossMessage(
                                       oneBased, *run.gradNorm, options,
                                       checkpoints->newestStep(), false,
                                       "gradient norm"));
    return RunStatus::Failed;
  }
  ++stepsRun;
  totalLoss += loss;
  // Test hook: a job that dies between checkpoints. Every rank exits at
  // once without finalizing, as when the launcher kills the job; the
  // barrier first lets the launcher forward the step lines already
  // printed (MPI_Abort could end the job before they reach its output).
  if (oneBased == options.exitAfterStep) {
    std::fflush(stdout);
    std::fflush(stderr);
    control->barrier();
    std::_Exit(3);
  }
  if (evaluator &&
      (oneBased % options.evalEvery == 0 || oneBased == options.steps) &&
      !evaluator->evaluate(oneBased, /*atStart=*/false, *checkpoints))
    return RunStatus::Failed;
  if (checkpoints->due(oneBased) &&
      !allRanksOk(checkpoints->save(*ctx, oneBased, args), *control))
    return RunStatus::Failed;
  return RunStatus::Continue;
}

RunStatus Trainer::finalize() {
  if (trace) {
    ctx->setTrace(nullptr);
    if (!allRanksOk(writeTrace(options.traceFile, *trace, *control),
                    *control))
      return RunStatus::Failed;
  }

  Stats::Snapshot stats = ctx->stats->snapshot();
  RunInfo run;
  run.step = manifest.step;
  run.strategy = manifest.strategy;
  run.grid = manifest.gridString();
  run.backend = hooks.backendName();
  run.worldSize = control->size();
  run.rank = control->rank();
  run.steps = stepsRun;
  run.meanStepMs = stepsRun > 0 ? totalMs / static_cast<double>(stepsRun) : 0;
  run.steadyStepMs = steadyStepMs(stepMs);
  run.stepFlops = manifest.stepFlops;
  run.evaluation = evaluationOnly;
  run.meanLoss = stepsRun > 0 ? totalLoss / static_cast<double>(stepsRun) : 0;
  if (evaluator)
    run.evaluations = evaluator->evaluations();
  run.stepTokens = logEntry.tokens;
  run.stepSamples = logEntry.samples;
  run.peakFlopPerS = peak.flopPerS;
  run.peakSource = peak.source;
  run.series = std::move(series);

  // Files hold full tensors, comparable with an unsharded run's: sharded
  // params and gradients are gathered (on every rank, after the statistics
  // were taken) and rank 0 writes them.
  Status saved;
  if (!options.saveParamsFile.empty())
    saved = saveGlobalParams(*ctx, manifest, args, *control,
                             options.saveParamsFile, "--save-params",
                             options.steps, options.seed);
  if (!allRanksOk(saved, *control))
    return RunStatus::Failed;
  Status savedGrads;
  if (!options.saveGradsFile.empty()) {
    std::vector<std::vector<char>> storage;
    std::vector<void *> global = gatherGlobal(
        *ctx, manifest.results, results, Role::Grad, control->rank(), storage);
    if (control->rank() == 0)
      savedGrads = writeOutputFile(
          options.saveGradsFile, [&](const std::string &target) {
            return saveGrads(target, manifest, global, options.steps,
                             options.seed);
          });
  }
  if (!allRanksOk(savedGrads, *control))
    return RunStatus::Failed;
  Status wroteStats;
  if (!options.statsJsonFile.empty() && control->rank() == 0)
    wroteStats = writeStatsFile(options.statsJsonFile, stats, run);
  if (!allRanksOk(wroteStats, *control))
    return RunStatus::Failed;

  if (control->rank() == 0) {
    std::ostringstream summary;
    writeSummary(summary, stats, run);
    std::fputs(summary.str().c_str(), stdout);
    std::fflush(stdout);
  }

  for (void *buffer : ownedResults)
    asrt_free(ctx.get(), buffer);
  if (evaluator)
    evaluator->release();
  asrt_free(ctx.get(), ctx->arena());
  hostFree(ctx.get(), ctx->hostArena());
  freeArgs(*ctx, manifest, args);
  return RunStatus::Done;
}

int runDriver(int argc, char **argv, const DriverHooks &hooks) {
  Trainer trainer(hooks);
  RunStatus status = trainer.join(argc, argv);
  for (RunStatus (Trainer::*phase)() :
       {&Trainer::configure, &Trainer::startBackend, &Trainer::allocate,
        &Trainer::loadInputs, &Trainer::restore, &Trainer::train,
        &Trainer::finalize})
    if (status == RunStatus::Continue)
      status = (trainer.*phase)();
  return exitStatus(status);
}

} // namespace autoshard::rt
