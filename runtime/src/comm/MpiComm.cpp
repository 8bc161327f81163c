// Comm over MPI: one cached sub-communicator per grid axis mask.
#include "comm/Comm.h"
#include "comm/MpiCheck.h"
#include "comm/MpiWords.h"
#include "core/Backoff.h"
#include "core/Context.h"
#include "core/Dtype.h"
#include "core/FlatShard.h"

#include <mpi.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace autoshard::rt {

void checkMpi(int code, const char *call, const char *file, int line) {
  if (code == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "MPI error code %d", code);
  fatal("%s:%d: %s failed: %s", file, line, call, text);
}

namespace {

/// Seconds MPI_Abort gets to end the job before this rank leaves anyway.
constexpr unsigned kAbortGraceSeconds = 30;

void exitAfterGrace(int) { _exit(1); }

void abortMpiJob(int exitCode) {
  // MPI_Abort ends every rank of the job. Should it hang instead (a
  // launcher that lost track of a dead or stopped rank), the alarm still
  // ends this one: a failing rank never hangs.
  std::signal(SIGALRM, &exitAfterGrace);
  alarm(kAbortGraceSeconds);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(MPI_COMM_WORLD, exitCode);
}

// bfloat16 reductions: MPI has no bf16 type, so the words travel as
// MPI_UINT16_T and these operators combine them in float. Each combine
// rounds back to bf16, as NCCL's bf16 reductions do.
template <typename Combine>
void combineBf16(void *in, void *inout, int *len, Combine combine) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = floatToBf16(combine(bf16ToFloat(a[i]), bf16ToFloat(b[i])));
}
void bf16Sum(void *in, void *inout, int *len, MPI_Datatype *) {
  combineBf16(in, inout, len, [](float x, float y) { return x + y; });
}
void bf16Max(void *in, void *inout, int *len, MPI_Datatype *) {
  combineBf16(in, inout, len, [](float x, float y) { return x > y ? x : y; });
}
void bf16Min(void *in, void *inout, int *len, MPI_Datatype *) {
  combineBf16(in, inout, len, [](float x, float y) { return x < y ? x : y; });
}

MPI_Datatype mpiType(asrt_dtype dtype) {
  switch (dtype) {
  case ASRT_DTYPE_F32:
    return MPI_FLOAT;
  case ASRT_DTYPE_I32:
    return MPI_INT32_T;
  case ASRT_DTYPE_I64:
    return MPI_INT64_T;
  case ASRT_DTYPE_BF16:
  case ASRT_DTYPE_F16:
  case ASRT_DTYPE_U16:
    // Moved as raw 16-bit words; only bf16 is reduced, by its own ops.
    return MPI_UINT16_T;
  }
  fatal("collective: dtype %d is not an asrt_dtype", static_cast<int>(dtype));
}

/// MPI counts are int; larger buffers would need chunking (not needed yet:
/// 2^31 floats is 8 GiB in one collective call).
int mpiCount(int64_t count, const char *op) {
  if (count > INT_MAX)
    fatal("%s: count %lld exceeds MPI's limit of %d elements per call", op,
          static_cast<long long>(count), INT_MAX);
  return static_cast<int>(count);
}

/// MPI's per-member counts and displacements (in elements) of the flat
/// shards of a numel-element tensor over n ranks: member i contributes or
/// receives its shard's valid elements, which sit at i k in the tensor.
struct ShardCounts {
  std::vector<int> counts;
  std::vector<int> displs;
};

ShardCounts shardCounts(int64_t numel, int n, const char *op) {
  mpiCount(numel, op); // every count and displacement is at most numel
  FlatShardLayout layout{numel, n};
  ShardCounts c;
  for (int i = 0; i < n; ++i) {
    c.counts.push_back(static_cast<int>(layout.validCount(i)));
    c.displs.push_back(static_cast<int>(layout.begin(i)));
  }
  return c;
}

