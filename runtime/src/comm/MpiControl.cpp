// The control plane over MPI: the job mpirun launched.
#include "comm/Comm.h"
#include "comm/MpiCheck.h"
#include "core/Context.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>

namespace autoshard::rt {

namespace {

/// MPI for the lifetime of the object (initialised here unless the caller
/// did, then finalised here), on a private duplicate of MPI_COMM_WORLD so
/// that control messages never match the step's or anyone else's.
class MpiControl final : public ControlPlane {
public:
  struct Place {
    int rank = 0, size = 1, localRank = 0, localSize = 1;
  };

  MpiControl(const Place &place, bool owned, MPI_Comm comm)
      : ControlPlane(place.rank, place.size, place.localRank, place.localSize),
        owned(owned), comm(comm) {}

  ~MpiControl() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    MPI_Comm_free(&comm);
    if (owned)
      MPI_Finalize();
  }

  const char *kind() const override { return "mpi"; }

  std::vector<std::string> allGather(const std::string &mine) override {
    Counts c = exchangeLengths(mine, /*everywhere=*/true);
    std::string all(static_cast<size_t>(c.total), '\0');
    CHECK_MPI(MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()),
                             MPI_CHAR, all.data(), c.counts.data(),
                             c.displacements.data(), MPI_CHAR, comm));
    return split(all, c);
  }

  std::vector<std::string> gather(const std::string &mine) override {
    Counts c = exchangeLengths(mine, /*everywhere=*/false);
    std::string all(static_cast<size_t>(c.total), '\0');
    CHECK_MPI(MPI_Gatherv(mine.data(), static_cast<int>(mine.size()),
                          MPI_CHAR, all.data(), c.counts.data(),
                          c.displacements.data(), MPI_CHAR, 0, comm));
    return rank() == 0 ? split(all, c) : std::vector<std::string>();
  }

  void broadcast(std::string &bytes, int root) override {
    auto length = static_cast<uint64_t>(bytes.size());
    CHECK_MPI(MPI_Bcast(&length, 1, MPI_UINT64_T, root, comm));
    bytes.resize(static_cast<size_t>(length));
    // MPI counts are ints: large texts go in pieces.
    for (uint64_t done = 0; done < length;) {
      int piece = static_cast<int>(std::min<uint64_t>(length - done, 1 << 30));
      CHECK_MPI(MPI_Bcast(bytes.data() + done, piece, MPI_CHAR, root, comm));
      done += static_cast<uint64_t>(piece);
    }
  }

  void barrier() override { CHECK_MPI(MPI_Barrier(comm)); }

  [[noreturn]] void abortJob(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

private:
  struct Counts {
    std::vector<int> counts, displacements;
    int64_t total = 0;
  };

  /// Every rank's length (on every rank, or on rank 0), checked against
  /// MPI's int counts.
  Counts exchangeLengths(const std::string &mine, bool everywhere) {
    if (mine.size() > static_cast<size_t>(INT_MAX))
      fatal("control plane: %zu bytes from rank %d are more than one MPI "
            "message moves (%d)",
            mine.size(), rank(), INT_MAX);
    int length = static_cast<int>(mine.size());
    Counts c;
    c.counts.resize(static_cast<size_t>(size()));
    if (everywhere)
      CHECK_MPI(MPI_Allgather(&length, 1, MPI_INT, c.counts.data(), 1, MPI_INT,
                              comm));
    else
      CHECK_MPI(MPI_Gather(&length, 1, MPI_INT, c.counts.data(), 1, MPI_INT,
                           0, comm));
    for (int count : c.counts) {
      c.displacements.push_back(static_cast<int>(c.total));
      c.total += count;
    }
    if (c.total > INT_MAX)
      fatal("control plane: the ranks' %lld bytes are more than one MPI "
            "gather moves (%d)",
            static_cast<long long>(c.total), INT_MAX);
    return c;
  }

  static std::vector<std::string> split(const std::string &all,
                                        const Counts &c) {
    std::vector<std::string> parts;
    for (size_t r = 0; r < c.counts.size(); ++r)
      parts.push_back(all.substr(static_cast<size_t>(c.displacements[r]),
                                 static_cast<size_t>(c.counts[r])));
    return parts;
  }

  bool owned;
  MPI_Comm comm;
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
  return std::make_unique<MpiControl>(place, !initialized, comm);
}

std::string mpiThreadLevelError() {
  int provided = MPI_THREAD_SINGLE;
  CHECK_MPI(MPI_Query_thread(&provided));
  return mpiThreadLevelError(provided);
}

} // namespace autoshard::rt
