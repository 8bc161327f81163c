// Reporting an error once for the job: rank 0 speaks for every rank.
#pragma once

#include "core/Control.h"
#include "core/Expected.h"

#include <string>

namespace autoshard::rt {

/// Prints on rank 0 only under mpirun, which gathers every rank's output
/// into one stream; every rank reaches the same conclusion from the same
/// inputs (command line, manifest, world size). A torchrun-style launch
/// may keep each rank's output apart (torchrun --log-dir), so there every
/// rank says why it stops, the others naming their rank.
void printErrorOnRankZero(const ControlPlane &control,
                          const std::string &message);

/// Collective: true when `status` is ok on every rank. Otherwise rank 0
/// prints the error of the lowest failing rank, so a failure that every
/// rank shares (a missing file) is printed once, yet one that only some
/// rank hits (a file missing on one node) is neither lost nor left to hang
/// the others.
bool allRanksOk(const Status &status, ControlPlane &control);

} // namespace autoshard::rt
