// The training binary's flow: launch, manifest, buffers, steps, reports.
#include "driver/Driver.h"
#include "ckpt/AtomicFile.h"
#include "ckpt/CheckpointDir.h"
#include "ckpt/Checkpointer.h"
#include "comm/Comm.h"
#if ASRT_HAVE_GLOO
#include "comm/GlooComm.h"
#endif
#include "comm/Rendezvous.h"
#include "core/CommStream.h"
#include "core/Context.h"
#include "core/Data.h"
#include "core/Device.h"
#include "core/Dtype.h"
#include "core/InFlightBuckets.h"
#include "core/InFlightTransfers.h"
#include "core/Init.h"
#include "core/RegularFile.h"
#include "core/Stats.h"
#include "core/Trace.h"
#include "driver/LrSchedule.h"
#include "driver/OffloadArgs.h"
#include "driver/Options.h"
#include "driver/OutputFiles.h"
#include "driver/Params.h"
#include "driver/StepLog.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

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

/// Prints on rank 0 only under mpirun, which gathers every rank's output
/// into one stream; every rank reaches the same conclusion from the same
/// inputs (command line, manifest, world size). A torchrun-style launch
/// may keep each rank's output apart (torchrun --log-dir), so there every
/// rank says why it stops, the others naming their rank.
void printErrorOnRankZero(const ControlPlane &control,
                          const std::string &message) {
  bool tcp = std::string(control.kind()) == "tcp";
  if (control.rank() != 0 && !tcp)
    return;
  std::fflush(stdout);
  if (control.rank() == 0)
    std::fprintf(stderr, "error: %s\n", message.c_str());
  else
    std::fprintf(stderr, "error (rank %d): %s\n", control.rank(),
                 message.c_str());
  std::fflush(stderr);
}

/// Collective: true when `status` is ok on every rank. Otherwise rank 0
/// prints the error of the lowest failing rank, so a failure that every
/// rank shares (a missing file) is printed once, yet one that only some
/// rank hits (a file missing on one node) is neither lost nor left to hang
/// the others.
bool allRanksOk(const Status &status, ControlPlane &control) {
  Status agreed = agreeOnStatus(status, control);
  if (!agreed)
    printErrorOnRankZero(control, agreed.message());
  return agreed.ok();
}

bool startedByMpirun() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name))
      return true;
  return false;
}

/// Allocates every argument and fills params, optimizer states and hypers
/// from their init= specs. A replicated argument is a whole tensor; a
/// sharded one is this rank's flat shard, initialised with the values its
/// global elements have in the unsharded run (initialisation is a function
/// of the global index) and zero padding, which the optimizer and norms
/// read. Offload (memory=): a host argument gets host memory; an nvme
/// argument gets no buffer (null) but a file in `store`. On a device that
/// is not host memory (a GPU), a device argument is initialised in a host
/// buffer and copied up.
std::vector<void *> allocateArgs(asrt_context &ctx, const Manifest &manifest,
                                 const Options &options, int rank,
                                 NvmeStore *store,
                                 const std::vector<int> &sharedWith = {},
                                 const std::vector<void *> &sharedArgs = {}) {
  std::vector<void *> args;
  for (const TensorSpec &arg : manifest.args) {
    // An evaluation step's parameter: the training step's buffer.
    if (!sharedWith.empty() && sharedWith[arg.index] >= 0) {
      args.push_back(sharedArgs[sharedWith[arg.index]]);
      continue;
    }
    // An nvme argument (or a GPU's) is initialised in a temporary host
    // buffer and written to its file (or device): init stages each tensor
    // once, so the host never holds more than the largest one.
    std::vector<char> staging;
    void *buffer = nullptr, *deviceBuffer = nullptr;
    const bool initialised = arg.init || (options.lr && arg.role == Role::Hyper &&
                                          arg.name == "lr");
    switch (arg.memory) {
    case MemoryKind::Device:
      buffer = deviceBuffer = asrt_alloc(&ctx, arg.numBytes());
      if (!ctx.device->hostAccessible() && initialised) {
        staging.resize(static_cast<size_t>(arg.numBytes()));
        buffer = staging.data();
      }
      break;
    case MemoryKind::Host:
      buffer = hostAlloc(&ctx, arg.numBytes());
      break;
    case MemoryKind::Nvme:
      if (!store)
        fatal("%s has memory=nvme but the driver opened no NVMe store",
              arg.describe().c_str());
      staging.resize(static_cast<size_t>(arg.numBytes()));
      buffer = staging.data();
      break;
    }
    args.push_back(arg.memory == MemoryKind::Nvme      ? nullptr
                   : arg.memory == MemoryKind::Device ? deviceBuffer
                                                      : buffer);
    if (arg.init) {
      HeldBlock block = heldBlock(manifest, arg, rank);
      if (Status s = fillInit(buffer, arg.dtype, block.valid, *arg.init,
                              options.seed, arg.name, block.begin);
          !s)
        fatal("%s", s.message().c_str());
      int64_t elementBytes = dtypeSize(arg.dtype);
      std::memset(
          static_cast<char *>(buffer) + block.valid * elementBytes, 0,
          static_cast<size_t>((block.chunk - block.valid) * elementBytes));
    }
    if (options.lr && arg.role == Role::Hyper && arg.name == "lr")
      storeElement(buffer, arg.dtype, 0, *options.lr);
    if (buffer != deviceBuffer && arg.memory == MemoryKind::Device)
      ctx.device->toDevice(Lane::Compute, deviceBuffer, buffer,
                           arg.numBytes());
    if (arg.memory == MemoryKind::Nvme)
      if (Status s = store->add(arg.index, arg.name, buffer, arg.numBytes());
          !s)
        fatal("--offload-dir: initialising %s: %s", arg.describe().c_str(),
              s.message().c_str());
  }
  return args;
}

