// The emulated NCCL (src/nccl/emu) against NCCL's rules, through nccl.h
// directly: ranks as threads on the emulator's GPUs. What NcclComm relies
// on (nonblocking setup reported through ncclCommGetAsyncError, a
// collective that is not ready on its stream until done, a peer that
// aborts making its neighbour's collective a remote error) and what the
// emulator checks more strictly than NCCL (device buffers, overlaps, the
// same calls on every rank, one GPU per rank).
#include "EmuState.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

/// One rank: its GPU, stream and communicator.
struct Rank {
  int device = 0;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
};

/// Polls until `comm` leaves ncclInProgress (at most 20 s); its state.
ncclResult_t settle(ncclComm_t comm) {
  auto deadline = Clock::now() + std::chrono::seconds(20);
  ncclResult_t state = ncclInProgress;
  while (Clock::now() < deadline) {
    EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    if (state != ncclInProgress)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

/// Polls until `comm` reports an error (at most 20 s), as a caller waiting
/// for its stream watches it; the error, or ncclSuccess if none came.
ncclResult_t awaitError(ncclComm_t comm) {
  auto deadline = Clock::now() + std::chrono::seconds(20);
  ncclResult_t state = ncclSuccess;
  while (Clock::now() < deadline) {
    EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    if (state != ncclSuccess && state != ncclInProgress)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

/// Creates `n` nonblocking communicators, rank r on GPU devices[r].
std::vector<Rank> makeRanks(int n, std::vector<int> devices = {}) {
  if (devices.empty())
    for (int r = 0; r < n; ++r)
      devices.push_back(r);
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<Rank> ranks(n);
  for (int r = 0; r < n; ++r) {
    ranks[r].device = devices[r];
    EXPECT_EQ(cudaSetDevice(devices[r]), cudaSuccess);
    // Non-blocking, as the backend's: a synchronous copy on the legacy
    // stream would wait for a collective queued on a blocking stream,
    // which waits for its peers (a deadlock, on a GPU too).
    EXPECT_EQ(
        cudaStreamCreateWithFlags(&ranks[r].stream, cudaStreamNonBlocking),
        cudaSuccess);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t result =
        ncclCommInitRankConfig(&ranks[r].comm, n, id, r, &config);
    EXPECT_TRUE(result == ncclSuccess || result == ncclInProgress);
  }
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  return ranks;
}

void destroy(std::vector<Rank> &ranks) {
  for (Rank &r : ranks) {
    if (r.comm)
      EXPECT_EQ(ncclCommAbort(r.comm), ncclSuccess);
    EXPECT_EQ(cudaStreamDestroy(r.stream), cudaSuccess);
  }
}

float *deviceFloats(const std::vector<float> &values) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, values.size() * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, values.data(), values.size() * sizeof(float),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<float *>(p);
}

std::string lastError() { return ncclGetLastError(nullptr); }

TEST(NcclEmulatorTest, NonblockingSetupAndACollectiveOnItsStream) {
  std::vector<Rank> ranks = makeRanks(3);
  for (Rank &r : ranks)
    ASSERT_EQ(settle(r.comm), ncclSuccess) << lastError();
  std::vector<float *> buffers;
  for (int r = 0; r < 3; ++r) {
    buffers.push_back(deviceFloats({float(r), float(10 * r)}));
    ASSERT_EQ(ncclAllReduce(buffers[r], buffers[r], 2, ncclFloat32, ncclSum,
                            ranks[r].comm, ranks[r].stream),
              ncclSuccess);
  }
  // Queued, not run: nothing happens until the streams are waited for.
  std::vector<std::thread> waiters;
  for (int r = 0; r < 3; ++r)
    waiters.emplace_back([&, r] {
      while (cudaStreamQuery(ranks[r].stream) == cudaErrorNotReady)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      EXPECT_EQ(cudaStreamQuery(ranks[r].stream), cudaSuccess);
    });
  for (std::thread &t : waiters)
    t.join();
  for (float *b : buffers) {
    float out[2];
    ASSERT_EQ(cudaMemcpy(out, b, sizeof out, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(out[0], 3.0f);
    EXPECT_EQ(out[1], 30.0f);
    EXPECT_EQ(cudaFree(b), cudaSuccess);
  }
  int count = 0, rank = -1;
  EXPECT_EQ(ncclCommCount(ranks[2].comm, &count), ncclSuccess);
  EXPECT_EQ(ncclCommUserRank(ranks[2].comm, &rank), ncclSuccess);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(rank, 2);
  // Finalize is collective; then destroy is local.
  for (Rank &r : ranks)
    EXPECT_EQ(ncclCommFinalize(r.comm), ncclInProgress);
  for (Rank &r : ranks)
    EXPECT_EQ(settle(r.comm), ncclSuccess) << lastError();
  for (Rank &r : ranks) {
    EXPECT_EQ(ncclCommDestroy(r.comm), ncclSuccess);
    r.comm = nullptr;
  }
  destroy(ranks);
}

TEST(NcclEmulatorTest, APeerThatAbortsIsARemoteErrorAndTheStreamWaitsForAnAbort) {
  std::vector<Rank> ranks = makeRanks(2);
  for (Rank &r : ranks)
    ASSERT_EQ(settle(r.comm), ncclSuccess) << lastError();
  float *mine = deviceFloats({1, 2, 3, 4});
  ASSERT_EQ(ncclAllReduce(mine, mine, 4, ncclFloat32, ncclSum, ranks[0].comm,
                          ranks[0].stream),
            ncclSuccess);
  EXPECT_EQ(cudaStreamQuery(ranks[0].stream), cudaErrorNotReady);
  // Rank 1 aborts instead of joining: rank 0 learns of it from the ring.
  ASSERT_EQ(ncclCommAbort(ranks[1].comm), ncclSuccess);
  ranks[1].comm = nullptr;
  EXPECT_EQ(awaitError(ranks[0].comm), ncclRemoteError);
  EXPECT_NE(lastError().find("rank 0 lost its connection to its ring"),
            std::string::npos)
      << lastError();
  EXPECT_NE(lastError().find("ncclAllReduce #0"), std::string::npos);
  // The collective stays unfinished, as a NCCL kernel waiting for a peer,
  // until its communicator is aborted.
  EXPECT_EQ(cudaStreamQuery(ranks[0].stream), cudaErrorNotReady);
  ASSERT_EQ(ncclCommAbort(ranks[0].comm), ncclSuccess);
  ranks[0].comm = nullptr;
  EXPECT_EQ(cudaStreamSynchronize(ranks[0].stream), cudaSuccess);
  // An aborted communicator is no longer a communicator.
  ncclResult_t state;
  EXPECT_EQ(ncclCommGetAsyncError(ranks[1].comm, &state), ncclInvalidArgument);
  EXPECT_EQ(cudaFree(mine), cudaSuccess);
  destroy(ranks);
}

TEST(NcclEmulatorTest, RanksCallingDifferentCollectivesAreInvalidUsage) {
  std::vector<Rank> ranks = makeRanks(2);
  for (Rank &r : ranks)
    ASSERT_EQ(settle(r.comm), ncclSuccess) << lastError();
  float *a = deviceFloats({1, 2, 3, 4, 5});
  float *b = deviceFloats({1, 2, 3, 4, 5});
  ASSERT_EQ(ncclAllReduce(a, a, 4, ncclFloat32, ncclSum, ranks[0].comm,
                          ranks[0].stream),
            ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b, b, 5, ncclFloat32, ncclSum, ranks[1].comm,
                          ranks[1].stream),
            ncclSuccess);
  for (Rank &r : ranks)
    (void)cudaStreamQuery(r.stream); // starts each collective
  EXPECT_EQ(awaitError(ranks[0].comm), ncclInvalidUsage);
  EXPECT_EQ(awaitError(ranks[1].comm), ncclInvalidUsage);
  std::string why = lastError();
  EXPECT_NE(why.find("count 4"), std::string::npos) << why;
  EXPECT_NE(why.find("count 5"), std::string::npos) << why;
  destroy(ranks);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(b), cudaSuccess);
}

TEST(NcclEmulatorTest, TwoRanksOnOneGpuAreRefused) {
  std::vector<Rank> ranks = makeRanks(2, {1, 1});
  for (Rank &r : ranks)
    EXPECT_EQ(settle(r.comm), ncclInvalidUsage);
  EXPECT_NE(lastError().find("duplicate GPU detected: ranks 0 and 1"),
            std::string::npos)
      << lastError();
  destroy(ranks);
}

/// Starts rank `rank` of `nranks` on GPU `device` with `id`, nonblocking.
ncclComm_t startRank(const ncclUniqueId &id, int nranks, int rank, int device) {
  EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t result =
      ncclCommInitRankConfig(&comm, nranks, id, rank, &config);
  EXPECT_TRUE(result == ncclSuccess || result == ncclInProgress) << lastError();
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  return comm;
}

// The ranks meet in the unique id's store: ranks that disagree on the
// communicator's size are refused, each of them, with the reason.
TEST(NcclEmulatorTest, RanksThatDisagreeOnTheSizeAreRefused) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t a = startRank(id, 2, 0, 0);
  ncclComm_t b = startRank(id, 3, 1, 1);
  EXPECT_EQ(settle(a), ncclInvalidUsage);
  EXPECT_EQ(settle(b), ncclInvalidUsage);
  EXPECT_NE(lastError().find("could not join: ranks disagree on the "
                             "communicator's size: rank 0 says 2, rank 1 "
                             "says 3"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(ncclCommAbort(a), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(b), ncclSuccess);
}

TEST(NcclEmulatorTest, TwoRanksClaimingOneRankAreRefused) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t a = startRank(id, 2, 0, 0);
  ncclComm_t b = startRank(id, 2, 0, 1);
  EXPECT_EQ(settle(a), ncclInvalidUsage);
  EXPECT_EQ(settle(b), ncclInvalidUsage);
  EXPECT_NE(lastError().find("could not join: two ranks joined as rank 0"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(ncclCommAbort(a), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(b), ncclSuccess);
}

// A communicator aborted while it waits for the others to join ends at
// once (its wait in the store is woken), and the members already waiting
// hear that it gave up instead of waiting for it for ever.
TEST(NcclEmulatorTest, ARankAbortedWhileJoiningEndsAtOnceAndTellsTheOthers) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  // Rank 2 never comes.
  ncclComm_t a = startRank(id, 3, 0, 0);
  ncclComm_t b = startRank(id, 3, 1, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(b, &state), ncclSuccess);
  EXPECT_EQ(state, ncclInProgress);
  auto start = Clock::now();
  EXPECT_EQ(ncclCommAbort(b), ncclSuccess);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(settle(a), ncclRemoteError);
  EXPECT_NE(lastError().find("rank 0 could not join: rank 1's communicator "
                             "was aborted while it joined (ncclCommAbort)"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(ncclCommAbort(a), ncclSuccess);
}

// The process that made the id hosts its store until every member has
// joined, however late, and not after: a rank that comes once the
// communicator has formed finds nobody there and says so within the
// connect patience (10 s), rather than hanging or joining a finished one.
TEST(NcclEmulatorTest, TheIdsStoreServesLateRanksAndStopsOnceAllJoined) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t a = startRank(id, 2, 0, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ncclComm_t b = startRank(id, 2, 1, 1);
  EXPECT_EQ(settle(a), ncclSuccess) << lastError();
  EXPECT_EQ(settle(b), ncclSuccess) << lastError();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto start = Clock::now();
  ncclComm_t late = startRank(id, 2, 1, 2);
  EXPECT_EQ(settle(late), ncclSystemError);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(15));
  EXPECT_NE(lastError().find("rank 1 could not join: store: rank 1 could not "
                             "reach the store at 127.0.0.1:"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(ncclCommAbort(late), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(a), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(b), ncclSuccess);
}

TEST(NcclEmulatorTest, BuffersMustBeDeviceMemoryOverlappingOnlyInPlace) {
  std::vector<Rank> ranks = makeRanks(1);
  ASSERT_EQ(settle(ranks[0].comm), ncclSuccess) << lastError();
  std::vector<float> host(4);
  float *device = deviceFloats({1, 2, 3, 4});
  EXPECT_EQ(ncclAllReduce(host.data(), device, 4, ncclFloat32, ncclSum,
                          ranks[0].comm, ranks[0].stream),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("is not device memory of 16 bytes"),
            std::string::npos)
      << lastError();
  // Past the allocation's end.
  EXPECT_EQ(ncclAllReduce(device, device, 5, ncclFloat32, ncclSum,
                          ranks[0].comm, ranks[0].stream),
            ncclInvalidArgument);
  // Overlapping, but not in place.
  EXPECT_EQ(ncclAllReduce(device, device + 1, 2, ncclFloat32, ncclSum,
                          ranks[0].comm, ranks[0].stream),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("overlap other than in place"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(ncclAllReduce(device, device, 4, ncclFloat8e4m3, ncclSum,
                          ranks[0].comm, ranks[0].stream),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(device, device, 4, ncclFloat32, ncclRedOp_t(9),
                          ranks[0].comm, ranks[0].stream),
            ncclInvalidArgument);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  destroy(ranks);
}

TEST(NcclEmulatorTest, SplitGroupsAndNoColor) {
  std::vector<Rank> ranks = makeRanks(3);
  for (Rank &r : ranks)
    ASSERT_EQ(settle(r.comm), ncclSuccess) << lastError();
  // Ranks 0 and 2 in one group, keyed in reverse; rank 1 in none.
  std::vector<ncclComm_t> children(3, nullptr);
  const int colors[] = {5, NCCL_SPLIT_NOCOLOR, 5};
  const int keys[] = {1, 0, 0};
  for (int r = 0; r < 3; ++r)
    ASSERT_EQ(ncclCommSplit(ranks[r].comm, colors[r], keys[r], &children[r],
                            nullptr),
              ncclInProgress);
  for (Rank &r : ranks)
    ASSERT_EQ(settle(r.comm), ncclSuccess) << lastError();
  EXPECT_EQ(children[1], nullptr);
  ASSERT_NE(children[0], nullptr);
  ASSERT_NE(children[2], nullptr);
  int rank0 = -1, rank2 = -1;
  EXPECT_EQ(ncclCommUserRank(children[0], &rank0), ncclSuccess);
  EXPECT_EQ(ncclCommUserRank(children[2], &rank2), ncclSuccess);
  EXPECT_EQ(rank0, 1);
  EXPECT_EQ(rank2, 0);
  for (int r : {0, 2})
    EXPECT_EQ(ncclCommAbort(children[r]), ncclSuccess);
  destroy(ranks);
}

TEST(NcclEmulatorTest, BadArgumentsAreRefusedByName) {
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("ncclGetVersion: null"), std::string::npos)
      << lastError();
  EXPECT_EQ(ncclGetUniqueId(nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("null id"), std::string::npos) << lastError();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_EQ(ncclCommInitRankConfig(nullptr, 1, id, 0, nullptr),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("null comm"), std::string::npos) << lastError();
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 2, id, 2, nullptr),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("rank 2 of 2 ranks is not in 0..nranks-1"),
            std::string::npos)
      << lastError();
  ncclUniqueId forged;
  std::memset(&forged, 0x5a, sizeof forged);
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, forged, 0, nullptr),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("not one ncclGetUniqueId made"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(comm, nullptr);

  std::vector<Rank> ranks = makeRanks(1);
  ASSERT_EQ(settle(ranks[0].comm), ncclSuccess) << lastError();
  ncclComm_t child = nullptr;
  EXPECT_EQ(ncclCommSplit(ranks[0].comm, 0, 0, nullptr, nullptr),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("null newcomm"), std::string::npos)
      << lastError();
  EXPECT_EQ(ncclCommSplit(ranks[0].comm, -2, 0, &child, nullptr),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("color -2 is negative (and not "
                             "NCCL_SPLIT_NOCOLOR)"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(child, nullptr);
  // Neither refusal touched the communicator.
  ncclResult_t state = ncclInProgress;
  EXPECT_EQ(ncclCommGetAsyncError(ranks[0].comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclSuccess);
  int count = 0;
  EXPECT_EQ(ncclCommCount(ranks[0].comm, &count), ncclSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(ncclCommCount(ranks[0].comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("null count"), std::string::npos) << lastError();
  EXPECT_EQ(ncclCommUserRank(ranks[0].comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommGetAsyncError(ranks[0].comm, nullptr),
            ncclInvalidArgument);
  destroy(ranks);
  // A destroyed communicator is no live one.
  EXPECT_EQ(ncclCommCount(ranks[0].comm, &count), ncclInvalidArgument);
  EXPECT_NE(lastError().find("not a live communicator"), std::string::npos)
      << lastError();
}

} // namespace
