//===- MemoryPlan.h - what a rank's training step holds in memory -*- C++
//-*-===//
//
// The lowering places every tensor of the per-rank step in a buffer and
// knows when each is allocated and freed; the memory plan is that
// knowledge, summed: the persistent state the driver allocates (arguments
// and the results that do not update one) and the peak of the step's own
// buffers (the buckets' pack buffers among them), by category.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_CONVERSION_MEMORYPLAN_H
#define AUTOSHARD_CONVERSION_MEMORYPLAN_H

#include "autoshard/CostModel/Memory.h"
#include "autoshard/CostModel/Traffic.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace autoshard {

enum class MemoryCategory {
  Parameters,
  /// The f32 master weights of a mixed-precision step (the parameters its
  /// bf16 compute copies are cast from), and their updates.
  MasterWeights,
  Gradients,
  OptimizerStates,
  Activations,
  Gathered,
  Batch,
  Other,
  /// The buffers the runtime packs buckets into, in the step's arena.
  Communication,
  /// Device copies of values kept on the host or in NVMe files (offload):
  /// a parameter's shard fetched for its gather, a compute copy cast on
  /// the host.
  OffloadStaging,
};
constexpr int kNumMemoryCategories = 10;

/// "parameters", "gradients", ...: the manifest's names (the reports group
/// them as cost::PeakBreakdown does: peakBreakdown).
llvm::StringRef memoryCategoryName(MemoryCategory category);

struct MemoryPlan {
  /// Bytes the driver allocates before the first step: every argument and
  /// every result that does not update an argument.
  int64_t persistent = 0;
  /// The step's own buffers: the arena the driver allocates, in which the
  /// lowering placed every intermediate tensor at a fixed offset.
  int64_t stepPeak = 0;
  /// The most bytes those tensors hold at once (the arena is larger by its
  /// alignment and fragmentation).
  int64_t stepLive = 0;
  /// Persistent bytes, and the step's tensors alive at the live peak, by
  /// category.
  std::array<int64_t, kNumMemoryCategories> atPeak{};
  /// The most bytes of each category the step's tensors hold at once (at
  /// different moments: activations peak at the end of the forward pass,
  /// gradients in the backward pass).
  std::array<int64_t, kNumMemoryCategories> stepMaxBy{};
  /// The step's largest tensors live at the peak, largest first: what each
  /// is and its bytes (the persistent ones are summed in `atPeak`).
  std::vector<std::pair<std::string, int64_t>> largestAtPeak;
  /// The step's live bytes over its program, reduced to the moments that
  /// could be a peak for some plan (cost::peakCandidates): at each position
  /// the gradients alive until the optimizer, and the rest. The cost model
  /// derives other plans' peaks from a DDP step's moments.
  std::vector<cost::StepMoment> stepMoments;

  /// Offload: bytes of the arguments kept in host memory, the host arena
  /// of the step's host values, and bytes of the arguments kept in NVMe
  /// files. None of them is in `persistent` or `stepPeak`, which count
  /// device memory.
  int64_t hostPersistent = 0;
  int64_t hostArena = 0;
  int64_t nvme = 0;

  /// Host memory the rank needs for offloaded state and values.
  int64_t hostPeak() const { return hostPersistent + hostArena; }
  /// What the rank needs, and what the runtime measures: persistent plus
  /// step peak.
  int64_t peak() const { return persistent + stepPeak; }
};

/// `plan`'s device memory at its peak in the reports' categories (the cost
/// report's too): the persistent state and the step's buffers alive at the
/// live peak, the arena's bytes beyond them as `other`. Adds up to peak().
cost::PeakBreakdown peakBreakdown(const MemoryPlan &plan);

/// What a rank's step moves, counted where the lowering emits each call:
/// per collective kind, the calls (a bucket is one) and the bytes a ring
/// sends (docs/RuntimeABI.md, "Collective byte counts"; a group of one rank
/// makes no call); per offload transfer kind, the calls and the bytes. The
/// runtime counts the same (--stats-json's "collectives" and "offload").
struct StepTraffic {
  struct Count {
    int64_t calls = 0;
    int64_t bytes = 0;
  };
  /// Indexed by cost::CollectiveKind: all_reduce, all_gather,
  /// reduce_scatter.
  std::array<Count, 3> collectives{};
  /// Indexed by train::TransferKind: to_host, to_device, nvme_read,
  /// nvme_write.
  std::array<Count, 4> transfers{};

  /// One collective over `groupSize` ranks whose members' full tensors
  /// have `fullElements` elements of `elementBytes` bytes each.
  void addCollective(cost::CollectiveKind kind, int64_t groupSize,
                     llvm::ArrayRef<int64_t> fullElements,
                     int64_t elementBytes);
  int64_t collectiveBytes() const;
};

/// "to_host", "to_device", "nvme_read", "nvme_write" by index.
llvm::StringRef transferKindName(int index);

/// Everything lowering a step settles: its memory and its traffic.
struct StepPlan {
  MemoryPlan memory;
  StepTraffic traffic;
};

/// The cleanup that puts a partitioned step in the form the lowering and
/// assignStepBuffers take: cse, canonicalize, autoshard-fuse.
void addLoweringCleanupPasses(mlir::OpPassManager &pm);

/// The plan of the module's (partitioned or unplanned) training step: its
/// buffer assignment (assignStepBuffers) after the lowering's cleanup, which
/// runs on a copy. Fails with the lowering's diagnostic.
mlir::FailureOr<StepPlan> planStep(mlir::ModuleOp module);

/// planStep without the copy: cleans up `module` itself, which the caller
/// owns (a trial build of --strategy=auto, a step about to be lowered).
mlir::FailureOr<StepPlan> planStepInPlace(mlir::ModuleOp module);

/// planStep's memory plan.
mlir::FailureOr<MemoryPlan> planStepMemory(mlir::ModuleOp module);

/// "1.50 GiB (1610612736 bytes)": the cost model's, which this layer
/// shares.
using cost::formatBytes;

/// Parses "80GiB", "1.5GB", "4096", "512MiB", "2T" (binary and decimal
/// units, case-insensitive, optional "B"); fails on anything else.
mlir::FailureOr<int64_t> parseByteSize(llvm::StringRef text);

/// A memory budget's bytes (a positive parseByteSize), or an error on
/// `where` naming the bad value and what would be right.
mlir::FailureOr<int64_t> parseMemoryBudget(mlir::Operation *where,
                                           llvm::StringRef budget);

} // namespace autoshard

#endif // AUTOSHARD_CONVERSION_MEMORYPLAN_H
