// Comm over NCCL: one communicator per grid axis mask, split from the world.
#pragma once

#include "comm/Comm.h"
#include "core/Control.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoshard::rt {

class Device;

/// How long createNcclComm waits for every rank to join the world
/// communicator, and the destructor for the peers to finish with it,
/// before it aborts (CommStream's default collective timeout).
constexpr double kNcclSetupTimeoutSeconds = 300.0;

/// A fresh ncclUniqueId as its NCCL_UNIQUE_ID_BYTES raw bytes. Rank 0 makes
/// one and sends it to every rank (MPI_Bcast, TcpGroup::broadcast) before
/// they all call createNcclComm with it. Fatal when NCCL fails.
std::string ncclUniqueIdBytes();

/// A Comm over NCCL for the world of `size` ranks arranged as `grid` (its
/// product is `size`; fatal otherwise), this process being `rank`.
///
/// Call it on every rank at once, with the GPU of this rank current
/// (cudaSetDevice: one GPU per process), the same `uniqueIdBytes`
/// (ncclUniqueIdBytes of rank 0), `stream` = the stream of `device`'s
/// Lane::Comm, and `device` the context's device, which must outlive the
/// Comm. It creates the world communicator (ncclCommInitRankConfig), fatal
/// when not every rank has joined within `setupTimeoutSeconds` (0: no
/// bound). The communicator of a group other than the world is split from
/// the world (ncclCommSplit) at the group's first collective, which every
/// rank reaches in the same order (Comm's contract), as MpiComm does.
///
/// Each collective enqueues on `stream` (NCCL's collective, and any copies
/// of the padded shard layout through `device` on Lane::Comm) and returns
/// once the stream has run it, so that, as with MpiComm, the result is in
/// memory when the call returns; it polls the stream and NCCL's
/// asynchronous error meanwhile, sleeping briefly between polls. A
/// collective NCCL reports failed (a peer that died, a network error)
/// aborts every communicator and is fatal, naming the collective, the
/// group and NCCL's error. Communicators are nonblocking (NCCL's
/// config.blocking = 0), so no NCCL call blocks the calling thread and
/// abortNcclComms can always end a hung one.
///
/// dtypes: f32, bf16, f16, i32 and i64 are reduced (SUM, AVG as ncclAvg,
/// MAX, MIN); gathers move any dtype, u16 included, as bytes. The flat
/// shard collectives use NCCL's equal blocks on the padded layout, staged
/// through a device buffer of n k elements when the tensor needs padding
/// (grow-only, released by the destructor). Methods are called from one
/// thread at a time (the context's communication thread), barrier too.
///
/// NCCL cannot say which member a hung collective waits for. With `words`
/// (ControlPlane::waitWords: the job's store under a torchrun-style
/// launch, MPI messages under mpirun) a collective that has waited a quarter of
/// `collectiveTimeoutSeconds` posts that this rank waits in it, so that
/// the timeout message (Comm::describeWait) can name the members that have
/// not reached it, as MpiComm's words do. Without either, it says it
/// cannot.
std::unique_ptr<Comm>
createNcclComm(int rank, int size, std::vector<int64_t> grid,
               const std::string &uniqueIdBytes, cudaStream_t stream,
               Device &device,
               double setupTimeoutSeconds = kNcclSetupTimeoutSeconds,
               std::unique_ptr<WaitWords> words = nullptr,
               double collectiveTimeoutSeconds = 0);

/// Aborts every communicator of every NCCL Comm of this process
/// (ncclCommAbort, the one in-flight collective's communicator first), from
/// any thread: what the collective timeout calls, on the main thread, when
/// the communication thread is stuck in a collective a dead or hung peer
/// never completes. The stuck collective then returns to its thread, which
/// reports it aborted (fatal). Idempotent. Made for fatal()'s hooks: it
/// waits at most a few seconds for a communication thread that is inside a
/// NCCL call (those return at once on nonblocking communicators) and
/// otherwise leaves that Comm alone. An aborted Comm's collectives are
/// fatal; destroying it is still fine.
void abortNcclComms();

} // namespace autoshard::rt
