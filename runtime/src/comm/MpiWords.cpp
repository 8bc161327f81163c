// WaitWords over MPI: see MpiWords.h.
#include "comm/MpiWords.h"

namespace autoshard::rt {

namespace {

bool mpiUsable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

std::string mpiError(int code, const char *call) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return std::string(call) + " failed: MPI error code " +
           std::to_string(code);
  return std::string(call) + " failed: " + text;
}

} // namespace

MpiWordBoard::MpiWordBoard(MPI_Comm comm, int tag) : comm(comm), tag(tag) {
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  latest.resize(static_cast<size_t>(size));
}

MpiWordBoard::~MpiWordBoard() {
  if (!mpiUsable())
    return;
  // A send that has not completed goes to a rank that has not taken it
  // (stopped, or ended first): freeing it never waits, and MPI still
  // completes it if it can. MPI_Cancel would not help: MPI 4 deprecates it
  // for sends, and OpenMPI's cannot cancel one already on its way.
  for (Sent &sent : outgoing)
    for (MPI_Request &request : sent.requests)
      if (request != MPI_REQUEST_NULL)
        MPI_Request_free(&request);
}

void MpiWordBoard::forgetDelivered() {
  for (size_t i = 0; i < outgoing.size();) {
    int done = 0;
    if (MPI_Testall(static_cast<int>(outgoing[i].requests.size()),
                    outgoing[i].requests.data(), &done,
                    MPI_STATUSES_IGNORE) == MPI_SUCCESS &&
        done)
      outgoing.erase(outgoing.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
}

void MpiWordBoard::post(const std::string &word) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!mpiUsable())
    return;
  forgetDelivered();
  latest[static_cast<size_t>(rank)] = word;
  Sent sent;
  sent.word = std::make_unique<std::string>(word);
  for (int r = 0; r < size; ++r) {
    if (r == rank)
      continue;
    MPI_Request request;
    if (MPI_Isend(sent.word->data(), static_cast<int>(sent.word->size()),
                  MPI_CHAR, r, tag, comm, &request) == MPI_SUCCESS)
      sent.requests.push_back(request);
  }
  outgoing.push_back(std::move(sent));
}

Expected<std::vector<std::string>> MpiWordBoard::read() {
  std::lock_guard<std::mutex> lock(mutex);
  if (!mpiUsable())
    return Error("the words of waiting ranks cannot be read: MPI has ended");
  while (true) {
    // A matched probe: the message found is the one received, whatever
    // other threads receive meanwhile.
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    if (int code =
            MPI_Improbe(MPI_ANY_SOURCE, tag, comm, &found, &message, &status);
        code != MPI_SUCCESS)
      return Error(mpiError(code, "MPI_Improbe"));
    if (!found)
      return latest;
    int length = 0;
    if (int code = MPI_Get_count(&status, MPI_CHAR, &length);
        code != MPI_SUCCESS)
      return Error(mpiError(code, "MPI_Get_count"));
    std::string word(static_cast<size_t>(length), '\0');
    if (int code = MPI_Mrecv(word.data(), length, MPI_CHAR, &message,
                             MPI_STATUS_IGNORE);
        code != MPI_SUCCESS)
      return Error(mpiError(code, "MPI_Mrecv"));
    if (status.MPI_SOURCE >= 0 && status.MPI_SOURCE < size &&
        status.MPI_SOURCE != rank)
      latest[static_cast<size_t>(status.MPI_SOURCE)] = std::move(word);
  }
}

} // namespace autoshard::rt
