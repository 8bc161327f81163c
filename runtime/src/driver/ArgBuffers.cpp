// The step's argument and result buffers: allocation, initialisation,
// freeing, and the global tensors gathered from them for a file.
#include "driver/ArgBuffers.h"
#include "ckpt/AtomicFile.h"
#include "ckpt/Layout.h"
#include "core/Context.h"
#include "core/Control.h"
#include "memory/Device.h"
#include "core/Dtype.h"
#include "core/Init.h"
#include "memory/NvmeStore.h"
#include "driver/OffloadArgs.h"
#include "driver/OutputFiles.h"
#include "driver/Params.h"

#include <cstring>

namespace autoshard::rt {

std::vector<void *> allocateArgs(asrt_context &ctx, const Manifest &manifest,
                                 const Options &options, int rank,
                                 NvmeStore *store,
                                 const std::vector<int> &sharedWith,
                                 const std::vector<void *> &sharedArgs) {
  std::vector<void *> args;
  for (const TensorSpec &arg : manifest.args) {
    // An evaluation step's parameter: the training step's buffer.
    if (!sharedWith.empty() && sharedWith[arg.index] >= 0) {
      args.push_back(sharedArgs[sharedWith[arg.index]]);
      continue;
    }
    // An nvme argument (or a GPU's) is initialised in a temporary host
    // buffer and written to its file (or device): init stages each tensor
    // once, so the host never holds more than the largest one.
    std::vector<char> staging;
    void *buffer = nullptr, *deviceBuffer = nullptr;
    const bool initialised = arg.init || (options.lr && arg.role == Role::Hyper &&
                                          arg.name == "lr");
    switch (arg.memory) {
    case MemoryKind::Device:
      buffer = deviceBuffer = asrt_alloc(&ctx, arg.numBytes());
      if (!ctx.device->hostAccessible() && initialised) {
        staging.resize(static_cast<size_t>(arg.numBytes()));
        buffer = staging.data();
      }
      break;
    case MemoryKind::Host:
      buffer = hostAlloc(&ctx, arg.numBytes());
      break;
    case MemoryKind::Nvme:
      if (!store)
        fatal("%s has memory=nvme but the driver opened no NVMe store",
              arg.describe().c_str());
      staging.resize(static_cast<size_t>(arg.numBytes()));
      buffer = staging.data();
      break;
    }
    args.push_back(arg.memory == MemoryKind::Nvme      ? nullptr
                   : arg.memory == MemoryKind::Device ? deviceBuffer
                                                      : buffer);
    if (arg.init) {
      HeldBlock block = heldBlock(manifest, arg, rank);
      if (Status s = fillInit(buffer, arg.dtype, block.valid, *arg.init,
                              options.seed, arg.name, block.begin);
          !s)
        fatal("%s", s.message().c_str());
      int64_t elementBytes = dtypeSize(arg.dtype);
      std::memset(
          static_cast<char *>(buffer) + block.valid * elementBytes, 0,
          static_cast<size_t>((block.chunk - block.valid) * elementBytes));
    }
    if (options.lr && arg.role == Role::Hyper && arg.name == "lr")
      storeElement(buffer, arg.dtype, 0, *options.lr);
    if (buffer != deviceBuffer && arg.memory == MemoryKind::Device)
      ctx.device->toDevice(Lane::Compute, deviceBuffer, buffer,
                           arg.numBytes());
    if (arg.memory == MemoryKind::Nvme)
      if (Status s = store->add(arg.index, arg.name, buffer, arg.numBytes());
          !s)
        fatal("--offload-dir: initialising %s: %s", arg.describe().c_str(),
              s.message().c_str());
  }
  return args;
}

void freeArgs(asrt_context &ctx, const Manifest &manifest,
              const std::vector<void *> &args,
              const std::vector<int> &sharedWith) {
  for (const TensorSpec &arg : manifest.args)
    if (!sharedWith.empty() && sharedWith[arg.index] >= 0)
      continue;
    else if (arg.memory == MemoryKind::Host)
      hostFree(&ctx, args[arg.index]);
    else
      asrt_free(&ctx, args[arg.index]); // null for nvme: nothing
}

std::vector<void *> allocateResults(asrt_context &ctx, const Manifest &manifest,
                                    const std::vector<void *> &args,
                                    std::vector<void *> &owned) {
  std::vector<void *> results;
  for (const TensorSpec &result : manifest.results) {
    if (result.updates >= 0) {
      results.push_back(args[result.updates]);
    } else {
      results.push_back(asrt_alloc(&ctx, result.numBytes()));
      owned.push_back(results.back());
    }
  }
  return results;
}

std::vector<void *> gatherGlobal(asrt_context &ctx,
                                 const std::vector<TensorSpec> &specs,
                                 const std::vector<void *> &buffers, Role role,
                                 int rank,
                                 std::vector<std::vector<char>> &storage) {
  std::vector<void *> global = buffers;
  Device &device = *ctx.device;
  const bool deviceIsHost = device.hostAccessible();
  for (const TensorSpec &spec : specs) {
    if (spec.role != role)
      continue;
    // What is in device memory that host code cannot read, and whether it
    // lives there already.
    const bool onDevice = spec.memory == MemoryKind::Device;
    if (!spec.isSharded() && (deviceIsHost || !onDevice))
      continue; // host memory already
    int64_t bytes = spec.globalElements() * dtypeSize(spec.dtype);
    std::vector<char> *host = nullptr;
    if (rank == 0) {
      host = &storage.emplace_back();
      host->resize(static_cast<size_t>(bytes));
      global[spec.index] = host->data();
    }
    if (!spec.isSharded()) {
      if (host)
        device.toHost(Lane::Compute, host->data(), buffers[spec.index], bytes);
      continue;
    }
    // The gather runs in device memory: on a GPU, from a device copy of a
    // shard that lives on the host (offload), into a device buffer.
    int64_t shardBytes = spec.numBytes();
    const void *shard = buffers[spec.index];
    void *shardCopy = nullptr;
    if (!deviceIsHost && !onDevice) {
      shardCopy = asrt_alloc(&ctx, shardBytes);
      device.toDevice(Lane::Compute, shardCopy, shard, shardBytes);
      shard = shardCopy;
    }
    void *full = host && deviceIsHost ? host->data() : asrt_alloc(&ctx, bytes);
    asrt_all_gather_shards(&ctx, spec.dtype, shard, full,
                           spec.globalElements(), spec.shardAxes);
    if (host && !deviceIsHost)
      device.toHost(Lane::Compute, host->data(), full, bytes);
    if (!(host && deviceIsHost))
      asrt_free(&ctx, full);
    asrt_free(&ctx, shardCopy);
  }
  return global;
}

Status saveGlobalParams(asrt_context &ctx, const Manifest &manifest,
                        const std::vector<void *> &args,
                        ControlPlane &control, const std::string &path,
                        const char *option, int64_t steps, uint64_t seed,
                        const std::map<std::string, std::string> &extra) {
  std::vector<std::vector<char>> storage;
  // memory=nvme params are read into host memory first; gatherGlobal
  // takes device and host ones where they are.
  StagedArgs params(ctx, manifest, args, {Role::Param}, Staging::NvmeOnly);
  std::vector<void *> global = gatherGlobal(ctx, manifest.args, params.args(),
                                            Role::Param, control.rank(),
                                            storage);
  Status saved;
  if (control.rank() == 0)
    saved = writeOutputFile(path, [&](const std::string &target) {
      return saveParams(target, manifest, global, steps, seed, option, extra);
    });
  return saved;
}

} // namespace autoshard::rt