class MpiComm final : public Comm {
  enum class Op : int64_t {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllGatherShards,
    ReduceScatterShards,
    Barrier,
    Split
  };
  /// A word one rank sends the others: it waits (or no longer waits) in
  /// collective number `seq` over `mask`.
  struct Word {
    Op op = Op::AllReduce;
    int32_t mask = 0;
    int64_t seq = 0;
    bool waiting = false;
    bool active = false; // for `current`: a collective runs
  };
  static constexpr int kWordTag = 17;
  static constexpr int kWordLength = 4;
  using WordBytes = std::array<int64_t, kWordLength>;

public:
  MpiComm(MPI_Comm world, MPI_Comm wordsComm, int rank, int size,
          std::vector<int64_t> grid, double timeoutSeconds)
      : Comm(rank, size, std::move(grid)), world(world), wordsComm(wordsComm),
        heard(static_cast<size_t>(size)),
        board(std::make_unique<MpiWordBoard>(wordsComm, kWordTag)) {
    CHECK_MPI(MPI_Op_create(&bf16Sum, /*commute=*/1, &bf16SumOp));
    CHECK_MPI(MPI_Op_create(&bf16Max, /*commute=*/1, &bf16MaxOp));
    CHECK_MPI(MPI_Op_create(&bf16Min, /*commute=*/1, &bf16MinOp));
    if (timeoutSeconds > 0)
      sayAfter = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::duration<double>(timeoutSeconds / 4));
  }

  ~MpiComm() override {
    board.reset(); // before its communicator
    MPI_Comm_free(&wordsComm);
    for (auto &[mask, comm] : groups)
      if (comm != world)
        MPI_Comm_free(&comm);
    MPI_Op_free(&bf16SumOp);
    MPI_Op_free(&bf16MaxOp);
    MPI_Op_free(&bf16MinOp);
    MPI_Comm_free(&world);
  }

  void allReduce(const void *send, void *recv, int64_t count, asrt_dtype dtype,
                 asrt_reduce_op op, int32_t mask) override {
    MPI_Comm comm = groupComm(mask);
    int n = mpiCount(count, "all_reduce");
    const void *source = send == recv ? MPI_IN_PLACE : send;
    MPI_Request request;
    CHECK_MPI(MPI_Iallreduce(source, recv, n, mpiType(dtype), mpiOp(dtype, op),
                             comm, &request));
    complete(request, Op::AllReduce, mask);
    if (op == ASRT_REDUCE_AVG)
      divideByGroup(recv, count, dtype, groupSize(mask));
  }

  void allGather(const void *send, void *recv, int64_t sendCount,
                 asrt_dtype dtype, int32_t mask) override {
    MPI_Comm comm = groupComm(mask);
    int n = mpiCount(sendCount, "all_gather");
    int groupRank;
    CHECK_MPI(MPI_Comm_rank(comm, &groupRank));
    // A send that already sits in this rank's block of recv is in place.
    const char *ownBlock = static_cast<const char *>(recv) +
                           groupRank * sendCount * dtypeSize(dtype);
    const void *source = send == ownBlock ? MPI_IN_PLACE : send;
    MPI_Datatype type = mpiType(dtype);
    MPI_Request request;
    CHECK_MPI(MPI_Iallgather(source, n, type, recv, n, type, comm, &request));
    complete(request, Op::AllGather, mask);
  }

  void reduceScatter(const void *send, void *recv, int64_t recvCount,
                     asrt_dtype dtype, asrt_reduce_op op,
                     int32_t mask) override {
    MPI_Comm comm = groupComm(mask);
    int n = mpiCount(recvCount, "reduce_scatter");
    // In place, MPI reads the whole input from recv and leaves this rank's
    // block at its start: the ABI's meaning of send == recv.
    const void *source = send == recv ? MPI_IN_PLACE : send;
    MPI_Request request;
    CHECK_MPI(MPI_Ireduce_scatter_block(source, recv, n, mpiType(dtype),
                                        mpiOp(dtype, op), comm, &request));
    complete(request, Op::ReduceScatter, mask);
    if (op == ASRT_REDUCE_AVG)
      divideByGroup(recv, recvCount, dtype, groupSize(mask));
  }

  void allGatherShards(const void *shard, void *full, int64_t numel,
                       asrt_dtype dtype, int32_t mask) override {
    MPI_Comm comm = groupComm(mask);
    int me = groupIndex(mask);
    ShardCounts c = shardCounts(numel, groupSize(mask), "all_gather_shards");
    // A shard that already sits at its place in full is in place.
    const char *ownBlock =
        static_cast<const char *>(full) + c.displs[me] * dtypeSize(dtype);
    const void *source = shard == ownBlock ? MPI_IN_PLACE : shard;
    MPI_Datatype type = mpiType(dtype);
    // The padding never travels: each member sends only its valid count,
    // so full receives exactly numel elements.
    MPI_Request request;
    CHECK_MPI(MPI_Iallgatherv(source, c.counts[me], type, full, c.counts.data(),
                              c.displs.data(), type, comm, &request));
    complete(request, Op::AllGatherShards, mask);
  }

  void reduceScatterShards(const void *full, void *shard, int64_t numel,
                           asrt_dtype dtype, asrt_reduce_op op,
                           int32_t mask) override {
    MPI_Comm comm = groupComm(mask);
    int me = groupIndex(mask);
    int n = groupSize(mask);
    ShardCounts c = shardCounts(numel, n, "reduce_scatter_shards");
    // In place, MPI reads the whole input from the receive buffer and
    // leaves this rank's block at its start, as reduceScatter's in-place
    // form does.
    const void *source = full == shard ? MPI_IN_PLACE : full;
    MPI_Request request;
    CHECK_MPI(MPI_Ireduce_scatter(source, shard, c.counts.data(),
                                  mpiType(dtype), mpiOp(dtype, op), comm,
                                  &request));
    complete(request, Op::ReduceScatterShards, mask);
    if (op == ASRT_REDUCE_AVG)
      divideByGroup(shard, c.counts[me], dtype, n);
  }

  void barrier() override {
    MPI_Request request;
    CHECK_MPI(MPI_Ibarrier(world, &request));
    complete(request, Op::Barrier, worldMask());
  }

