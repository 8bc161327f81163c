// The manifest of a compiled step (docs/RuntimeABI.md): model and parser.
#pragma once

#include "autoshard/rt/abi.h"
#include "core/Expected.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autoshard::rt {

/// The manifest format version this runtime reads.
constexpr int kManifestFormatVersion = 1;

/// What an argument or result is to the driver. Arguments are params,
/// opt_states, inputs, labels or hypers; results are params, opt_states,
/// the loss or exposed gradients (grad).
enum class Role {
  Param,
  OptState,
  Input,
  Label,
  Hyper,
  Loss,
  Grad,
  GradNormSq
};
const char *roleName(Role role);

/// Load: the value comes from a file (--load-params or --resume); the
/// driver refuses to run without one.
enum class InitKind { Zeros, Ones, Normal, Uniform, Constant, Load };

/// Where an argument lives between steps (`memory=`; docs/RuntimeABI.md,
/// "Offload"): device memory (the default), host memory (ZeRO-Offload) or
/// a file of the driver's NVMe store (ZeRO-Infinity), which the step reaches
/// with asrt_nvme_read / asrt_nvme_write.
enum class MemoryKind { Device, Host, Nvme };
/// "device", "host", "nvme".
const char *memoryKindName(MemoryKind memory);

/// `init=KIND[:VALUE]`. `value` is the standard deviation for normal, the
/// bound for uniform and the value for constant; unused otherwise.
struct InitSpec {
  InitKind kind = InitKind::Zeros;
  double value = 0.0;
};

/// Parses the text after `init=`, e.g. "normal:0.25". The error names what
/// was wrong and the accepted forms.
Expected<InitSpec> parseInitSpec(std::string_view text);
/// The manifest spelling of `init`, e.g. "normal:0.25".
std::string formatInitSpec(const InitSpec &init);

/// One `arg` or `result` record.
struct TensorSpec {
  int index = 0;
  Role role = Role::Param;
  std::string name;
  asrt_dtype dtype = ASRT_DTYPE_F32;
  /// Per-rank (local) shape; empty for a scalar.
  std::vector<int64_t> shape;
  /// Params, opt_states and hypers (always set for them).
  std::optional<InitSpec> init;
  /// Params (`aliases=A,B`): further names parameter files hold the tensor
  /// under (tied weights); empty otherwise.
  std::vector<std::string> aliases;
  /// Inputs and labels: the batch dimension and the global batch rows along
  /// it. -1 and 0 for everything else.
  int batchDim = -1;
  int64_t globalRows = 0;
  /// Labels (required) and integer inputs (optional): values lie in
  /// [0, classes). 0 when absent.
  int64_t classes = 0;
  /// Labels of a loss that ignores some positions (`ignore_index=V`): the
  /// value marking them, which the data may hold besides [0, classes).
  std::optional<int64_t> ignoreIndex;
  /// Results that are the new value of an argument: that argument's index;
  /// -1 otherwise (the loss, gradients).
  int updates = -1;
  /// Grad results: the index of the param argument this is the gradient of;
  /// -1 otherwise.
  int gradOf = -1;
  /// Sharded tensors (`full=SHAPE shard_axes=MASK`; params, opt_states and
  /// grads): the global shape and the grid axes it is sharded over. `shape`
  /// is then this rank's flat shard (abi.h, "Flat shards"): 1-D, ceil(numel
  /// of fullShape / shard group size) elements. Empty and 0 when replicated.
  std::vector<int64_t> fullShape;
  int32_t shardAxes = 0;
  /// `memory=` (params and opt_states, and the results that update them;
  /// a result lives where the argument it updates lives). Device when
  /// absent.
  MemoryKind memory = MemoryKind::Device;
  /// The manifest line of the record, for later diagnostics.
  int line = 0;

  /// Of the local buffer (`shape`): what this rank allocates.
  int64_t numElements() const;
  int64_t numBytes() const;
  bool isSharded() const { return shardAxes != 0; }
  /// The tensor's global shape (fullShape when sharded, else shape) and its
  /// elements: what parameter files hold.
  const std::vector<int64_t> &globalShape() const;
  int64_t globalElements() const;
  /// A `result` record rather than an `arg` record.
  bool isResult = false;

