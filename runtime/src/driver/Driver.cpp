// The training binary's flow: MPI, manifest, buffers, steps, reports.
#include "driver/Driver.h"
#include "ckpt/Checkpointer.h"
#include "comm/Comm.h"
#include "comm/MpiCheck.h"
#include "core/CommStream.h"
#include "core/Context.h"
#include "core/Data.h"
#include "core/Dtype.h"
#include "core/InFlightBuckets.h"
#include "core/InFlightTransfers.h"
#include "core/Init.h"
#include "core/Stats.h"
#include "core/Trace.h"
#include "driver/OffloadArgs.h"
#include "driver/Options.h"
#include "driver/Params.h"

#include <mpi.h>

#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace autoshard::rt {

std::string formatStepLine(int64_t step, double loss, double ms) {
  char line[128];
  std::snprintf(line, sizeof line, "step %" PRId64 " loss %.8g ms %.3f", step,
                loss, ms);
  return line;
}

std::string worldSizeMismatchMessage(const Manifest &manifest, int worldSize) {
  std::string compiled = std::to_string(manifest.worldSize());
  return "this binary was compiled for world size " + compiled + " (grid " +
         manifest.gridString() + ") but was started with " +
         std::to_string(worldSize) + (worldSize == 1 ? " rank" : " ranks") +
         "; launch it with 'mpirun -np " + compiled +
         "' or recompile with --world-size=" + std::to_string(worldSize);
}

Status checkLrOverride(const Manifest &manifest) {
  const TensorSpec *lr = manifest.findArg("lr");
  if (lr && lr->role == Role::Hyper && isFloatDtype(lr->dtype) &&
      lr->numElements() == 1)
    return Status::success();
  if (lr && lr->role == Role::Hyper)
    return Error("--lr: the step's hyper 'lr' is " +
                 std::string(dtypeName(lr->dtype)) + " " +
                 formatShape(lr->shape) +
                 ", not a single float that --lr could set");
  std::string hypers;
  for (const TensorSpec &arg : manifest.args)
    if (arg.role == Role::Hyper)
      hypers += (hypers.empty() ? "" : ", ") + arg.name;
  return Error(
      "--lr: step '" + manifest.step + "' has no hyper-parameter named 'lr' (" +
      (hypers.empty() ? "it has no hypers" : "its hypers: " + hypers) + ")");
}

namespace {

/// MPI for the lifetime of the driver; declared first so that everything
/// using MPI (the Comm) is destroyed before MPI_Finalize.
class MpiSession {
public:
  MpiSession(int *argc, char ***argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // MULTIPLE: a communication thread will drive collectives while the
      // kernels run (TOOLCHAIN.md: OpenMPI has no progress thread).
      MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &threadLevel);
      owned = true;
    }
    installMpiFatalHandler();
    CHECK_MPI(MPI_Query_thread(&threadLevel));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  }
  ~MpiSession() {
    if (owned)
      MPI_Finalize();
  }
  MpiSession(const MpiSession &) = delete;
  MpiSession &operator=(const MpiSession &) = delete;

  int rank = 0;
  int size = 1;
  int threadLevel = MPI_THREAD_SINGLE;
  bool owned = false;
};

/// Prints on rank 0 only; every rank reaches the same conclusion from the
/// same inputs (command line, manifest, world size).
void printErrorOnRankZero(const MpiSession &mpi, const std::string &message) {
  if (mpi.rank != 0)
    return;
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
}

/// Collective: true when `status` is ok on every rank. Otherwise the lowest
/// failing rank prints its error, so a failure that every rank shares (a
/// missing file) is printed once, yet one that only some rank hits (a file
/// missing on one node) is neither lost nor left to hang the others.
bool allRanksOk(const Status &status, const MpiSession &mpi) {
  int mine = status.ok() ? mpi.size : mpi.rank;
  int first = mpi.size;
  CHECK_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (first == mpi.size)
    return true;
  if (first == mpi.rank) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", status.message().c_str());
    std::fflush(stderr);
  }
  return false;
}

struct NodeInfo {
  int localRank = 0;
  int localSize = 1;
};

/// This rank's place among the ranks sharing its node, from MPI itself so
/// that it holds under any launcher (OMPI_COMM_WORLD_LOCAL_* are OpenMPI's).
NodeInfo nodeInfo(const MpiSession &mpi) {
  MPI_Comm node;
  CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mpi.rank,
                                MPI_INFO_NULL, &node));
  NodeInfo info;
  CHECK_MPI(MPI_Comm_rank(node, &info.localRank));
  CHECK_MPI(MPI_Comm_size(node, &info.localSize));
  CHECK_MPI(MPI_Comm_free(&node));
  return info;
}