private:
  /// Waits for a collective, polling with Backoff's pauses instead of in
  /// MPI's blocking call: OpenMPI's blocking collectives spin at full CPU
  /// for as long as they wait, which for a hung peer is the whole
  /// collective timeout, on cores the node's other ranks need. The wait
  /// needs no bound of its own: the main thread's wait for this
  /// collective has one (CommStream), and ends the job.
  ///
  /// MPI does not tell a member which other member a collective waits for.
  /// So a member that has waited a quarter of the collective timeout says
  /// so to every rank (a word of four integers, point to point on a
  /// communicator of its own), and says again when the wait ends; while
  /// it waits it reads the others' words. At a timeout, describeWait
  /// compares them: a member without a word for this collective has not
  /// reached it, one with a word for another collective waits itself.
  /// A collective that completes within the quarter sends nothing.
  void complete(MPI_Request &request, Op op, int32_t mask) {
    int64_t seq = sequence[mask]++;
    begin(op, mask, seq);
    Backoff backoff;
    auto start = std::chrono::steady_clock::now();
    bool said = false;
    while (true) {
      int done = 0;
      CHECK_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (done)
        break;
      if (sayAfter.count() > 0 &&
          std::chrono::steady_clock::now() - start >= sayAfter) {
        if (!said) {
          say(op, mask, seq, true);
          said = true;
        }
        std::lock_guard<std::mutex> lock(wordMutex);
        listen();
      }
      backoff.pause();
    }
    end();
    if (said)
      say(op, mask, seq, false);
  }

