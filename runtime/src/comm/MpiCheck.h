// CHECK_MPI: an MPI call whose failure is fatal, with file:line and MPI's text.
#pragma once

#include <mpi.h>

namespace autoshard::rt {

/// Reports a failed MPI call through fatal(): where, which call, and
/// MPI_Error_string's explanation. Only meaningful with MPI_ERRORS_RETURN
/// set (installMpiFatalHandler); otherwise MPI aborts first.
void checkMpi(int code, const char *call, const char *file, int line);

} // namespace autoshard::rt

#define CHECK_MPI(call)                                                        \
  ::autoshard::rt::checkMpi((call), #call, __FILE__, __LINE__)