/// Allocates every argument and fills params, optimizer states and hypers
/// from their init= specs. A replicated argument is a whole tensor; a
/// sharded one is this rank's flat shard, initialised with the values its
/// global elements have in the unsharded run (initialisation is a function
/// of the global index) and zero padding, which the optimizer and norms
/// read. Offload (memory=): a host argument gets host memory; an nvme
/// argument gets no buffer (null) but a file in `store`.
std::vector<void *> allocateArgs(asrt_context &ctx, const Manifest &manifest,
                                 const Options &options, int rank,
                                 NvmeStore *store) {
  std::vector<void *> args;
  for (const TensorSpec &arg : manifest.args) {
    // An nvme argument is initialised in a temporary host buffer and
    // written to its file: init stages each tensor once, so the host never
    // holds more than the largest one.
    std::vector<char> staging;
    void *buffer = nullptr;
    switch (arg.memory) {
    case MemoryKind::Device:
      buffer = asrt_alloc(&ctx, arg.numBytes());
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
    args.push_back(arg.memory == MemoryKind::Nvme ? nullptr : buffer);
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
    if (arg.memory == MemoryKind::Nvme)
      if (Status s = store->add(arg.index, arg.name, buffer, arg.numBytes());
          !s)
        fatal("--offload-dir: initialising %s: %s", arg.describe().c_str(),
              s.message().c_str());
  }
  return args;
}

/// Frees what allocateArgs allocated, each from the memory it came from.
void freeArgs(asrt_context &ctx, const Manifest &manifest,
              const std::vector<void *> &args) {
  for (const TensorSpec &arg : manifest.args)
    if (arg.memory == MemoryKind::Host)
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

/// The global tensors of the `specs` of `role`, for a file: a replicated
/// one is its own buffer; a sharded one is gathered from its shard group
/// with asrt_all_gather_shards. Collective: every rank calls it with the
/// same arguments. Only rank 0 writes files, so only rank 0 keeps the
/// gathered tensors (in `storage`); other ranks reuse one scratch buffer.
std::vector<void *> gatherGlobal(asrt_context &ctx,
                                 const std::vector<TensorSpec> &specs,
                                 const std::vector<void *> &buffers, Role role,
                                 int rank,
                                 std::vector<std::vector<char>> &storage) {
  std::vector<void *> global = buffers;
  std::vector<char> scratch;
  for (const TensorSpec &spec : specs) {
    if (spec.role != role || !spec.isSharded())
      continue;
    size_t bytes =
        static_cast<size_t>(spec.globalElements() * dtypeSize(spec.dtype));
    std::vector<char> *target = &scratch;
    if (rank == 0)
      target = &storage.emplace_back();
    target->resize(bytes);
    asrt_all_gather_shards(&ctx, spec.dtype, buffers[spec.index],
                           target->data(), spec.globalElements(),
                           spec.shardAxes);
    global[spec.index] = target->data();
  }
  return global;
}

Status writeStatsFile(const std::string &path, const Stats::Snapshot &stats,
                      const RunInfo &run) {
  std::ofstream out(path);
  if (!out)
    return Error("--stats-json: cannot create '" + path + "'");
  writeStatsJson(out, stats, run);
  out.close();
  if (!out)
    return Error("--stats-json: cannot write '" + path + "'");
  return Status::success();
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
               std::chrono::steady_clock::time_point end) {
  auto ns = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               t.time_since_epoch())
        .count();
  };
  TraceEvent e;
  e.name = "step";
  e.category = "step";
  e.startNs = ns(start);
  e.endNs = ns(end);
  e.step = step;
  trace.record(e);
}

Status checkTraceFileWritable(const std::string &path) {
  std::ofstream out(path);
  if (!out)
    return Error("--trace: cannot create '" + path + "'");
  return Status::success();
}