/// Frees what allocateArgs allocated, each from the memory it came from
/// (not the buffers it shared).
void freeArgs(asrt_context &ctx, const Manifest &manifest,
              const std::vector<void *> &args,
              const std::vector<int> &sharedWith = {}) {
  for (const TensorSpec &arg : manifest.args)
    if (!sharedWith.empty() && sharedWith[arg.index] >= 0)
      continue;
    else if (arg.memory == MemoryKind::Host)
      hostFree(&ctx, args[arg.index]);
    else
      asrt_free(&ctx, args[arg.index]); // null for nvme: nothing
}

/// Donation: a result that updates argument I is written into argument I's
/// buffer (host memory for a memory=host argument, null for a memory=nvme
/// one, whose file the step writes); other results (the loss) get buffers
/// of their own.
std::vector<void *> allocateResults(asrt_context &ctx, const Manifest &manifest,
                                    const std::vector<void *> &args,
                                    std::vector<void *> &owned) {
  std::vector<void *> results;
  for (const TensorSpec &result : manifest.results) {
    if (result.updates >= 0) {
      results.push_back(args[result.updates]);
    } else {
      results.push_back(asrt_alloc(&ctx, result.numBytes()));
      owned.push_back(results.back());
    }
  }
  return results;
}

/// The global tensors of the `specs` of `role`, in host memory, for a
/// file: a replicated one is its own buffer (a host copy on a GPU); a
/// sharded one is gathered from its shard group with
/// asrt_all_gather_shards. Collective: every rank calls it with the same
/// arguments. Only rank 0 writes files, so only rank 0 keeps host copies
/// (in `storage`); the others gather into a scratch buffer. `buffers` are
/// where the specs' memory= says (memory=nvme ones already staged into
/// host memory by the caller).
std::vector<void *> gatherGlobal(asrt_context &ctx,
                                 const std::vector<TensorSpec> &specs,
                                 const std::vector<void *> &buffers, Role role,
                                 int rank,
                                 std::vector<std::vector<char>> &storage) {
  std::vector<void *> global = buffers;
  Device &device = *ctx.device;
  const bool deviceIsHost = device.hostAccessible();
  for (const TensorSpec &spec : specs) {
    if (spec.role != role)
      continue;
    // What is in device memory that host code cannot read, and whether it
    // lives there already.
    const bool onDevice = spec.memory == MemoryKind::Device;
    if (!spec.isSharded() && (deviceIsHost || !onDevice))
      continue; // host memory already
    int64_t bytes = spec.globalElements() * dtypeSize(spec.dtype);
    std::vector<char> *host = nullptr;
    if (rank == 0) {
      host = &storage.emplace_back();
      host->resize(static_cast<size_t>(bytes));
      global[spec.index] = host->data();
    }
    if (!spec.isSharded()) {
      if (host)
        device.toHost(Lane::Compute, host->data(), buffers[spec.index], bytes);
      continue;
    }
    // The gather runs in device memory: on a GPU, from a device copy of a
    // shard that lives on the host (offload), into a device buffer.
    int64_t shardBytes = spec.numBytes();
    const void *shard = buffers[spec.index];
    void *shardCopy = nullptr;
    if (!deviceIsHost && !onDevice) {
      shardCopy = asrt_alloc(&ctx, shardBytes);
      device.toDevice(Lane::Compute, shardCopy, shard, shardBytes);
      shard = shardCopy;
    }
    void *full = host && deviceIsHost ? host->data() : asrt_alloc(&ctx, bytes);
    asrt_all_gather_shards(&ctx, spec.dtype, shard, full,
                           spec.globalElements(), spec.shardAxes);
    if (host && !deviceIsHost)
      device.toHost(Lane::Compute, host->data(), full, bytes);
    if (!(host && deviceIsHost))
      asrt_free(&ctx, full);
    asrt_free(&ctx, shardCopy);
  }
  return global;
}

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

/// Fatal when the step returned with asynchronous collectives or offload
/// transfers in flight: their buffers would change under the communication
/// or offload thread.
void checkStepWaited(const asrt_context &ctx, int64_t step) {
  if (ctx.inflight->inFlight() > 0) {
    Status s = ctx.inflight->checkAllWaited("step " + std::to_string(step) +
                                            " returned");
    fatal("%s", s.message().c_str());
  }

  // Asynchronous offload transfers (asrt_transfer_start). The offload
  // thread finishes them first, so that no read or write is still under
  // way in an NVMe file when fatal() removes the store.
  if (ctx.transfers->inFlight() > 0) {
    Status s = ctx.transfers->checkAllWaited("step " + std::to_string(step) +
                                             " returned");
    ctx.offloadStream->drain("the driver's check after the step",
                             StreamOpInfo());
    fatal("%s", s.message().c_str());
  }
}

void traceStep(Trace &trace, int64_t step,
               std::chrono::steady_clock::time_point start,
               std::chrono::steady_clock::time_point end, const char *name) {
  auto ns = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               t.time_since_epoch())
        .count();
  };
  TraceEvent e;
  e.name = name;
  e.category = "step";
  e.startNs = ns(start);
  e.endNs = ns(end);
  e.step = step;
  trace.record(e);
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

