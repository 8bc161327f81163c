// Collectives over groups of ranks of the compiled device grid.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Control.h"
#include "core/Expected.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

class Device;

// ---- The grid (pure functions) ---------------------------------------------
// Ranks map to grid coordinates row-major: the last axis varies fastest, so
// on a 2x2 grid rank = 2 * c0 + c1.

std::vector<int64_t> gridCoordinates(int64_t rank,
                                     const std::vector<int64_t> &grid);
int64_t gridRank(const std::vector<int64_t> &coords,
                 const std::vector<int64_t> &grid);
/// Success when `mask` names only axes of `grid` (bit i: axis i).
Status checkGridMask(int32_t mask, const std::vector<int64_t> &grid);
/// The world ranks of `rank`'s group for `mask`: the ranks whose coordinates
/// differ from `rank`'s only along the masked axes, in increasing rank order
/// (which is row-major order over the masked axes). Mask 0 is {rank}.
std::vector<int> gridGroup(int rank, const std::vector<int64_t> &grid,
                           int32_t mask);
/// The number of ranks in every group of `mask`.
int64_t gridGroupSize(const std::vector<int64_t> &grid, int32_t mask);
/// `rank`'s position in gridGroup(rank, grid, mask): its coordinates along
/// the masked axes, read row-major. It is the index of the flat shard the
/// rank holds of a tensor sharded over those axes.
int64_t gridGroupIndex(int rank, const std::vector<int64_t> &grid,
                       int32_t mask);

// ---- Who a collective waits for (pure) -------------------------------------

/// What a waiting member knows of another member of its group at a
/// collective timeout, from the word the members send each other while
/// they wait (MpiComm).
struct PeerWord {
  enum State {
    None,      ///< no word that it reached the collective
    Here,      ///< it waits in the same collective
    Elsewhere, ///< it waits in another collective (`where`)
  };
  int rank = 0;
  State state = None;
  std::string where; ///< for Elsewhere: "all_reduce #4 over grid_axes_mask 2"
};

/// "rank 1 has not reached it; ranks 2, 3 wait in it too", "rank 1 waits
/// itself, in all_reduce #4 over grid_axes_mask 2", "every other member
/// waits in it too": what a timeout message says of the other members.
/// Empty for no members.
std::string describePeerWords(const std::vector<PeerWord> &others);

/// One rank's view of the world: its rank, the grid, and collectives over
/// the groups that grid axis masks select. The ABI functions
/// (asrt_all_reduce, ...) validate their arguments, count bytes and handle
/// groups of one before they call in here, so implementations see only
/// valid calls on groups of two or more ranks.
///
/// Every rank must issue the same collectives with the same masks in the
/// same order, as SPMD-generated code does; implementations may create
/// group communicators collectively on first use.
class Comm {
public:
  Comm(int rank, int size, std::vector<int64_t> grid);
  virtual ~Comm();
  Comm(const Comm &) = delete;
  Comm &operator=(const Comm &) = delete;

  int rank() const { return worldRank; }
  int size() const { return worldSize; }
  const std::vector<int64_t> &grid() const { return gridDims; }
  /// Ranks in this rank's group for `mask`; fatal for a mask that names an
  /// axis the grid does not have.
  int groupSize(int32_t mask) const;
  std::vector<int> groupRanks(int32_t mask) const;
  /// This rank's position in groupRanks(mask).
  int groupIndex(int32_t mask) const;

