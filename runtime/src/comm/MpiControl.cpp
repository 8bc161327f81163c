// The control plane over MPI: the job mpirun launched.
#include "comm/Comm.h"
#include "comm/MpiCheck.h"
#include "comm/MpiWords.h"
#include "core/Context.h"

#include "core/Backoff.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>

namespace autoshard::rt {

namespace {

using Clock = std::chrono::steady_clock;

/// Tags of a message's two parts on the plane's communicator: its length,
/// then its bytes in pieces of at most kPiece (MPI counts are ints).
constexpr int kLengthTag = 1;
constexpr int kBytesTag = 2;
constexpr uint64_t kPiece = uint64_t(1) << 30;
/// The first tag of the boards of waitWords() on their communicator: one
/// tag per board, in the order the ranks ask for them.
constexpr int kFirstBoardTag = 1;

/// The requests of one stage of an operation and the peer each one waits
/// for, so that a stage that does not complete in time can say whom it
/// waited for.
struct Stage {
  std::vector<MPI_Request> requests;
  std::vector<int> peers;

  void add(MPI_Request request, int peer) {
    requests.push_back(request);
    peers.push_back(peer);
  }
};

/// MPI for the lifetime of the object (initialised here unless the caller
/// did, then finalised here), on a private duplicate of MPI_COMM_WORLD so
/// that control messages never match the step's or anyone else's.
///
/// Every operation is a star through its root (rank 0, or a broadcast's
/// root) of non-blocking point-to-point messages, polled with Backoff
/// pauses until a deadline of the plane's timeout: MPI's blocking
/// collectives can neither be bounded nor say which rank is missing, and
/// OpenMPI's spin at full CPU while they wait. The root sees which ranks
/// have not sent their part; the others wait for the root. These are small
/// messages between steps, so the star's extra hop costs nothing that
/// matters.
class MpiControl final : public ControlPlane {
public:
  struct Place {
    int rank = 0, size = 1, localRank = 0, localSize = 1;
  };

  MpiControl(const Place &place, bool owned, MPI_Comm comm, MPI_Comm wordsComm)
      : ControlPlane(place.rank, place.size, place.localRank, place.localSize),
        owned(owned), comm(comm), wordsComm(wordsComm) {}

  ~MpiControl() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    if (owned) {
      // MPI_Finalize synchronises the job without a bound; a rank stopped
      // after the last operation would hold the others there forever.
      Purpose purpose(*this, "ending the job, before MPI_Finalize");
      barrier();
    }
    MPI_Comm_free(&wordsComm);
    MPI_Comm_free(&comm);
    if (owned)
      MPI_Finalize();
  }

  const char *kind() const override { return "mpi"; }

  std::vector<std::string> allGather(const std::string &mine) override {
    return throughRoot("allGather", mine, /*answer=*/true);
  }

  std::vector<std::string> gather(const std::string &mine) override {
    return throughRoot("gather", mine, /*answer=*/false);
  }

  void barrier() override { throughRoot("barrier", std::string(), true); }

  void broadcast(std::string &bytes, int root) override {
    Operation op = begin("broadcast");
    if (rank() == root) {
      Stage sends;
      for (int peer = 0; peer < size(); ++peer)
        if (peer != root)
          send(sends, bytes, peer);
      finish(op, sends, "the root's message to rank");
      return;
    }
    bytes = receiveFrom(op, root, "the message of rank");
  }

  /// A board of its own tag on the plane's communicator of words, made
  /// when the plane was (MPI_Comm_dup synchronises the ranks without a
  /// bound, so not here, where a stopped rank would hold the others).
  /// Only with MPI_THREAD_MULTIPLE: the board serves the thread that waits
  /// in a collective while the main thread runs this plane's operations.
  std::unique_ptr<WaitWords> waitWords() override {
    if (std::string error = mpiThreadLevelError(); !error.empty()) {
      std::fprintf(stderr,
                   "autoshard: control plane (mpi): no board for the words "
                   "of waiting ranks (a collective timeout will not name "
                   "the missing member): %s\n",
                   error.c_str());
      return nullptr;
    }
    return std::make_unique<MpiWordBoard>(wordsComm, nextBoardTag++);
  }