/// --trace: rank 0 gathers every rank's events and writes one file, each
/// rank a process (pid = rank). Collective; every rank returns the same
/// verdict on the sizes, rank 0 alone on the file.
Status writeTrace(const std::string &path, const Trace &trace,
                  const MpiSession &mpi) {
  std::string mine = trace.jsonEvents(mpi.rank);
  int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(mpi.size);
  CHECK_MPI(MPI_Allgather(&length, 1, MPI_INT64_T, lengths.data(), 1,
                          MPI_INT64_T, MPI_COMM_WORLD));
  int64_t total = 0;
  for (int64_t l : lengths)
    total += l;
  if (total > INT_MAX)
    return Error("--trace: the ranks' events take " + std::to_string(total) +
                 " bytes, more than one MPI gather moves (" +
                 std::to_string(INT_MAX) + "); trace fewer steps");
  std::vector<int> counts, displacements;
  for (int64_t l : lengths) {
    displacements.push_back(
        counts.empty() ? 0 : displacements.back() + counts.back());
    counts.push_back(static_cast<int>(l));
  }
  std::string all(mpi.rank == 0 ? static_cast<size_t>(total) : 0, '\0');
  CHECK_MPI(MPI_Gatherv(mine.data(), static_cast<int>(length), MPI_CHAR,
                        all.data(), counts.data(), displacements.data(),
                        MPI_CHAR, 0, MPI_COMM_WORLD));
  if (mpi.rank != 0)
    return Status::success();
  std::vector<std::string> ranks;
  for (int r = 0; r < mpi.size; ++r)
    ranks.push_back(all.substr(displacements[r], counts[r]));
  std::ofstream out(path);
  if (!out)
    return Error("--trace: cannot create '" + path + "'");
  writeTraceFile(out, ranks);
  out.close();
  if (!out)
    return Error("--trace: cannot write '" + path + "'");
  return Status::success();
}

