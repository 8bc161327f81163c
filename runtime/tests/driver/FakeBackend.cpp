// The backend hooks of the fake training binaries: host memory, MPI's
// collectives, nothing to initialise. The steps are hand-written C++.
#include "comm/Comm.h"
#include "core/Backend.h"

namespace autoshard::rt {

void initBackend(asrt_context *, const BackendOptions &) {}

const char *backendName() { return "fake"; }

// The fake steps count no FLOPs, so no peak is needed.
double measurePeakFlopPerS(const BackendOptions &, std::string &what) {
  what.clear();
  return 0;
}

std::unique_ptr<Comm> createBackendComm(asrt_context *, ControlPlane &,
                                        const std::vector<int64_t> &) {
  return nullptr;
}

} // namespace autoshard::rt