  [[noreturn]] void abortJob(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

private:
  /// One operation: its name and number for messages, and its deadline.
  struct Operation {
    const char *name;
    uint64_t number;
    Clock::time_point start;
    bool bounded;
    Clock::time_point deadline;
  };

  Operation begin(const char *name) {
    Operation op{name, ++operations, Clock::now(), timeout() > 0, {}};
    if (op.bounded)
      // Beyond ~30 years the deadline would overflow the clock: forever.
      op.deadline =
          op.start +
          std::chrono::duration_cast<Clock::duration>(
              std::chrono::duration<double>(std::min(timeout(), 1e9)));
    return op;
  }

  /// Every rank's `mine` to rank 0, which (with `answer`) sends them all
  /// back to every rank.
  std::vector<std::string> throughRoot(const char *name,
                                       const std::string &mine, bool answer) {
    Operation op = begin(name);
    if (size() == 1)
      return {mine};
    if (rank() != 0) {
      // Synchronously: the send completes only once rank 0 has taken it,
      // so a rank still waiting for the answer knows that rank 0 reached
      // the operation (and waits itself for another part), and one whose
      // part was not taken knows that it did not.
      Stage sends;
      send(sends, mine, 0, /*synchronous=*/true);
      finish(op, sends, "its part's delivery to rank",
             ", which has not taken it: rank 0 has not reached this "
             "operation");
      if (!answer)
        return {};
      return decode(receiveFrom(
          op, 0, "the answer of rank",
          ", which has taken this rank's part (it reached this operation) "
          "and answers once every rank's part has come: rank 0 waits itself, "
          "for the rank its own message names"));
    }
    std::vector<std::string> parts = receiveFromEveryRank(op);
    parts[0] = mine;
    if (answer) {
      std::string all = encode(parts);
      Stage sends;
      for (int peer = 1; peer < size(); ++peer)
        send(sends, all, peer);
      finish(op, sends, "the answer's delivery to rank");
    }
    return parts;
  }

  /// Starts sending `bytes` to `peer` into `stage`; `bytes` must outlive
  /// the stage. The length travels first, as a receiver needs it.
  /// `synchronous`: the length goes by MPI_Issend, which completes only
  /// once `peer` has taken it.
  void send(Stage &stage, const std::string &bytes, int peer,
            bool synchronous = false) {
    lengths.push_back(bytes.size());
    MPI_Request request;
    CHECK_MPI((synchronous ? MPI_Issend : MPI_Isend)(
        &lengths.back(), 1, MPI_UINT64_T, peer, kLengthTag, comm, &request));
    stage.add(request, peer);
    for (uint64_t done = 0; done < bytes.size(); done += kPiece) {
      int piece =
          static_cast<int>(std::min<uint64_t>(bytes.size() - done, kPiece));
      CHECK_MPI(MPI_Isend(bytes.data() + done, piece, MPI_CHAR, peer, kBytesTag,
                          comm, &request));
      stage.add(request, peer);
    }
  }

  /// Posts the receives of a message whose length has come.
  void receiveBytes(Stage &stage, std::string &bytes, int peer) {
    for (uint64_t done = 0; done < bytes.size(); done += kPiece) {
      int piece =
          static_cast<int>(std::min<uint64_t>(bytes.size() - done, kPiece));
      MPI_Request request;
      CHECK_MPI(MPI_Irecv(bytes.data() + done, piece, MPI_CHAR, peer, kBytesTag,
                          comm, &request));
      stage.add(request, peer);
    }
  }

  std::string receiveFrom(const Operation &op, int peer, const char *what,
                          const char *verdict = "") {
    uint64_t length = 0;
    Stage stage;
    MPI_Request request;
    CHECK_MPI(
        MPI_Irecv(&length, 1, MPI_UINT64_T, peer, kLengthTag, comm, &request));
    stage.add(request, peer);
    finish(op, stage, what, verdict);
    std::string bytes(static_cast<size_t>(length), '\0');
    receiveBytes(stage, bytes, peer);
    finish(op, stage, what, verdict);
    return bytes;
  }

  /// Rank 0: every other rank's message, received as they come.
  std::vector<std::string> receiveFromEveryRank(const Operation &op) {
    std::vector<uint64_t> sizes(static_cast<size_t>(size()), 0);
    Stage stage;
    for (int peer = 1; peer < size(); ++peer) {
      MPI_Request request;
      CHECK_MPI(MPI_Irecv(&sizes[static_cast<size_t>(peer)], 1, MPI_UINT64_T,
                          peer, kLengthTag, comm, &request));
      stage.add(request, peer);
    }
    finish(op, stage, "the part of rank");
    std::vector<std::string> parts(static_cast<size_t>(size()));
    for (int peer = 1; peer < size(); ++peer) {
      auto r = static_cast<size_t>(peer);
      parts[r].resize(static_cast<size_t>(sizes[r]));
      receiveBytes(stage, parts[r], peer);
    }
    finish(op, stage, "the part of rank");
    return parts;
  }

  /// Polls the stage's requests until all are done (then empties the
  /// stage) or the operation's deadline, which is fatal: it names the
  /// operation, its purpose and the ranks whose messages are missing.
  /// `verdict` follows the ranks in the message: what the wait tells of
  /// them.
  void finish(const Operation &op, Stage &stage, const char *waitingFor,
              const char *verdict = "") {
    Backoff backoff;
    while (true) {
      int done = 0;
      CHECK_MPI(MPI_Testall(static_cast<int>(stage.requests.size()),
                            stage.requests.data(), &done, MPI_STATUSES_IGNORE));
      if (done)
        break;
      // Past the deadline, the requests still open name the late ranks.
      // None open: the peers did their part and this rank's own process
      // ran too late to see it (it was stopped, or not scheduled): MPI_Testall
      // progresses without rechecking, so its "not done" was already stale.
      if (op.bounded && Clock::now() >= op.deadline) {
        std::vector<int> late = lateRanks(stage);
        if (late.empty())
          break;
        timedOut(op, late, waitingFor, verdict);
      }
      backoff.pause();
    }
    stage.requests.clear();
    stage.peers.clear();
    lengths.clear();
  }

  /// The peers of the stage's requests that have not completed, each once.
  static std::vector<int> lateRanks(Stage &stage) {
    std::vector<int> late;
    for (size_t i = 0; i < stage.requests.size(); ++i) {
      int done = 0;
      CHECK_MPI(MPI_Test(&stage.requests[i], &done, MPI_STATUS_IGNORE));
      if (!done &&
          std::find(late.begin(), late.end(), stage.peers[i]) == late.end())
        late.push_back(stage.peers[i]);
    }
    return late;
  }

  [[noreturn]] void timedOut(const Operation &op, const std::vector<int> &late,
                             const char *waitingFor, const char *verdict) {
    std::string ranks;
    for (size_t i = 0; i < late.size(); ++i)
      ranks += (i == 0                 ? ""
                : i + 1 == late.size() ? " and "
                                       : ", ") +
               std::to_string(late[i]);
    double waited =
        std::chrono::duration<double>(Clock::now() - op.start).count();
    fatal("control plane (mpi): %s #%llu%s did not complete within the "
          "collective timeout of %g s (waited %.1f s): rank %d still waits "
          "for %s%s %s%s. A rank that does not take part has probably died "
          "or hung; --collective-timeout sets the limit (0 waits forever)",
          op.name, static_cast<unsigned long long>(op.number),
          forPurpose().c_str(), timeout(), waited, rank(), waitingFor,
          late.size() == 1 ? "" : "s", ranks.c_str(), verdict);
  }

  /// Parts as one message: their count and lengths, then their bytes.
  static std::string encode(const std::vector<std::string> &parts) {
    std::vector<uint64_t> header{parts.size()};
    for (const std::string &part : parts)
      header.push_back(part.size());
    std::string all(header.size() * sizeof(uint64_t), '\0');
    std::memcpy(all.data(), header.data(), all.size());
    for (const std::string &part : parts)
      all += part;
    return all;
  }

  std::vector<std::string> decode(const std::string &all) const {
    auto word = [&](size_t i) {
      uint64_t value = 0;
      if ((i + 1) * sizeof value <= all.size())
        std::memcpy(&value, all.data() + i * sizeof value, sizeof value);
      return value;
    };
    uint64_t count = word(0);
    if (count != static_cast<uint64_t>(size()))
      fatal("control plane (mpi): rank 0's answer holds %llu parts for %d "
            "ranks",
            static_cast<unsigned long long>(count), size());
    std::vector<std::string> parts;
    size_t at = (count + 1) * sizeof(uint64_t);
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t length = word(static_cast<size_t>(i + 1));
      if (at + length > all.size())
        fatal("control plane (mpi): rank 0's answer is truncated");
      parts.push_back(all.substr(at, static_cast<size_t>(length)));
      at += static_cast<size_t>(length);
    }
    return parts;
  }

