// A board of WaitWords (core/Control.h) over MPI point-to-point messages.
#pragma once

#include "core/Control.h"

#include <mpi.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace autoshard::rt {

/// WaitWords over MPI, for ranks whose communicator cannot say whom a
/// collective waits for: post() sends this rank's word to every other
/// rank (MPI_Isend), read() takes what has arrived (MPI_Improbe and
/// MPI_Mrecv) and keeps each rank's latest (MPI never reorders two
/// messages of one sender on one communicator and tag).
///
/// Nothing blocks: a rank that never reads its messages (it stopped or
/// died) leaves the sends to it open, and nothing waits for them; the
/// destructor frees them open (MPI completes them on its own, or the job
/// ends first). Calls from several threads are serialised by the board's
/// mutex; other threads may use MPI at the same time, so MPI must provide
/// MPI_THREAD_MULTIPLE where the board is shared (mpiThreadLevelError).
///
/// The messages travel on `comm` with `tag`, which nothing else may use;
/// the caller keeps `comm` alive for the board's lifetime (and frees it).
class MpiWordBoard final : public WaitWords {
public:
  MpiWordBoard(MPI_Comm comm, int tag);
  ~MpiWordBoard() override;
  MpiWordBoard(const MpiWordBoard &) = delete;
  MpiWordBoard &operator=(const MpiWordBoard &) = delete;

  /// Best effort: a failed send only leaves the others' view older.
  void post(const std::string &word) override;
  /// An Error when MPI fails (or has been finalised).
  Expected<std::vector<std::string>> read() override;
  const char *how() const override { return "send each other over MPI"; }

private:
  /// A word on its way, alive until every send of it has completed.
  struct Sent {
    std::unique_ptr<std::string> word;
    std::vector<MPI_Request> requests;
  };
  void forgetDelivered();

  std::mutex mutex;
  MPI_Comm comm;
  int tag;
  int rank = 0, size = 1;
  std::vector<std::string> latest; // by rank; this rank's own last post
  std::vector<Sent> outgoing;
};

} // namespace autoshard::rt