std::string programName(int argc, char **argv) {
  if (argc < 1 || !argv[0])
    return "train";
  std::string path = argv[0];
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

int runDriver(int argc, char **argv, const DriverHooks &hooks) {
  MpiSession mpi(&argc, &argv);
  std::string program = programName(argc, argv);

  std::vector<std::string> arguments(argv + (argc > 0 ? 1 : 0), argv + argc);
  Expected<Options> parsed = parseOptions(arguments);
  if (!parsed) {
    printErrorOnRankZero(mpi, parsed.message() + "\nrun '" + program +
                                  " --help' to see the options");
    return 2;
  }
  const Options &options = *parsed;
  if (options.help) {
    if (mpi.rank == 0)
      std::fputs(usageText(program).c_str(), stdout);
    return 0;
  }

  Expected<Manifest> manifest = parseManifest(hooks.manifest);
  if (!manifest) {
    printErrorOnRankZero(mpi, "the manifest compiled into this binary is "
                              "invalid: " +
                                  manifest.message());
    return 1;
  }
  if (options.printManifest) {
    if (mpi.rank == 0)
      std::fputs(hooks.manifest, stdout);
    return 0;
  }
  if (manifest->worldSize() != mpi.size) {
    printErrorOnRankZero(mpi, worldSizeMismatchMessage(*manifest, mpi.size));
    return 1;
  }
  if (options.lr) {
    if (Status s = checkLrOverride(*manifest); !s) {
      printErrorOnRankZero(mpi, s.message());
      return 2;
    }
  }
  // Before training, not after it: the step cannot grow gradients later.
  if (!options.saveGradsFile.empty()) {
    if (Status s = checkSaveGrads(*manifest); !s) {
      printErrorOnRankZero(mpi, s.message());
      return 2;
    }
  }
  // Offload: memory=nvme arguments need a directory for their files.
  if (Status s = checkOffloadDirGiven(*manifest, options.offloadDir); !s) {
    printErrorOnRankZero(mpi, s.message());
    return 2;
  }

  NodeInfo node = nodeInfo(mpi);
  BackendOptions backend;
  backend.threads =
      options.threads > 0
          ? options.threads
          : defaultThreads(std::thread::hardware_concurrency(), node.localSize);
  backend.localRank = node.localRank;

  // Collectives run on a communication thread while this one computes.
  if (std::string error = mpiThreadLevelError(mpi.threadLevel);
      !error.empty()) {
    printErrorOnRankZero(mpi, error);
    return 1;
  }
  std::unique_ptr<Comm> comm = createMpiComm(manifest->grid);
  asrt_context ctx;
  ctx.comm = comm.get();
  ctx.stream->setTimeout(options.collectiveTimeout);
  ctx.offloadStream->setTimeout(options.collectiveTimeout);
  hooks.initBackend(&ctx, backend);
  // --optimizer-threads: the CPU optimizer step's threads (0: the node's
  // hardware threads divided among its ranks).
  ctx.setOptimizerThreads(
      options.optimizerThreads > 0
          ? options.optimizerThreads
          : defaultThreads(std::thread::hardware_concurrency(),
                           node.localSize));

  // Offload (docs/RuntimeABI.md, "Offload"): this rank's directory of
  // NVMe files; removed when `nvme` goes, on every return below.
  Expected<std::unique_ptr<NvmeStore>> nvme =
      openNvmeStore(*manifest, options.offloadDir, mpi.rank);
  if (!allRanksOk(nvme.status(), mpi))
    return 1;
  ctx.nvme = nvme->get();

  std::vector<void *> args =
      allocateArgs(ctx, *manifest, options, mpi.rank, ctx.nvme);
  if (ctx.nvme)
    ctx.stats->setNvmeBytes(ctx.nvme->totalBytes());
  std::vector<void *> ownedResults;
  std::vector<void *> results =
      allocateResults(ctx, *manifest, args, ownedResults);
  // The step's intermediate tensors live at fixed offsets in one arena.
  if (int64_t arena = manifest->plannedBytes("arena"); arena > 0)
    ctx.arena = asrt_alloc(&ctx, arena);
  if (int64_t hostArena = manifest->plannedBytes("host_arena"); hostArena > 0)
    ctx.hostArena = hostAlloc(&ctx, hostArena);

  // Every rank reads the file and keeps what it holds: a replicated
  // argument whole, a sharded one its block.
  Expected<LoadedParams> loaded = LoadedParams();
  if (!options.loadParamsFile.empty()) {
    // memory=nvme arguments load through host copies, stored back after.
    StagedNvmeArgs staged(*manifest, args, ctx.nvme);
    loaded =
        loadParams(options.loadParamsFile, *manifest, staged.args(), mpi.rank);
    if (loaded)
      staged.writeBack();
  }
  if (!allRanksOk(loaded.status(), mpi))
    return 1;

  Expected<std::unique_ptr<BatchSource>> batches =
      options.dataFile.empty()
          ? makeSyntheticBatches(*manifest, options.seed, mpi.rank, mpi.size)
          : openDataFile(options.dataFile, *manifest, mpi.rank, mpi.size,
                         options.dataFormat, options.seed);
  if (!allRanksOk(batches.status(), mpi))
    return 1;

  if (mpi.rank == 0) {
    std::printf("autoshard: step %s, strategy %s, grid %s (%d %s), backend "
                "%s, %d %s per rank, data %s\n",
                manifest->step.c_str(), manifest->strategy.c_str(),
                manifest->gridString().c_str(), mpi.size,
                mpi.size == 1 ? "rank" : "ranks", hooks.backendName(),
                backend.threads, backend.threads == 1 ? "thread" : "threads",
                (*batches)->describe().c_str());
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
  if (!allRanksOk(dataSource.status(), mpi))
    return 1;
  CheckpointOptions checkpointOptions;
  checkpointOptions.dir = options.checkpointDir;
  checkpointOptions.every = options.checkpointEvery;
  checkpointOptions.keep = options.keepCheckpoints;
  checkpointOptions.resume = options.resume;
  checkpointOptions.exitDuringSave = options.exitDuringCheckpoint;
  Checkpointer checkpointer(checkpointOptions, *manifest, hooks.manifest,
                            options.seed, *dataSource, mpi.rank, mpi.size);
  Expected<int64_t> firstStep = int64_t(0);
  {
    // --resume loads memory=nvme arguments through host copies.
    StagedNvmeArgs resumed(*manifest, args,
                           options.resume ? ctx.nvme : nullptr);
    firstStep = checkpointer.start(resumed.args(), options.steps);
    if (firstStep)
      resumed.writeBack();
  }
  if (!allRanksOk(firstStep.status(), mpi))
    return 1;

  // --trace records the steps. The ranks take their time origin together,
  // after a barrier, so that their tracks line up.
  std::unique_ptr<Trace> trace;
  if (!options.traceFile.empty()) {
    Status writable = mpi.rank == 0 ? checkTraceFileWritable(options.traceFile)
                                    : Status::success();
    if (!allRanksOk(writable, mpi))
      return 1;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    trace = std::make_unique<Trace>(steadyClockNs());
    ctx.setTrace(trace.get());
  }

  const int lossIndex = manifest->lossResult();
  double totalMs = 0;
  int64_t stepsRun = 0;
  for (int64_t step = *firstStep; step < options.steps; ++step) {
    (*batches)->fill(step, args.data());
    // Only the step itself is timed: that is what the compiler's cost model
    // predicts, and batch synthesis is not part of training.
    auto start = std::chrono::steady_clock::now();
    hooks.step(&ctx, args.data(), results.data());
    auto end = std::chrono::steady_clock::now();
    double ms = std::chrono::duration<double, std::milli>(end - start).count();
    checkStepWaited(ctx, step + 1);
    if (trace)
      traceStep(*trace, step + 1, start, end);
    totalMs += ms;
    int64_t oneBased = step + 1;
    if (oneBased % options.logEvery == 0 || oneBased == options.steps) {
      // The step's loss result is the global-batch loss on every rank: the
      // partitioner averages it, so printing needs no communication.
      double loss = *static_cast<const float *>(results[lossIndex]);
      if (mpi.rank == 0) {
        std::printf("%s\n", formatStepLine(oneBased, loss, ms).c_str());
        std::fflush(stdout);
      }
    }
    ++stepsRun;
    // Test hook: a job that dies between checkpoints. Every rank exits at
    // once without finalizing, as when the launcher kills the job; the
    // barrier first lets the launcher forward the step lines already
    // printed (MPI_Abort could end the job before they reach its output).
    if (oneBased == options.exitAfterStep) {
      std::fflush(stdout);
      std::fflush(stderr);
      MPI_Barrier(MPI_COMM_WORLD);
      std::_Exit(3);
    }
    if (checkpointer.due(oneBased, options.steps)) {
      // memory=nvme arguments are saved from host copies.
      StagedNvmeArgs saving(*manifest, args, ctx.nvme);
      if (!allRanksOk(checkpointer.save(oneBased, saving.args()), mpi))
        return 1;
    }
  }

  if (trace) {
    ctx.setTrace(nullptr);
    if (!allRanksOk(writeTrace(options.traceFile, *trace, mpi), mpi))
      return 1;
  }

  Stats::Snapshot stats = ctx.stats->snapshot();
  RunInfo run;
  run.step = manifest->step;
  run.strategy = manifest->strategy;
  run.grid = manifest->gridString();
  run.backend = hooks.backendName();
  run.worldSize = mpi.size;
  run.rank = mpi.rank;
  run.steps = stepsRun;
  run.meanStepMs = stepsRun > 0 ? totalMs / static_cast<double>(stepsRun) : 0;

  // Files hold full tensors, comparable with an unsharded run's: sharded
  // params and gradients are gathered (on every rank, after the statistics
  // were taken) and rank 0 writes them.
  Status saved;
  if (!options.saveParamsFile.empty()) {
    std::vector<std::vector<char>> storage;
    StagedNvmeArgs params(*manifest, args, ctx.nvme, Role::Param);
    std::vector<void *> global = gatherGlobal(
        ctx, manifest->args, params.args(), Role::Param, mpi.rank, storage);
    if (mpi.rank == 0)
      saved = saveParams(options.saveParamsFile, *manifest, global,
                         options.steps, options.seed);
  }
  if (!allRanksOk(saved, mpi))
    return 1;
  Status savedGrads;
  if (!options.saveGradsFile.empty()) {
    std::vector<std::vector<char>> storage;
    std::vector<void *> global = gatherGlobal(ctx, manifest->results, results,
                                              Role::Grad, mpi.rank, storage);
    if (mpi.rank == 0)
      savedGrads = saveGrads(options.saveGradsFile, *manifest, global,
                             options.steps, options.seed);
  }
  if (!allRanksOk(savedGrads, mpi))
    return 1;
  Status wroteStats;
  if (!options.statsJsonFile.empty() && mpi.rank == 0)
    wroteStats = writeStatsFile(options.statsJsonFile, stats, run);
  if (!allRanksOk(wroteStats, mpi))
    return 1;

  if (mpi.rank == 0) {
    std::ostringstream summary;
    writeSummary(summary, stats, run);
    std::fputs(summary.str().c_str(), stdout);
    std::fflush(stdout);
  }

  for (void *buffer : ownedResults)
    asrt_free(&ctx, buffer);
  asrt_free(&ctx, ctx.arena);
  hostFree(&ctx, ctx.hostArena);
  freeArgs(ctx, *manifest, args);
  return 0;
}

} // namespace autoshard::rt