  /// recv = reduce(send) over the group; send == recv is in place. AVG is a
  /// sum divided by the group size.
  virtual void allReduce(const void *send, void *recv, int64_t count,
                         asrt_dtype dtype, asrt_reduce_op op, int32_t mask) = 0;
  /// recv (group size * sendCount elements) = the sends, in group order.
  virtual void allGather(const void *send, void *recv, int64_t sendCount,
                         asrt_dtype dtype, int32_t mask) = 0;
  /// recv = reduce of block (group rank) of every member's send, where send
  /// holds group size * recvCount elements. send == recv is in place.
  virtual void reduceScatter(const void *send, void *recv, int64_t recvCount,
                             asrt_dtype dtype, asrt_reduce_op op,
                             int32_t mask) = 0;
  /// The flat shards of abi.h over the group, whose layout is
  /// FlatShardLayout{numel, group size}. allGatherShards writes the numel
  /// elements of full from the valid part of each member's shard (padding
  /// dropped, nothing written past numel); reduceScatterShards writes the
  /// valid part of this rank's shard of the reduction of every member's
  /// full and leaves the padding to the caller. numel >= 1.
  virtual void allGatherShards(const void *shard, void *full, int64_t numel,
                               asrt_dtype dtype, int32_t mask) = 0;
  virtual void reduceScatterShards(const void *full, void *shard, int64_t numel,
                                   asrt_dtype dtype, asrt_reduce_op op,
                                   int32_t mask) = 0;
  /// Waits for every rank of the world.
  virtual void barrier() = 0;

  /// Which other member(s) the collective running now waits for, as far
  /// as this communicator can know ("receiving ring step 1 from rank 2
  /// (its ring predecessor), nothing of which has arrived: rank 2 has not
  /// reached it"), or what it cannot know; a timeout message adds it to
  /// the group's members. Called on another thread than the collective's
  /// (the main thread, at a collective timeout), while it runs. Empty: the
  /// communicator says nothing (the default).
  virtual std::string describeWait() const { return ""; }

private:
  int worldRank;
  int worldSize;
  std::vector<int64_t> gridDims;
};

/// AVG in a Comm that reduces in host memory (MPI, Gloo): SUM followed by
/// this division of `count` elements of `buffer` by the group's size `n`,
/// in float for both float types (f32, bf16).
void divideByGroup(void *buffer, int64_t count, asrt_dtype dtype, int n);

/// Makes runtime errors end the whole MPI job: MPI calls on the world
/// return errors instead of aborting silently (MPI_ERRORS_RETURN, so
/// CHECK_MPI can print them), and fatal() names this rank and calls
/// MPI_Abort. Needs MPI initialised; idempotent.
void installMpiFatalHandler();

/// A Comm over MPI_COMM_WORLD arranged as `grid`. Needs MPI initialised
/// with MPI_THREAD_MULTIPLE and the product of `grid` equal to the world
/// size (fatal otherwise; the driver checks first and explains). Destroy it
/// before MPI_Finalize, and after the contexts that use it.
/// `collectiveTimeoutSeconds` (0: none) paces the word that waiting ranks
/// send each other so that a timeout can name the member that is missing
/// (MpiComm::describeWait).
std::unique_ptr<Comm> createMpiComm(const std::vector<int64_t> &grid,
                                    double collectiveTimeoutSeconds = 0);

/// `inner` over device memory it cannot read (a GPU's, for an MPI that is
/// not CUDA-aware): every collective copies its input to host memory on
/// the communication lane of `device`, runs `inner` there and copies the
/// result back. A fallback, two copies per collective; `device` must
/// outlive the calls (not the object: destroying it touches no device).
std::unique_ptr<Comm> stageThroughHost(std::unique_ptr<Comm> inner,
                                       Device &device);

/// The control plane of a job mpirun launched: initialises MPI (with
/// MPI_THREAD_MULTIPLE) unless the caller did, and finalises it when
/// destroyed (after everything else that uses MPI); installs the fatal
/// handler (installMpiFatalHandler). The node placement comes from MPI.
std::unique_ptr<ControlPlane> createMpiControl(int *argc, char ***argv);
/// mpiThreadLevelError of the initialised MPI's level.
std::string mpiThreadLevelError();

/// Empty when MPI's thread level `provided` (MPI_Query_thread) suffices:
/// MPI_THREAD_MULTIPLE, since collectives run on a communication thread
/// while the main thread may call MPI too (MPI_Abort on a timeout).
/// Otherwise the error, naming the level found.
std::string mpiThreadLevelError(int provided);

} // namespace autoshard::rt
