// The driver's side of offload: the NVMe store and host views of arguments.
#pragma once

#include "core/Expected.h"
#include "core/Manifest.h"
#include "core/NvmeStore.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autoshard::rt {

/// A step with memory=nvme arguments needs --offload-dir: the error says
/// how many tensors and bytes per rank it keeps there. Every rank reaches
/// the same verdict (manifest and command line).
Status checkOffloadDirGiven(const Manifest &manifest,
                            const std::string &offloadDir);

/// The NVMe store of this rank under `offloadDir`, or null when the step
/// has no memory=nvme arguments (then `offloadDir` is not looked at). The
/// files themselves are added as the driver initialises the arguments.
/// Errors ("--offload-dir: 'DIR' does not exist (...)") name the directory
/// and the system's reason; they may differ between ranks (a node without
/// the directory).
Expected<std::unique_ptr<NvmeStore>>
openNvmeStore(const Manifest &manifest, const std::string &offloadDir,
              int rank);

/// The arguments as host buffers, for the driver's code that reads or
/// writes them whole between steps (checkpoints, --load-params,
/// --save-params): memory=nvme arguments have no buffer (null in `args`),
/// so each one (of role `role`, or of every role) is read from its file
/// into a temporary host buffer that takes the null's place; writeBack()
/// stores them in their files again after a load. Device and host
/// arguments are passed through as they are.
///
/// Simple rather than frugal: every staged argument is in host memory at
/// once while the object lives, outside the host memory statistics. An I/O
/// error is fatal, naming the file.
class StagedNvmeArgs {
public:
  /// `store` null: nothing is staged and args() is `args`.
  StagedNvmeArgs(const Manifest &manifest, const std::vector<void *> &args,
                 NvmeStore *store, std::optional<Role> role = std::nullopt);
  StagedNvmeArgs(const StagedNvmeArgs &) = delete;
  StagedNvmeArgs &operator=(const StagedNvmeArgs &) = delete;

  /// Indexed like the manifest's arguments.
  const std::vector<void *> &args() const { return view; }
  /// Writes every staged buffer back to its file.
  void writeBack();
  /// The number of arguments staged.
  size_t size() const { return staged.size(); }

private:
  NvmeStore *store;
  std::vector<void *> view;
  std::vector<std::pair<int, std::vector<char>>> staged;
};

} // namespace autoshard::rt
