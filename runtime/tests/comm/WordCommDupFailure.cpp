// A failed MPI_Comm_dup of the word communicator (the one the words of
// waiting ranks travel on, MpiWordBoard) is fatal, naming the call and
// MPI's reason. Provoked for real, not mocked: the program first uses up
// MPI's communicator ids (Open MPI 4 has 65532 besides the predefined
// ones), then gives one back, so that the world's private duplicate gets
// it and the word communicator's duplicate is the call that fails. Run as
// `WordCommDupFailure comm` (createMpiComm) or `... control`
// (createMpiControl) under mpirun -np 1.
#include "comm/Comm.h"

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <vector>

using namespace autoshard::rt;

int main(int argc, char **argv) {
  if (argc != 2 || (std::strcmp(argv[1], "comm") != 0 &&
                    std::strcmp(argv[1], "control") != 0)) {
    std::fprintf(stderr, "usage: %s comm|control\n", argv[0]);
    return 2;
  }
  const bool control = std::strcmp(argv[1], "control") == 0;
  int level = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // An MPI whose ids do not run out within this many cannot show it.
  constexpr size_t kMostCommunicators = size_t(1) << 17;
  std::vector<MPI_Comm> taken;
  MPI_Comm comm;
  while (taken.size() < kMostCommunicators &&
         MPI_Comm_dup(MPI_COMM_WORLD, &comm) == MPI_SUCCESS)
    taken.push_back(comm);
  if (taken.empty() || taken.size() == kMostCommunicators) {
    std::printf("SKIPPED: this MPI's communicator ids did not run out "
                "after %zu duplicates\n",
                taken.size());
    MPI_Finalize();
    return 0;
  }
  std::printf("communicator ids ran out after %zu duplicates\n", taken.size());
  std::fflush(stdout);
  // The one id given back goes to the first duplicate (createMpiControl's
  // node split takes it first and frees it again).
  MPI_Comm_free(&taken.back());
  taken.pop_back();
  if (control)
    (void)createMpiControl(&argc, &argv);
  else
    (void)createMpiComm({1}, 10.0);
  std::printf("NOT FATAL: the word communicator was created\n");
  return 1;
}
