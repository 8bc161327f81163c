// The driver's side of offload: the NVMe store and host views of arguments.
#include "driver/OffloadArgs.h"
#include "core/Context.h"

namespace autoshard::rt {

Status checkOffloadDirGiven(const Manifest &manifest,
                            const std::string &offloadDir) {
  int tensors = manifest.countArgsIn(MemoryKind::Nvme);
  if (tensors == 0 || !offloadDir.empty())
    return Status::success();
  return Error("this binary keeps " + std::to_string(tensors) +
               (tensors == 1 ? " tensor (" : " tensors (") +
               std::to_string(manifest.argBytesIn(MemoryKind::Nvme)) +
               " bytes per rank) in NVMe files: pass --offload-dir DIR, a "
               "directory on a fast local disk");
}

Expected<std::unique_ptr<NvmeStore>>
openNvmeStore(const Manifest &manifest, const std::string &offloadDir,
              int rank) {
  if (manifest.countArgsIn(MemoryKind::Nvme) == 0)
    return std::unique_ptr<NvmeStore>();
  Expected<std::unique_ptr<NvmeStore>> store =
      NvmeStore::create(offloadDir, rank);
  if (!store)
    return Error("--offload-dir: " + store.message());
  return store;
}

StagedNvmeArgs::StagedNvmeArgs(const Manifest &manifest,
                               const std::vector<void *> &args,
                               NvmeStore *store, std::optional<Role> role)
    : store(store), view(args) {
  if (!store)
    return;
  for (const TensorSpec &arg : manifest.args) {
    if (arg.memory != MemoryKind::Nvme || (role && arg.role != *role))
      continue;
    std::vector<char> &buffer =
        staged.emplace_back(arg.index, std::vector<char>()).second;
    buffer.resize(static_cast<size_t>(arg.numBytes()));
    if (Status s = store->read(arg.index, buffer.data(), arg.numBytes()); !s)
      fatal("reading the NVMe file of %s: %s", arg.describe().c_str(),
            s.message().c_str());
    view[arg.index] = buffer.data();
  }
}

void StagedNvmeArgs::writeBack() {
  for (auto &[index, buffer] : staged)
    if (Status s = store->write(index, buffer.data(),
                                static_cast<int64_t>(buffer.size()));
        !s)
      fatal("writing the NVMe file of argument %d: %s", index,
            s.message().c_str());
}

} // namespace autoshard::rt
