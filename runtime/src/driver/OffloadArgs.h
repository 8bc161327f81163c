// The driver's side of offload: the NVMe store and host views of arguments.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Expected.h"
#include "io/Manifest.h"
#include "memory/NvmeStore.h"

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

/// What a StagedArgs does with device arguments on a device that is not
/// host memory: host copies of their current values (ReadWrite), host
/// buffers the caller overwrites whole (WriteOnly: batches), or nothing,
/// leaving them in device memory (NvmeOnly: for code that reads device
/// memory itself).
enum class Staging { ReadWrite, WriteOnly, NvmeOnly };

/// The arguments as host buffers, for the driver's code that reads or
/// writes them between steps (initialisation, batches, checkpoints,
/// --load-params, --save-params):
/// - memory=nvme arguments have no buffer (null in `args`): each one is
///   read from its file (ctx.nvme()) into a host buffer that takes the
///   null's place;
/// - memory=device arguments, when the context's device is not host
///   memory (a GPU), are copied into host buffers (Staging::ReadWrite) or
///   get uninitialised ones (WriteOnly);
/// - memory=host arguments, and device ones on the CPU backend, pass
///   through as they are.
/// writeBack() stores the host buffers where they came from. Only
/// arguments of the `roles` are staged when some are given.
///
/// Simple rather than frugal: every staged argument is in host memory at
/// once while the object lives, outside the memory statistics. An I/O
/// error is fatal, naming the file. The buffers are reused by every
/// writeBack, so one object can carry a batch per step.
class StagedArgs {
public:
  StagedArgs(asrt_context &ctx, const Manifest &manifest,
             const std::vector<void *> &args,
             const std::vector<Role> &roles = {},
             Staging staging = Staging::ReadWrite);
  StagedArgs(const StagedArgs &) = delete;
  StagedArgs &operator=(const StagedArgs &) = delete;

  /// Indexed like the manifest's arguments.
  const std::vector<void *> &args() const { return view; }
  /// Stores every staged buffer in its file or device buffer again.
  void writeBack();
  /// The number of arguments staged.
  size_t size() const { return staged.size(); }

private:
  struct Staged {
    int index;
    MemoryKind memory;
    std::vector<char> bytes;
  };
  asrt_context &ctx;
  std::vector<void *> device;
  std::vector<void *> view;
  std::vector<Staged> staged;
};

} // namespace autoshard::rt