  bool owned;
  MPI_Comm comm;
  /// Where the boards of waitWords() post (never the plane's own traffic).
  MPI_Comm wordsComm;
  int nextBoardTag = kFirstBoardTag;
  uint64_t operations = 0;
  /// The lengths of the messages in flight, alive until their stage ends
  /// (a deque: growing it never moves them).
  std::deque<uint64_t> lengths;
};

} // namespace

std::unique_ptr<ControlPlane> createMpiControl(int *argc, char ***argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int level = MPI_THREAD_SINGLE;
  if (!initialized)
    // MULTIPLE: a communication thread will drive collectives while the
    // kernels run (TOOLCHAIN.md: OpenMPI has no progress thread).
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &level);
  installMpiFatalHandler();
  MpiControl::Place place;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &place.rank));
  CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &place.size));
  // The node from MPI itself, so that it holds under any launcher
  // (OMPI_COMM_WORLD_LOCAL_* are OpenMPI's).
  MPI_Comm node;
  CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED,
                                place.rank, MPI_INFO_NULL, &node));
  CHECK_MPI(MPI_Comm_rank(node, &place.localRank));
  CHECK_MPI(MPI_Comm_size(node, &place.localSize));
  CHECK_MPI(MPI_Comm_free(&node));
  MPI_Comm comm;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  MPI_Comm wordsComm;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &wordsComm));
  CHECK_MPI(MPI_Comm_set_errhandler(wordsComm, MPI_ERRORS_RETURN));
  return std::make_unique<MpiControl>(place, !initialized, comm, wordsComm);
}

std::string mpiThreadLevelError() {
  int provided = MPI_THREAD_SINGLE;
  CHECK_MPI(MPI_Query_thread(&provided));
  return mpiThreadLevelError(provided);
}

} // namespace autoshard::rt