public:
  std::string describeWait() const override {
    std::lock_guard<std::mutex> lock(wordMutex);
    if (!current.active)
      return "";
    listen();
    std::vector<int> others;
    if (current.op == Op::Split) {
      for (int r = 0; r < size(); ++r)
        if (r != rank())
          others.push_back(r);
    } else {
      for (int r : groupRanks(current.mask))
        if (r != rank())
          others.push_back(r);
    }
    std::vector<PeerWord> words;
    for (int r : others) {
      const Word &w = heard[static_cast<size_t>(r)];
      PeerWord word;
      word.rank = r;
      if (w.waiting) {
        bool same = w.op == current.op && w.mask == current.mask &&
                    (w.op == Op::Split || w.seq == current.seq);
        word.state = same ? PeerWord::Here : PeerWord::Elsewhere;
        if (!same)
          word.where = describeWord(w);
      }
      words.push_back(std::move(word));
    }
    std::string text =
        current.op == Op::Split
            ? "it runs " + describeWord(current) + " first, and there "
            : "";
    return text + describePeerWords(words) +
           " (by the word that ranks waiting longer than a quarter of the "
           "timeout send each other: MPI does not say which member a "
           "collective waits for)";
  }

private:
  int32_t worldMask() const {
    return static_cast<int32_t>((1u << grid().size()) - 1);
  }

  static const char *opName(Op op) {
    switch (op) {
    case Op::AllReduce:
      return "all_reduce";
    case Op::AllGather:
      return "all_gather";
    case Op::ReduceScatter:
      return "reduce_scatter";
    case Op::AllGatherShards:
      return "all_gather_shards";
    case Op::ReduceScatterShards:
      return "reduce_scatter_shards";
    case Op::Barrier:
      return "barrier";
    case Op::Split:
      return "split";
    }
    return "collective";
  }

  static std::string describeWord(const Word &w) {
    if (w.op == Op::Split)
      return "the creation of the communicator of grid_axes_mask " +
             std::to_string(w.mask) + " (MPI_Comm_split over the world)";
    return std::string(opName(w.op)) + " #" + std::to_string(w.seq + 1) +
           " over grid_axes_mask " + std::to_string(w.mask);
  }

  void begin(Op op, int32_t mask, int64_t seq) {
    std::lock_guard<std::mutex> lock(wordMutex);
    current = Word{op, mask, seq, true, true};
  }
  void end() {
    std::lock_guard<std::mutex> lock(wordMutex);
    current.active = false;
  }

  /// Sends every other rank the word that this rank waits (or no longer
  /// waits) in collective `seq` over `mask`, on the board of words
  /// (MpiWordBoard, the kind ControlPlane::waitWords gives NCCL under
  /// mpirun): non-blocking, so a stopped rank never receives it, and
  /// nothing waits for that.
  void say(Op op, int32_t mask, int64_t seq, bool waiting) {
    WordBytes word{static_cast<int64_t>(op), mask, seq, waiting ? 1 : 0};
    board->post(
        std::string(reinterpret_cast<const char *>(word.data()), sizeof word));
  }

  /// Reads the words that have arrived (under wordMutex; from the
  /// communication thread while it waits, or the main thread at a
  /// timeout). A board that cannot be read leaves the words heard last.
  void listen() const {
    Expected<std::vector<std::string>> words = board->read();
    if (!words)
      return;
    for (int r = 0; r < size() && r < static_cast<int>(words->size()); ++r) {
      const std::string &bytes = (*words)[static_cast<size_t>(r)];
      if (r == rank() || bytes.size() != sizeof(WordBytes))
        continue;
      WordBytes word;
      std::memcpy(word.data(), bytes.data(), sizeof word);
      Word &w = heard[static_cast<size_t>(r)];
      w.op = static_cast<Op>(word[0]);
      w.mask = static_cast<int32_t>(word[1]);
      w.seq = word[2];
      w.waiting = word[3] != 0;
    }
  }

  MPI_Op mpiOp(asrt_dtype dtype, asrt_reduce_op op) const {
    bool bf16 = dtype == ASRT_DTYPE_BF16;
    switch (op) {
    case ASRT_REDUCE_SUM:
    case ASRT_REDUCE_AVG:
      return bf16 ? bf16SumOp : MPI_SUM;
    case ASRT_REDUCE_MAX:
      return bf16 ? bf16MaxOp : MPI_MAX;
    case ASRT_REDUCE_MIN:
      return bf16 ? bf16MinOp : MPI_MIN;
    }
    fatal("collective: reduce_op %d is not an asrt_reduce_op",
          static_cast<int>(op));
  }

  /// The communicator of this rank's group for `mask`, created on first use
  /// by MPI_Comm_split (collective over the world: every rank reaches the
  /// first use of a mask at the same collective).
  MPI_Comm groupComm(int32_t mask) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = groups.find(mask);
    if (it != groups.end())
      return it->second;
    MPI_Comm comm;
    if (gridGroupSize(grid(), mask) == size()) {
      comm = world;
    } else {
      // Color: the coordinates along the unmasked axes, which the group
      // shares. Key: the world rank, so group order is rank order.
      std::vector<int64_t> coords = gridCoordinates(rank(), grid());
      int64_t color = 0;
      for (size_t i = 0; i < grid().size(); ++i)
        if (!(mask & (1 << i)))
          color = color * grid()[i] + coords[i];
      // A blocking call: the word that this rank is in it goes out first,
      // since it cannot be sent from inside.
      begin(Op::Split, mask, 0);
      if (sayAfter.count() > 0)
        say(Op::Split, mask, 0, true);
      CHECK_MPI(MPI_Comm_split(world, static_cast<int>(color), rank(), &comm));
      end();
      if (sayAfter.count() > 0)
        say(Op::Split, mask, 0, false);
      CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    }
    groups.emplace(mask, comm);
    return comm;
  }

  MPI_Comm world;
  std::mutex mutex;
  std::map<int32_t, MPI_Comm> groups;

  // The word exchange of complete(): under wordMutex, except `sequence`
  // (the communication thread's) and `board` (which serialises itself).
  MPI_Comm wordsComm;
  std::chrono::nanoseconds sayAfter{0};
  std::map<int32_t, int64_t> sequence;
  mutable std::mutex wordMutex;
  Word current;
  mutable std::vector<Word> heard; // the latest word of each world rank
  std::unique_ptr<MpiWordBoard> board;
  MPI_Op bf16SumOp = MPI_OP_NULL;
  MPI_Op bf16MaxOp = MPI_OP_NULL;
  MPI_Op bf16MinOp = MPI_OP_NULL;
};

} // namespace