namespace {

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
    comm = createMpiComm(manifest.grid);
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

int runDriver(int argc, char **argv, const DriverHooks &hooks) {
  Expected<std::unique_ptr<ControlPlane>> launched =
      launchControl(&argc, &argv);
  if (!launched) {
    std::fprintf(stderr, "error: %s\n", launched.message().c_str());
    return 2;
  }
  // Declared first: the job's plane outlives everything that uses it.
  ControlPlane &control = **launched;
  std::string program = programName(argc, argv);

  std::vector<std::string> arguments(argv + (argc > 0 ? 1 : 0), argv + argc);
  Expected<Options> parsed = parseOptions(arguments);
  if (!parsed) {
    printErrorOnRankZero(control, parsed.message() + "\nrun '" + program +
                                  " --help' to see the options");
    return 2;
  }
  const Options &options = *parsed;
  if (options.help) {
    if (control.rank() == 0) {
      // The CUDA backend is the one with collectives of its own (NCCL);
      // the others' createBackendComm returns none.
      bool own = std::string(hooks.backendName()) == "cuda";
      std::fputs(
          usageText(program, {ASRT_HAVE_MPI != 0, ASRT_HAVE_GLOO != 0, own})
              .c_str(),
          stdout);
    }
    return 0;
  }

  Expected<Manifest> manifest = parseManifest(hooks.manifest);
  if (!manifest) {
    printErrorOnRankZero(control, "the manifest compiled into this binary is "
                              "invalid: " +
                                  manifest.message());
    return 1;
  }
  if (options.printManifest) {
    if (control.rank() == 0)
      std::fputs(hooks.manifest, stdout);
    return 0;
  }
  if (options.printEvalManifest) {
    if (!hooks.evalManifest) {
      printErrorOnRankZero(control, "--print-eval-manifest: this binary has "
                                    "no evaluation step (shard-compile "
                                    "--with-eval links one)");
      return 2;
    }
    if (control.rank() == 0)
      std::fputs(hooks.evalManifest, stdout);
    return 0;
  }
  if (manifest->worldSize() != control.size()) {
    printErrorOnRankZero(control, worldSizeMismatchMessage(
                                      *manifest, control.size(),
                                      control.kind()));
    return 1;
  }
  if (options.lr) {
    if (Status s = checkLrOverride(*manifest); !s) {
      printErrorOnRankZero(control, s.message());
      return 2;
    }
  }
  // In-run evaluation (--eval-every): the evaluation step linked beside
  // the training step (shard-compile --with-eval) reads its parameters.
  std::optional<Manifest> evalManifest;
  std::vector<int> evalSources;
  if (options.evalEvery > 0) {
    if (!hooks.evalManifest || !hooks.evalStep) {
      printErrorOnRankZero(
          control, "--eval-every: this binary has no evaluation step; "
                   "compile it with shard-compile --with-eval (or evaluate "
                   "the parameters --save-params writes with a binary "
                   "compiled --forward-only)");
      return 2;
    }
    Expected<Manifest> parsed = parseManifest(hooks.evalManifest);
    if (!parsed) {
      printErrorOnRankZero(control, "the evaluation step's manifest compiled "
                                    "into this binary is invalid: " +
                                        parsed.message());
      return 1;
    }
    Expected<std::vector<int>> sources =
        evaluationParamSources(*manifest, *parsed);
    if (!sources) {
      printErrorOnRankZero(control, sources.message());
      return 1;
    }
    evalManifest = std::move(*parsed);
    evalSources = std::move(*sources);
  }
  // The schedule writes the hyper 'lr' before every step, from its peak.
  std::optional<double> peakLr;
  if (options.lrSchedule.active()) {
    if (Status s = checkLrOverride(*manifest, "--lr-schedule"); !s) {
      printErrorOnRankZero(control, s.message());
      return 2;
    }
    Expected<double> peak = scheduledPeakLr(*manifest, options);
    if (!peak) {
      printErrorOnRankZero(control, peak.message());
      return 2;
    }
    peakLr = *peak;
  }
  // Arguments with init=load have no value of their own: without a file
  // to give it, the run would train from placeholders.
  if (Status s = checkInitFromFile(*manifest, !options.loadParamsFile.empty() ||
                                                  options.resume);
      !s) {
    printErrorOnRankZero(control, s.message());
    return 2;
  }
  // Before training, not after it: the step cannot grow gradients later.
  if (!options.saveGradsFile.empty()) {
    if (Status s = checkSaveGrads(*manifest); !s) {
      printErrorOnRankZero(control, s.message());
      return 2;
    }
  }
  // The files written at the end, by rank 0, before the run rather than
  // after it; and no output may overwrite an input, another output or a
  // checkpoint.
  Status writable;
  if (control.rank() == 0)
    writable = checkRunFiles(options);
  if (!allRanksOk(writable, control))
    return 1;
  // Offload: memory=nvme arguments need a directory for their files.
  if (Status s = checkOffloadDirGiven(*manifest, options.offloadDir); !s) {
    printErrorOnRankZero(control, s.message());
    return 2;
  }

  // OPENBLAS_NUM_THREADS / OMP_NUM_THREADS count as they do for numpy and
  // torch; agreed, since a launcher may give ranks different environments.
  Expected<KernelThreads> kernelThreads = chooseKernelThreads(
      options.threads,
      [](const char *name) -> const char * { return std::getenv(name); },
      std::thread::hardware_concurrency(), control.localSize());
  if (!allRanksOk(kernelThreads.status(), control))
    return 2;
  BackendOptions backend;
  backend.threads = kernelThreads->count;
  backend.localRank = control.localRank();

#if ASRT_HAVE_MPI
  // Collectives run on a communication thread while this one computes.
  if (std::string(control.kind()) == "mpi")
    if (std::string error = mpiThreadLevelError(); !error.empty()) {
      printErrorOnRankZero(control, error);
      return 1;
    }
#endif
  asrt_context ctx;
  ctx.stream->setTimeout(options.collectiveTimeout);
  ctx.offloadStream->setTimeout(options.collectiveTimeout);
  // The driver's and the checkpoints' exchanges between steps wait for a
  // hung peer no longer than a step's collectives do.
  control.setTimeout(options.collectiveTimeout);
  hooks.initBackend(&ctx, backend);
  // The context owns the communicator: its communication thread uses it
  // to the end, and its buffers may live in the context's device.
  std::string commError;
  ctx.ownedComm = createComm(ctx, control, *manifest, hooks, commError);
  if (!allRanksOk(commError.empty() ? Status::success() : Error(commError),
                  control))
    return 1;
  ctx.comm = ctx.ownedComm.get();
  // The peak the step lines' MFU is against: a device file's figure, or
  // the backend's GEMM measured here (the CPU's); none without either.
  Expected<ComputePeak> peak = computePeak(*manifest, options, backend, hooks, control);
  if (!allRanksOk(peak.status(), control))
    return 2;
  // --optimizer-threads: the CPU optimizer step's threads (0: the node's
  // hardware threads divided among its ranks).
  ctx.setOptimizerThreads(
      options.optimizerThreads > 0
          ? options.optimizerThreads
          : defaultThreads(std::thread::hardware_concurrency(),
                           control.localSize()));
  // --device-op-times: resolved after each step (the device marks nothing
  // on the CPU).
  ctx.deviceOpTimes = options.deviceOpTimes;
  // Rank r holds block r of every batch (makeSyntheticBatches,
  // openDataFile), which is what asrt_dropout's batchRank means.
  ctx.randomSeed = options.seed;
  ctx.batchRank = control.rank();

  // Offload (docs/RuntimeABI.md, "Offload"): this rank's directory of
  // NVMe files; removed when `nvme` goes, on every return below.
  Expected<std::unique_ptr<NvmeStore>> nvme =
      openNvmeStore(*manifest, options.offloadDir, control.rank());
  if (!allRanksOk(nvme.status(), control))
    return 1;
  ctx.nvme = nvme->get();

  // The step's intermediate tensors live at fixed offsets in one arena; a
  // binary's two steps never run at once, so they share the larger one.
  int64_t arena = manifest->plannedBytes("arena");
  int64_t hostArena = manifest->plannedBytes("host_arena");
  // Named by an out-of-memory error.
  ctx.plannedPeakBytes = manifest->plannedBytes("peak");
  if (evalManifest) {
    int64_t evalArena = evalManifest->plannedBytes("arena");
    if (ctx.plannedPeakBytes >= 0 && evalArena > arena)
      ctx.plannedPeakBytes += evalArena - std::max<int64_t>(arena, 0);
    arena = std::max(arena, evalArena);
    hostArena = std::max(hostArena, evalManifest->plannedBytes("host_arena"));
    // Its own device buffers: the batch, hypers and the loss.
    for (const TensorSpec &arg : evalManifest->args)
      if (evalSources[arg.index] < 0 && arg.memory == MemoryKind::Device &&
          ctx.plannedPeakBytes >= 0)
        ctx.plannedPeakBytes += arg.numBytes();
    for (const TensorSpec &result : evalManifest->results)
      if (result.updates < 0 && ctx.plannedPeakBytes >= 0)
        ctx.plannedPeakBytes += result.numBytes();
  }
  std::vector<void *> args =
      allocateArgs(ctx, *manifest, options, control.rank(), ctx.nvme);
  if (ctx.nvme)
    ctx.stats->setNvmeBytes(ctx.nvme->totalBytes());
  std::vector<void *> ownedResults;
  std::vector<void *> results =
      allocateResults(ctx, *manifest, args, ownedResults);
  std::vector<void *> evalArgs, evalResults, evalOwnedResults;
  if (evalManifest) {
    evalArgs = allocateArgs(ctx, *evalManifest, options, control.rank(),
                            nullptr, evalSources, args);
    evalResults =
        allocateResults(ctx, *evalManifest, evalArgs, evalOwnedResults);
  }
  if (arena > 0)
    ctx.arena = asrt_alloc(&ctx, arena);
  if (hostArena > 0)
    ctx.hostArena = hostAlloc(&ctx, hostArena);

  // Every rank reads the file and keeps what it holds: a replicated
  // argument whole, a sharded one its block.
  Expected<LoadedParams> loaded = LoadedParams();
  if (!options.loadParamsFile.empty()) {
    // memory=nvme arguments (and a GPU's) load through host copies, stored
    // back after.
    StagedArgs staged(ctx, *manifest, args);
    loaded =
        loadParams(options.loadParamsFile, *manifest, staged.args(), control.rank());
    if (loaded)
      staged.writeBack();
  }
  if (!allRanksOk(loaded.status(), control))
    return 1;

  Expected<std::unique_ptr<BatchSource>> batches =
      options.dataFile.empty()
          ? makeSyntheticBatches(*manifest, options.seed, control.rank(), control.size())
          : openDataFile(options.dataFile, *manifest, control.rank(), control.size(),
                         options.dataFormat, options.seed);
  if (!allRanksOk(batches.status(), control))
    return 1;
  // Held-out batches: the first --eval-steps of --eval-data, or the
  // synthetic batches after the run's last training step.
  Expected<std::unique_ptr<BatchSource>> evalBatches =
      std::unique_ptr<BatchSource>();
  int64_t firstEvalBatch = 0;
  if (evalManifest) {
    if (options.evalDataFile.empty()) {
      evalBatches = makeSyntheticBatches(*evalManifest, options.seed,
                                         control.rank(), control.size());
      firstEvalBatch = options.steps;
    } else {
      evalBatches =
          openDataFile(options.evalDataFile, *evalManifest, control.rank(),
                       control.size(), options.dataFormat, options.seed);
      // The same checks as --data's, named after the flag that gave it.
      if (!evalBatches)
        evalBatches = Error("--eval-data: " + evalBatches.message());
    }
  }
  if (!allRanksOk(evalBatches.status(), control))
    return 1;

  if (control.rank() == 0) {
    std::printf("autoshard: step %s, strategy %s, grid %s (%d %s), backend "
                "%s, %d %s per rank (%s), data %s\n",
                manifest->step.c_str(), manifest->strategy.c_str(),
                manifest->gridString().c_str(), control.size(),
                control.size() == 1 ? "rank" : "ranks", hooks.backendName(),
                backend.threads, backend.threads == 1 ? "thread" : "threads",
                kernelThreads->source.c_str(), (*batches)->describe().c_str());
    if (int host = manifest->countArgsIn(MemoryKind::Host); host > 0)
      std::printf("autoshard: offload: %d %s (%" PRId64
                  " bytes per rank) in host memory\n",
                  host, host == 1 ? "tensor" : "tensors",
                  manifest->argBytesIn(MemoryKind::Host));
    if (ctx.nvme)
      std::printf("autoshard: offload: %zu %s (%" PRId64
                  " bytes per rank) in NVMe files, rank 0's under '%s'\n",
                  ctx.nvme->indices().size(),
                  ctx.nvme->indices().size() == 1 ? "tensor" : "tensors",
                  ctx.nvme->totalBytes(), ctx.nvme->directory().c_str());
    else if (!options.offloadDir.empty())
      std::printf("autoshard: offload: --offload-dir '%s' is not used; this "
                  "step keeps no tensor in NVMe files\n",
                  options.offloadDir.c_str());
    if (evalManifest)
      std::printf(
          "autoshard: evaluation every %" PRId64 " steps%s: %" PRId64
          " held-out %s, %s%s\n",
          options.evalEvery,
          options.evalAtStart ? ", after the last and before the first"
                              : " and after the last",
          options.evalSteps, options.evalSteps == 1 ? "batch" : "batches",
          options.evalDataFile.empty() ? "synthetic, after step " : "",
          options.evalDataFile.empty() ? std::to_string(options.steps).c_str()
                                       : (*evalBatches)->describe().c_str());
    if (!options.loadParamsFile.empty())
      std::printf("autoshard: loaded %d %s and %d %s from '%s'\n",
                  loaded->params, loaded->params == 1 ? "param" : "params",
                  loaded->optStates,
                  loaded->optStates == 1 ? "opt_state" : "opt_states",
                  options.loadParamsFile.c_str());
    std::fflush(stdout);
  }

  // Sharded checkpoints (docs/Reliability.md): --resume replaces the
  // initial state by the newest complete checkpoint's, resharded to this
  // binary's plan, and the run continues after its step.
  Expected<std::string> dataSource = describeDataSource(options.dataFile);
  if (!allRanksOk(dataSource.status(), control))
    return 1;
  CheckpointOptions checkpointOptions;
  checkpointOptions.dir = options.checkpointDir;
  checkpointOptions.every = options.checkpointEvery;
  checkpointOptions.keep = options.keepCheckpoints;
  checkpointOptions.resume = options.resume;
  checkpointOptions.exitDuringSave = options.exitDuringCheckpoint;
  checkpointOptions.stopDuringSave = options.stopDuringCheckpoint;
  Checkpointer checkpointer(checkpointOptions, *manifest, hooks.manifest,
                            options.seed, *dataSource, control);
  Expected<int64_t> firstStep = int64_t(0);
  if (options.resume) {
    // --resume loads memory=nvme arguments (and a GPU's) through host
    // copies.
    StagedArgs resumed(ctx, *manifest, args);
    firstStep = checkpointer.start(resumed.args(), options.steps);
    if (firstStep)
      resumed.writeBack();
  } else {
    firstStep = checkpointer.start(args, options.steps);
  }
  if (!allRanksOk(firstStep.status(), control))
    return 1;

  // What the step lines' MFU and memory are measured against.
  if (control.rank() == 0) {
    std::string mfu;
    if (manifest->stepFlops <= 0)
      mfu = "no MFU (the manifest counts no FLOPs)";
    else if (peak->flopPerS <= 0)
      mfu = "no MFU (no peak: give the device's with --device-spec "
            "data/devices/<device>.json)";
    else {
      char text[64];
      std::snprintf(text, sizeof text, "MFU against %.4g GFLOP/s per rank",
                    peak->flopPerS * 1e-9);
      mfu = std::string(text) + " (" + peak->source + ")";
    }
    std::printf("autoshard: step lines: %s; mem and peak: rank 0's "
                "tensors and arena as the runtime allocates them (%s)\n",
                mfu.c_str(),
                ctx.device->hostAccessible()
                    ? "host memory on this backend, not the process's RSS"
                    : "device memory");
    std::fflush(stdout);
  }

  // --trace records the steps. The ranks take their time origin together,
  // after a barrier, so that their tracks line up. --trace-steps: only the
  // steps in its window are recorded (the context traces while one runs,
  // and the evaluations after it).
  std::unique_ptr<Trace> trace;
  if (!options.traceFile.empty()) {
    control.barrier();
    trace = std::make_unique<Trace>(steadyClockNs());
  }
  auto traceStepsFrom = [&](int64_t oneBased) {
    if (trace)
      ctx.setTrace(!options.traceSteps || options.traceSteps->contains(oneBased)
                       ? trace.get()
                       : nullptr);
  };

  const int lossIndex = manifest->lossResult();
  const int gradNormIndex = manifest->gradNormSqResult();
  double totalMs = 0, totalLoss = 0;
  // A step that updates nothing: an evaluation step (--forward-only).
  const bool evaluation = std::none_of(
      manifest->results.begin(), manifest->results.end(),
      [](const TensorSpec &result) { return result.updates >= 0; });
  std::vector<double> stepMs;
  std::vector<StepSample> series;
  int64_t stepsRun = 0;
  // What every step line shares: the global batch's tokens (or samples),
  // the step's FLOPs and the peak they are a fraction of.
  StepLogEntry logEntry;
  logEntry.tokens = tokensPerStep(*manifest);
  logEntry.samples = samplesPerStep(*manifest);
  logEntry.flops = manifest->stepFlops;
  logEntry.peakFlopPerS = peak->flopPerS;
  // Batches are written into host copies of the data arguments on a GPU
  // (the same buffers every step) and copied up.
  StagedArgs batchArgs(ctx, *manifest, args, {Role::Input, Role::Label},
                       Staging::WriteOnly);
  // The scheduled rate goes into the hyper's buffer (through a host copy
  // on a GPU) before each step; a resumed run continues the schedule.
  const TensorSpec *lrArg = peakLr ? manifest->findArg("lr") : nullptr;
  const int64_t decaySteps = options.lrSchedule.decaySteps > 0
                                 ? options.lrSchedule.decaySteps
                                 : options.steps;
  std::optional<double> stepLr;

  // One call of a compiled step, timed as the cost model predicts it (on a
  // GPU it has finished when its queued kernels have), checked to leave
  // nothing in flight, traced; its milliseconds and its loss, the global
  // batch's on every rank (the partitioner all-reduces it, so printing and
  // checking it need no communication, and a NaN or an infinity on any rank
  // is one on all of them).
  struct StepRun {
    double ms;
    float loss;
    /// The global gradient norm before clipping, of a step that clips.
    std::optional<double> gradNorm;
  };
  auto runStep = [&](void (*stepFn)(asrt_context *, void *const *,
                                    void *const *),
                     std::vector<void *> &stepArgs,
                     std::vector<void *> &stepResults, int stepLoss,
                     int stepGradNormSq, int64_t stepNumber,
                     const char *traceName, const Manifest &stepManifest) {
    // The step's asrt_op_site calls index its manifest's sites; the
    // driver's own calls between steps belong to none.
    ctx.sites = &stepManifest.sites;
    ctx.currentSite = -1;
    auto start = std::chrono::steady_clock::now();
    stepFn(&ctx, stepArgs.data(), stepResults.data());
    ctx.device->synchronize(Lane::Compute);
    auto end = std::chrono::steady_clock::now();
    ctx.sites = nullptr;
    ctx.currentSite = -1;
    ctx.resolveDeviceOpTimes();
    checkStepWaited(ctx, stepNumber);
    // Only while the context traces: --trace-steps' window.
    if (ctx.trace)
      traceStep(*ctx.trace, stepNumber, start, end, traceName);
    StepRun run{std::chrono::duration<double, std::milli>(end - start).count(),
                0.0f};
    ctx.device->toHost(Lane::Compute, &run.loss, stepResults[stepLoss],
                       sizeof run.loss);
    if (stepGradNormSq >= 0) {
      float sumOfSquares = 0;
      ctx.device->toHost(Lane::Compute, &sumOfSquares,
                         stepResults[stepGradNormSq], sizeof sumOfSquares);
      run.gradNorm = std::sqrt(static_cast<double>(sumOfSquares));
    }
    return run;
  };

  // --eval-every: the evaluation step over the held-out batches, its work
  // kept out of the training steps' counters.
  std::optional<StagedArgs> evalBatchArgs;
  if (evalManifest)
    evalBatchArgs.emplace(ctx, *evalManifest, evalArgs,
                          std::vector<Role>{Role::Input, Role::Label},
                          Staging::WriteOnly);
  // The parameters as global tensors in a safetensors file: gathered on
  // every rank (collective), written by rank 0.
  auto writeParams = [&](const std::string &path, const char *option,
                         int64_t steps,
                         const std::map<std::string, std::string> &extra = {}) {
    std::vector<std::vector<char>> storage;
    // memory=nvme params are read into host memory first; gatherGlobal
    // takes device and host ones where they are.
    StagedArgs params(ctx, *manifest, args, {Role::Param}, Staging::NvmeOnly);
    std::vector<void *> global =
        gatherGlobal(ctx, manifest->args, params.args(), Role::Param,
                     control.rank(), storage);
    Status saved;
    if (control.rank() == 0)
      saved = writeOutputFile(path, [&](const std::string &target) {
        return saveParams(target, *manifest, global, steps, options.seed,
                          option, extra);
      });
    return saved;
  };
  // The best held-out loss so far, which a new best must beat: on a resumed
  // run with --save-best, first the one the file holds from before (rank 0
  // reads it; every rank decides alike).
  std::optional<double> bestLoss;
  if (evalManifest && options.resume && !options.saveBestFile.empty()) {
    std::string shared;
    Status readBest;
    std::error_code ec;
    if (control.rank() == 0 &&
        std::filesystem::exists(options.saveBestFile, ec)) {
      Expected<BestEvaluation> best = readBestEvaluation(options.saveBestFile);
      if (best) {
        char text[32];
        std::snprintf(text, sizeof text, "%.17g", best->loss);
        shared = text;
        std::printf("autoshard: --save-best: the evaluation to beat is "
                    "'%s''s, loss %.8g after step %" PRId64 "\n",
                    options.saveBestFile.c_str(), best->loss, best->afterStep);
        std::fflush(stdout);
      } else {
        readBest = best.status();
      }
    }
    if (!allRanksOk(readBest, control))
      return 1;
    control.broadcast(shared, 0);
    if (!shared.empty())
      bestLoss = std::strtod(shared.c_str(), nullptr);
  }
  std::vector<EvaluationInfo> evaluations;
  // `atStart`: --eval-at-start's baseline, which --save-best skips.
  auto evaluate = [&](int64_t afterStep, bool atStart) -> bool {
    Stats::Snapshot kept = ctx.stats->snapshot();
    ctx.nvmeArgIndices = &evalSources;
    EvaluationInfo info;
    info.afterStep = afterStep;
    info.atStart = atStart;
    info.batches = options.evalSteps;
    double totalEvalLoss = 0;
    const int evalLoss = evalManifest->lossResult();
    for (int64_t i = 0; i < options.evalSteps; ++i) {
      (*evalBatches)->fill(firstEvalBatch + i, evalBatchArgs->args().data());
      evalBatchArgs->writeBack();
      StepRun run =
          runStep(hooks.evalStep, evalArgs, evalResults, evalLoss,
                  evalManifest->gradNormSqResult(), afterStep, "eval",
                  *evalManifest);
      info.ms += run.ms;
      totalEvalLoss += run.loss;
    }
    ctx.nvmeArgIndices = nullptr;
    Stats::Snapshot after = ctx.stats->snapshot();
    for (int k = 0; k < kNumCollectiveKinds; ++k)
      info.bytesSent +=
          after.collectives[k].bytesSent - kept.collectives[k].bytesSent;
    info.meanLoss = totalEvalLoss / static_cast<double>(options.evalSteps);
    // Every rank has the same (all-reduced) losses, so every rank takes
    // the same branches below.
    const bool best = !atStart && std::isfinite(info.meanLoss) &&
                      (!bestLoss || info.meanLoss < *bestLoss);
    // --save-best: as every output, through a temporary file renamed over
    // the old one (writeOutputFile), so that a run killed while writing
    // keeps the previous best. Its gather stays out of the training
    // counters too.
    Status savedBest;
    const bool saveBest = best && !options.saveBestFile.empty();
    if (saveBest) {
      char loss[32];
      std::snprintf(loss, sizeof loss, "%.17g", info.meanLoss);
      savedBest = writeParams(options.saveBestFile, "--save-best", afterStep,
                              {{"eval_loss", loss},
                               {"eval_after_step", std::to_string(afterStep)},
                               {"eval_batches", std::to_string(info.batches)}});
    }
    ctx.stats->restoreCounters(kept);
    if (control.rank() == 0) {
      const bool saved = saveBest && savedBest;
      if (options.logFormat == LogFormat::Json)
        std::printf("%s\n", formatEvalJson(afterStep, info.meanLoss,
                                           info.batches, info.ms, saved)
                                .c_str());
      else
        std::printf("eval after step %" PRId64 ": loss %.8g over %" PRId64
                    " %s, ms %.3f%s\n",
                    afterStep, info.meanLoss, info.batches,
                    info.batches == 1 ? "batch" : "batches", info.ms,
                    saved ? " (best: parameters saved)" : "");
      std::fflush(stdout);
    }
    if (!allRanksOk(savedBest, control))
      return false;
    if (!std::isfinite(info.meanLoss)) {
      printErrorOnRankZero(
          control, "evaluation after " +
                       nonFiniteLossMessage(afterStep, info.meanLoss, options,
                                            checkpointer.newestStep()));
      return false;
    }
    if (best)
      bestLoss = info.meanLoss;
    evaluations.push_back(info);
    return true;
  };

  // nanoGPT's evaluation at iter 0: the parameters this run starts from.
  traceStepsFrom(*firstStep + 1);
  if (evalManifest && options.evalAtStart &&
      !evaluate(*firstStep, /*atStart=*/true))
    return 1;
  for (int64_t step = *firstStep; step < options.steps; ++step) {
    traceStepsFrom(step + 1);
    (*batches)->fill(step, batchArgs.args().data());
    ctx.randomStep = step;
    batchArgs.writeBack();
    if (lrArg) {
      stepLr = scheduledLr(options.lrSchedule, *peakLr, step, decaySteps);
      void *buffer = args[lrArg->index];
      if (lrArg->memory == MemoryKind::Host || ctx.device->hostAccessible()) {
        storeElement(buffer, lrArg->dtype, 0, *stepLr);
      } else {
        alignas(8) char staged[8];
        storeElement(staged, lrArg->dtype, 0, *stepLr);
        ctx.device->toDevice(Lane::Compute, buffer, staged,
                             dtypeSize(lrArg->dtype));
      }
    }
    // Only the step itself is timed: batch synthesis is not part of
    // training.
    int64_t oneBased = step + 1;
    StepRun run = runStep(hooks.step, args, results, lossIndex, gradNormIndex,
                          oneBased, "step", *manifest);
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
    if (control.rank() == 0 &&
        isLoggedStep(oneBased, *firstStep + 1, options.logEvery,
                     options.steps)) {
      StepLogEntry entry = logEntry;
      entry.step = oneBased;
      entry.loss = loss;
      entry.ms = ms;
      entry.lr = stepLr;
      entry.gradNorm = run.gradNorm;
      Stats::Snapshot memory = ctx.stats->snapshot();
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
      printErrorOnRankZero(
          control, nonFiniteLossMessage(oneBased, loss, options,
                                        checkpointer.newestStep(), evaluation));
      return 1;
    }
    // So is a step whose gradients overflowed: clipping by an infinite norm
    // zeroes them, a NaN one poisons the update.
    if (run.gradNorm && !std::isfinite(*run.gradNorm)) {
      printErrorOnRankZero(
          control, nonFiniteLossMessage(oneBased, *run.gradNorm, options,
                                        checkpointer.newestStep(), false,
                                        "gradient norm"));
      return 1;
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
      control.barrier();
      std::_Exit(3);
    }
    if (evalManifest &&
        (oneBased % options.evalEvery == 0 || oneBased == options.steps) &&
        !evaluate(oneBased, /*atStart=*/false))
      return 1;
    if (checkpointer.due(oneBased, options.steps)) {
      // memory=nvme arguments (and a GPU's) are saved from host copies.
      StagedArgs saving(ctx, *manifest, args);
      if (!allRanksOk(checkpointer.save(oneBased, saving.args()), control))
        return 1;
    }
  }

  if (trace) {
    ctx.setTrace(nullptr);
    if (!allRanksOk(writeTrace(options.traceFile, *trace, control), control))
      return 1;
  }

  Stats::Snapshot stats = ctx.stats->snapshot();
  RunInfo run;
  run.step = manifest->step;
  run.strategy = manifest->strategy;
  run.grid = manifest->gridString();
  run.backend = hooks.backendName();
  run.worldSize = control.size();
  run.rank = control.rank();
  run.steps = stepsRun;
  run.meanStepMs = stepsRun > 0 ? totalMs / static_cast<double>(stepsRun) : 0;
  run.steadyStepMs = steadyStepMs(stepMs);
  run.stepFlops = manifest->stepFlops;
  run.evaluation = evaluation;
  run.meanLoss = stepsRun > 0 ? totalLoss / static_cast<double>(stepsRun) : 0;
  run.evaluations = evaluations;
  run.stepTokens = logEntry.tokens;
  run.stepSamples = logEntry.samples;
  run.peakFlopPerS = peak->flopPerS;
  run.peakSource = peak->source;
  run.series = std::move(series);

  // Files hold full tensors, comparable with an unsharded run's: sharded
  // params and gradients are gathered (on every rank, after the statistics
  // were taken) and rank 0 writes them.
  Status saved;
  if (!options.saveParamsFile.empty())
    saved = writeParams(options.saveParamsFile, "--save-params", options.steps);
  if (!allRanksOk(saved, control))
    return 1;
  Status savedGrads;
  if (!options.saveGradsFile.empty()) {
    std::vector<std::vector<char>> storage;
    std::vector<void *> global = gatherGlobal(ctx, manifest->results, results,
                                              Role::Grad, control.rank(), storage);
    if (control.rank() == 0)
      savedGrads = writeOutputFile(
          options.saveGradsFile, [&](const std::string &target) {
            return saveGrads(target, *manifest, global, options.steps,
                             options.seed);
          });
  }
  if (!allRanksOk(savedGrads, control))
    return 1;
  Status wroteStats;
  if (!options.statsJsonFile.empty() && control.rank() == 0)
    wroteStats = writeStatsFile(options.statsJsonFile, stats, run);
  if (!allRanksOk(wroteStats, control))
    return 1;

  if (control.rank() == 0) {
    std::ostringstream summary;
    writeSummary(summary, stats, run);
    std::fputs(summary.str().c_str(), stdout);
    std::fflush(stdout);
  }

  for (void *buffer : ownedResults)
    asrt_free(&ctx, buffer);
  if (evalManifest) {
    evalBatchArgs.reset();
    for (void *buffer : evalOwnedResults)
      asrt_free(&ctx, buffer);
    freeArgs(ctx, *evalManifest, evalArgs, evalSources);
  }
  asrt_free(&ctx, ctx.arena);
  hostFree(&ctx, ctx.hostArena);
  freeArgs(ctx, *manifest, args);
  return 0;
}

} // namespace autoshard::rt