  /// "arg 3 (input x)" or "result 1 (loss loss)".
  std::string describe() const;
  /// Whether the value must come from a file (init=load).
  bool initFromFile() const { return init && init->kind == InitKind::Load; }
  /// The names parameter files hold the tensor under, in the order a load
  /// prefers them: its name, then its aliases (docs/RuntimeABI.md,
  /// "Parameter and gradient files").
  std::vector<std::string> fileNames() const;

  /// Batched tensors only: rows this rank holds, elements per row, and the
  /// per-row shape (the shape without the batch dimension).
  int64_t localRows() const { return shape[batchDim]; }
  int64_t rowElements() const;
  std::vector<int64_t> rowShape() const;
};

/// One op of the source step as the trace names it (a `site` record): the
/// calls after asrt_op_site(I) lower site I. Fields the compiler did not
/// know are empty; `op` never is.
struct OpSite {
  /// The op's name in the source IR ("train.linear").
  std::string op;
  /// Its layer: the train.unit of the parameters it reads ("h.0"), the
  /// module of a parameter outside every unit ("wte", "ln_f"), or the
  /// layer of the op before it when it reads none.
  std::string layer;
  /// Its location in the source IR ("gpt.mlir:16", a NameLoc's name).
  std::string loc;
  /// Its operand and result types: "8x32xf32,32x32xf32->8x32xf32".
  std::string shapes;
};

struct Manifest {
  int formatVersion = 0;
  int abiVersion = 0;
  std::string step;
  std::string strategy;
  std::vector<int64_t> grid;
  std::vector<TensorSpec> args;
  std::vector<TensorSpec> results;
  /// The compiler's memory plan (the `memory` record), in bytes by key:
  /// peak (what the runtime measures: persistent plus the step's own
  /// buffers), persistent, step, communication, and the bytes at the peak
  /// by category; all of them device memory. Offload adds host_persistent
  /// (memory=host arguments), host_arena (asrt_host_arena's bytes) and nvme
  /// (memory=nvme arguments' bytes on this rank). Empty when the manifest
  /// has none.
  std::vector<std::pair<std::string, int64_t>> memory;
  /// The `flops` record (optional): the FLOPs of this rank's step as
  /// compiled (matrix products and attention); 0 when absent.
  int64_t stepFlops = 0;
  /// The `site` records, by index (asrt_op_site); empty for a step
  /// compiled before they existed or written by hand.
  std::vector<OpSite> sites;
  /// The plan's value of `key`, or -1.
  int64_t plannedBytes(std::string_view key) const;

  /// The product of the grid dimensions.
  int64_t worldSize() const;
  /// "2x2".
  std::string gridString() const;
  /// The argument named `name`, or null.
  const TensorSpec *findArg(std::string_view name) const;
  /// The argument a parameter file's tensor `name` stands for: the one of
  /// that name, or the param with that alias; null for neither.
  const TensorSpec *findArgByFileName(std::string_view name) const;
  /// Index of the (single) loss result.
  int lossResult() const;
  /// Index of the squared global gradient norm (a step that clips its
  /// gradients returns it), or -1.
  int gradNormSqResult() const;
  /// Whether some result has role grad.
  bool hasGradResults() const;
  /// The arguments with memory=`memory`, and their local bytes.
  int countArgsIn(MemoryKind memory) const;
  int64_t argBytesIn(MemoryKind memory) const;
  /// The global batch rows of the inputs and labels; 0 if there are none.
  int64_t globalBatchRows() const;
  /// The ranks in each group of grid axis mask `mask` (the product of the
  /// masked grid dims): a sharded tensor's shard group size.
  int64_t groupSize(int32_t mask) const;
};

/// Parses and validates a manifest. Errors name the line ("manifest line 5:
/// ...") and what was expected there; whole-manifest rules (one loss result,
/// `updates=` naming a matching argument in the same memory, `of=` naming a
/// param of the same global shape, local batch times world size equal to
/// the global batch, a sharded tensor's shard size and grid axes) are
/// checked too.
Expected<Manifest> parseManifest(std::string_view text);

/// "8x16", or "scalar" for an empty shape.
std::string formatShape(const std::vector<int64_t> &shape);

} // namespace autoshard::rt