void installMpiFatalHandler() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    fatal("installMpiFatalHandler: MPI is not initialised");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  setFatalRank(rank);
  setFatalAbortHook(&abortMpiJob);
  CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

const char *mpiThreadLevelName(int level) {
  switch (level) {
  case MPI_THREAD_SINGLE:
    return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED:
    return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED:
    return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE:
    return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

std::string mpiThreadLevelError(int provided) {
  if (provided >= MPI_THREAD_MULTIPLE)
    return "";
  return std::string("the MPI library provides only ") +
         mpiThreadLevelName(provided) +
         "; the runtime needs MPI_THREAD_MULTIPLE (its communication thread "
         "runs the collectives while the main thread computes, and the main "
         "thread ends a hung job with MPI_Abort): initialise MPI with "
         "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) and use an MPI "
         "built with thread support";
}

std::unique_ptr<Comm> createMpiComm(const std::vector<int64_t> &grid,
                                    double collectiveTimeoutSeconds) {
  installMpiFatalHandler();
  int provided = MPI_THREAD_SINGLE;
  CHECK_MPI(MPI_Query_thread(&provided));
  if (std::string error = mpiThreadLevelError(provided); !error.empty())
    fatal("%s", error.c_str());
  int rank = 0, size = 0;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  // A private duplicate: the runtime's traffic never matches messages of
  // other code that uses MPI_COMM_WORLD.
  MPI_Comm world;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &world));
  CHECK_MPI(MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN));
  // Another, for the words waiting ranks send each other (MpiComm::complete).
  MPI_Comm words;
  CHECK_MPI(MPI_Comm_dup(world, &words));
  CHECK_MPI(MPI_Comm_set_errhandler(words, MPI_ERRORS_RETURN));
  return std::make_unique<MpiComm>(world, words, rank, size, grid,
                                   collectiveTimeoutSeconds);
}

} // namespace autoshard::rt
