// The step's argument and result buffers: allocation, initialisation,
// freeing, and the global tensors gathered from them for a file.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Expected.h"
#include "io/Manifest.h"
#include "driver/Options.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace autoshard::rt {

class ControlPlane;
class NvmeStore;

/// Allocates every argument and fills params, optimizer states and hypers
/// from their init= specs. A replicated argument is a whole tensor; a
/// sharded one is this rank's flat shard, initialised with the values its
/// global elements have in the unsharded run (initialisation is a function
/// of the global index) and zero padding, which the optimizer and norms
/// read. Offload (memory=): a host argument gets host memory; an nvme
/// argument gets no buffer (null) but a file in `store`. On a device that
/// is not host memory (a GPU), a device argument is initialised in a host
/// buffer and copied up. `sharedWith` (an evaluation step's, from
/// evaluationParamSources) maps an argument to the one of `sharedArgs`
/// whose buffer it takes instead.
std::vector<void *> allocateArgs(asrt_context &ctx, const Manifest &manifest,
                                 const Options &options, int rank,
                                 NvmeStore *store,
                                 const std::vector<int> &sharedWith = {},
                                 const std::vector<void *> &sharedArgs = {});

/// Frees what allocateArgs allocated, each from the memory it came from
/// (not the buffers it shared).
void freeArgs(asrt_context &ctx, const Manifest &manifest,
              const std::vector<void *> &args,
              const std::vector<int> &sharedWith = {});

/// Donation: a result that updates argument I is written into argument I's
/// buffer (host memory for a memory=host argument, null for a memory=nvme
/// one, whose file the step writes); other results (the loss) get buffers
/// of their own, appended to `owned`.
std::vector<void *> allocateResults(asrt_context &ctx, const Manifest &manifest,
                                    const std::vector<void *> &args,
                                    std::vector<void *> &owned);

/// The global tensors of the `specs` of `role`, in host memory, for a
/// file: a replicated one is its own buffer (a host copy on a GPU); a
/// sharded one is gathered from its shard group with
/// asrt_all_gather_shards. Collective: every rank calls it with the same
/// arguments. Only rank 0 writes files, so only rank 0 keeps host copies
/// (in `storage`); the others gather into a scratch buffer. `buffers` are
/// where the specs' memory= says (memory=nvme ones already staged into
/// host memory by the caller).
std::vector<void *> gatherGlobal(asrt_context &ctx,
                                 const std::vector<TensorSpec> &specs,
                                 const std::vector<void *> &buffers, Role role,
                                 int rank,
                                 std::vector<std::vector<char>> &storage);

/// The parameters as global tensors in a safetensors file at `path`
/// (--save-params, --save-best: `option`), recording `steps`, `seed` and
/// the `extra` metadata: gathered on every rank (collective), written by
/// rank 0, whose status it is (the others' is success).
Status saveGlobalParams(asrt_context &ctx, const Manifest &manifest,
                        const std::vector<void *> &args,
                        ControlPlane &control, const std::string &path,
                        const char *option, int64_t steps, uint64_t seed,
                        const std::map<std::string, std::string> &extra = {});

} // namespace autoshard::rt
