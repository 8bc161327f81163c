// The training binary's hooks, checks and messages, and how it joins its
// job; its run is driver/Trainer.h's.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Backend.h"
#include "core/Control.h"
#include "io/Manifest.h"
#include "driver/Options.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace autoshard::rt {

/// What the driver runs (runDriver, driver/Trainer.h): the compiled step
/// and the linked backend. main() fills it from autoshard_manifest,
/// autoshard_step, initBackend and backendName; keeping those symbols out of the driver proper lets tests
/// link it without a compiled step.
struct DriverHooks {
  const char *manifest = nullptr;
  void (*step)(asrt_context *, void *const *, void *const *) = nullptr;
  /// The evaluation step (shard-compile --with-eval) and its manifest; null
  /// in a binary without one.
  const char *evalManifest = nullptr;
  void (*evalStep)(asrt_context *, void *const *, void *const *) = nullptr;
  void (*initBackend)(asrt_context *, const BackendOptions &) = nullptr;
  const char *(*backendName)() = nullptr;
  std::unique_ptr<Comm> (*createComm)(asrt_context *, ControlPlane &,
                                      const std::vector<int64_t> &) = nullptr;
  /// The backend's measured GEMM peak (measurePeakFlopPerS), which the
  /// step lines' MFU is against without --device-spec; null: none.
  double (*measurePeakFlopPerS)(const BackendOptions &,
                                std::string &) = nullptr;
};

/// How this process joins its job, from how it was started: under mpirun
/// (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK set) MPI; with
/// torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
/// LOCAL_RANK, LOCAL_WORLD_SIZE) a TCP rendezvous through rank 0, so that a
/// GPU job needs no MPI; otherwise MPI as a singleton when the runtime was
/// built with MPI, else a single process. The error names a malformed
/// variable, or a job that needs MPI in a runtime built without it.
Expected<std::unique_ptr<ControlPlane>> launchControl(int *argc, char ***argv);

/// The error for a binary started on the wrong number of ranks: what it was
/// compiled for, what it got, and the two ways out.
/// `launcher` is the control plane's kind: "tcp" names torchrun's
/// variables, anything else mpirun.
std::string worldSizeMismatchMessage(const Manifest &manifest, int worldSize,
                                     std::string_view launcher = "mpi");

/// The error for a step whose loss is NaN or infinite: the step, the
/// loss, what is kept (`newestCheckpoint`: the step of the newest
/// checkpoint written or resumed from, -1 if none; all of them are kept),
/// and to go on with a lower --lr. A checkpoint of the step before holds
/// the state that gave this loss, so it is not called good. An evaluation
/// step (`evaluation`: it updates nothing) trained nothing: the error
/// points at the parameters it was given instead.
/// `what` names the figure: "loss", or "gradient norm" for a step whose
/// gradients overflowed.
std::string nonFiniteLossMessage(int64_t step, double loss,
                                 const Options &options,
                                 int64_t newestCheckpoint,
                                 bool evaluation = false,
                                 const char *what = "loss");

/// For each argument of a training binary's evaluation step (manifest
/// `eval`), the training step's argument whose buffer it reads: a
/// parameter's index, by name, or -1 for its own arguments (its batch, its
/// hypers). The error names a parameter the training step lacks or holds
/// otherwise (dtype, shape, shard, memory place), or a different grid.
Expected<std::vector<int>> evaluationParamSources(const Manifest &train,
                                                  const Manifest &eval);

/// Whether --lr (or `flag`, which sets it too) can apply: the step needs a
/// hyper named `lr` holding one float. The error lists the hypers the step
/// does have.
Status checkLrOverride(const Manifest &manifest, const char *flag = "--lr");

/// The peak learning rate of a schedule: --lr, or the constant the step's
/// hyper `lr` starts at; and that it is at least --min-lr. The error says
/// which to give.
Expected<double> scheduledPeakLr(const Manifest &manifest,
                                 const Options &options);

} // namespace autoshard::rt
