// The driver's side of offload: the NVMe store and host views of arguments.
#include "driver/OffloadArgs.h"
#include "core/Context.h"
#include "memory/Device.h"

#include <algorithm>

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

StagedArgs::StagedArgs(asrt_context &ctx, const Manifest &manifest,
                       const std::vector<void *> &args,
                       const std::vector<Role> &roles, Staging staging)
    : ctx(ctx), device(args), view(args) {
  const bool deviceIsHost = ctx.device->hostAccessible();
  for (const TensorSpec &arg : manifest.args) {
    if (!roles.empty() &&
        std::find(roles.begin(), roles.end(), arg.role) == roles.end())
      continue;
    if (arg.memory == MemoryKind::Host ||
        (arg.memory == MemoryKind::Device &&
         (deviceIsHost || staging == Staging::NvmeOnly)))
      continue;
    Staged &s = staged.emplace_back(
        Staged{arg.index, arg.memory, std::vector<char>()});
    s.bytes.resize(static_cast<size_t>(arg.numBytes()));
    if (arg.memory == MemoryKind::Nvme) {
      if (!ctx.nvme())
        fatal("%s has memory=nvme but the driver opened no NVMe store",
              arg.describe().c_str());
      if (Status st = ctx.nvme()->read(arg.index, s.bytes.data(), arg.numBytes());
          !st)
        fatal("reading the NVMe file of %s: %s", arg.describe().c_str(),
              st.message().c_str());
    } else if (staging == Staging::ReadWrite) {
      ctx.device->toHost(Lane::Compute, s.bytes.data(), args[arg.index],
                         arg.numBytes());
    }
    view[arg.index] = s.bytes.data();
  }
}

void StagedArgs::writeBack() {
  for (Staged &s : staged) {
    int64_t bytes = static_cast<int64_t>(s.bytes.size());
    if (s.memory == MemoryKind::Device) {
      ctx.device->toDevice(Lane::Compute, device[s.index], s.bytes.data(),
                           bytes);
      continue;
    }
    if (Status st = ctx.nvme()->write(s.index, s.bytes.data(), bytes); !st)
      fatal("writing the NVMe file of argument %d: %s", s.index,
            st.message().c_str());
  }
}

} // namespace autoshard::rt
