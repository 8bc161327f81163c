// Reporting an error once for the job: rank 0 speaks for every rank.
#include "driver/RankErrors.h"

#include <cstdio>

namespace autoshard::rt {

void printErrorOnRankZero(const ControlPlane &control,
                          const std::string &message) {
  bool tcp = std::string(control.kind()) == "tcp";
  if (control.rank() != 0 && !tcp)
    return;
  std::fflush(stdout);
  if (control.rank() == 0)
    std::fprintf(stderr, "error: %s\n", message.c_str());
  else
    std::fprintf(stderr, "error (rank %d): %s\n", control.rank(),
                 message.c_str());
  std::fflush(stderr);
}

bool allRanksOk(const Status &status, ControlPlane &control) {
  Status agreed = agreeOnStatus(status, control);
  if (!agreed)
    printErrorOnRankZero(control, agreed.message());
  return agreed.ok();
}

} // namespace autoshard::rt
