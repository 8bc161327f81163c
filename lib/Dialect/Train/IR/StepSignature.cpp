//===- StepSignature.cpp - the rules of a training step and its signature -===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace autoshard::train;

bool autoshard::train::isValidStepName(StringRef name) {
  if (name.empty() || name.front() == '.')
    return false;
  return llvm::all_of(name, [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.';
  });
}

namespace {
/// The names of the attributes a step value carries, uniqued once per
/// signature: each value's dictionary is then read in one pass of pointer
/// comparisons, not one binary search by string per name (a signature is
/// built for every pass over a step of tens of thousands of values).
struct StepAttrNames {
  explicit StepAttrNames(MLIRContext *context)
      : role(StringAttr::get(context, TrainDialect::kRoleAttrName)),
        name(StringAttr::get(context, TrainDialect::kNameAttrName)),
        init(StringAttr::get(context, TrainDialect::kInitAttrName)),
        unit(StringAttr::get(context, TrainDialect::kUnitAttrName)),
        aliases(StringAttr::get(context, TrainDialect::kAliasesAttrName)),
        weightDecay(
            StringAttr::get(context, TrainDialect::kWeightDecayAttrName)) {}
  StringAttr role, name, init, unit, aliases, weightDecay;
};
} // namespace

static StepValue decode(unsigned index, Type type, DictionaryAttr attrs,
                        const StepAttrNames &names) {
  StepValue value{index, Role::Param, "", dyn_cast<RankedTensorType>(type),
                  {}};
  if (!attrs)
    return value;
  for (NamedAttribute attr : attrs) {
    StringAttr key = attr.getName();
    Attribute field = attr.getValue();
    if (key == names.role) {
      if (auto role = dyn_cast<RoleAttr>(field))
        value.role = role.getValue();
    } else if (key == names.name) {
      if (auto name = dyn_cast<StringAttr>(field))
        value.name = name.getValue();
    } else if (key == names.init) {
      value.init = dyn_cast<InitAttr>(field);
    } else if (key == names.unit) {
      if (auto unit = dyn_cast<StringAttr>(field))
        value.unit = unit.getValue();
    } else if (key == names.aliases) {
      if (auto aliases = dyn_cast<ArrayAttr>(field))
        for (Attribute alias : aliases)
          if (auto text = dyn_cast<StringAttr>(alias))
            value.aliases.push_back(text.getValue());
    } else if (key == names.weightDecay) {
      value.weightDecay = dyn_cast<FloatAttr>(field);
    }
  }
  return value;
}

StepSignature::StepSignature(FunctionOpInterface func) {
  StepAttrNames names(func->getContext());
  llvm::StringMap<int64_t> unitIndex;
  args.reserve(func.getNumArguments());
  unitIndexByArg.reserve(func.getNumArguments());
  results.reserve(func.getNumResults());
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    args.push_back(decode(i, type, func.getArgAttrDict(i), names));
    argIndexByName.try_emplace(args.back().name, i);
    StringRef unit = args.back().unit;
    int64_t index = -1;
    if (!unit.empty()) {
      auto [it, inserted] = unitIndex.try_emplace(unit, units.size());
      if (inserted)
        units.push_back(unit);
      index = it->second;
    }
    unitIndexByArg.push_back(index);
  }
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    results.push_back(decode(i, type, func.getResultAttrDict(i), names));
}

int64_t StepSignature::getUnitIndex(unsigned argIndex) const {
  return unitIndexByArg[argIndex];
}

std::optional<unsigned> StepSignature::getArgIndex(StringRef name) const {
  auto it = argIndexByName.find(name);
  if (it == argIndexByName.end())
    return std::nullopt;
  return it->second;
}

std::optional<unsigned>
StepSignature::getUpdatedArg(unsigned resultIndex) const {
  const StepValue &result = results[resultIndex];
  if (result.role != Role::Param && result.role != Role::OptState)
    return std::nullopt;
  return getArgIndex(result.name);
}

std::optional<unsigned>
StepSignature::getGradientOf(unsigned resultIndex) const {
  const StepValue &result = results[resultIndex];
  if (result.role != Role::Grad)
    return std::nullopt;
  StringRef name = result.name;
  if (!name.consume_back(".grad"))
    return std::nullopt;
  std::optional<unsigned> arg = getArgIndex(name);
  if (!arg || args[*arg].role != Role::Param)
    return std::nullopt;
  return arg;
}

static bool isBatchRole(Role role) {
  return role == Role::Input || role == Role::Label;
}

// Per-value checks shared by arguments and results: presence of role and
// name, and a static tensor type.
static LogicalResult verifyTagged(FunctionOpInterface func, StringRef what,
                                  unsigned index, Type type,
                                  DictionaryAttr attrs) {
  if (!attrs || !attrs.get(TrainDialect::kRoleAttrName))
    return func.emitOpError()
           << what << " #" << index << " of a train.step function needs a '"
           << TrainDialect::kRoleAttrName << "' attribute";
  if (!attrs.get(TrainDialect::kNameAttrName))
    return func.emitOpError()
           << what << " #" << index << " of a train.step function needs a '"
           << TrainDialect::kNameAttrName << "' attribute";
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return func.emitOpError()
           << what << " #" << index << " must be a statically shaped ranked "
           << "tensor, got " << type;
  return success();
}

/// The most bytes a step's tensors may hold, each and all together: 4 EiB.
/// Byte counts are int64 everywhere (memory plan, flat shards, manifest);
/// below this bound their sums and paddings cannot overflow.
static constexpr int64_t kMaxStepBytes = int64_t{1} << 62;

/// The element bytes the byte bounds count: int and float types by their
/// width, anything else as 8.
static int64_t elementBytes(Type element) {
  return element.isIntOrFloat()
             ? static_cast<int64_t>(
                   llvm::divideCeil(element.getIntOrFloatBitWidth(), 8))
             : 8;
}

/// The bytes of a statically shaped tensor type, or nothing when they
/// exceed kMaxStepBytes. The shape is multiplied here with an overflow
/// check: ShapedType::getNumElements would wrap.
static std::optional<int64_t> boundedBytes(RankedTensorType type) {
  int64_t bytes = elementBytes(type.getElementType());
  for (int64_t dim : type.getShape())
    if (llvm::MulOverflow(bytes, dim, bytes) || bytes > kMaxStepBytes)
      return std::nullopt;
  return bytes;
}

/// A collective of the step (an op with a `grid` symbol: shard.all_reduce,
/// the train collectives) runs on a shard.grid whose every axis has a
/// static size of at least 1; the lowering divides by the group's size.
static LogicalResult verifyCollectiveGrid(Operation *op) {
  auto gridRef = op->getAttrOfType<FlatSymbolRefAttr>("grid");
  if (!gridRef)
    return success();
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridRef);
  if (!grid)
    return success(); // the op's own verifier names a missing grid
  for (auto [axis, size] : llvm::enumerate(grid.getShape()))
    if (size < 1) // also a dynamic size
      return op->emitOpError()
             << "runs on " << gridRef << ", whose axis " << axis << " has "
             << (ShapedType::isDynamic(size) ? std::string("a dynamic size")
                                             : "size " + std::to_string(size))
             << "; a training step's grids have a static size of at least 1 "
                "on every axis";
  return success();
}

/// The `train.shard` of an argument or result (#train.flat_shard) describes
/// a tensor the step may hold and axes of the plan's grid that the runtime
/// can address (a mask of 31 bits), and the value is that tensor's flat
/// shard over those axes: the rule the runtime's manifest parser applies,
/// checked before the lowering prints it.
static LogicalResult verifyFlatShard(FunctionOpInterface func, StringRef what,
                                     unsigned index, Type type,
                                     FlatShardAttr shard) {
  auto fail = [&]() {
    return func.emitOpError() << what << " #" << index << " has "
                              << TrainDialect::kShardAttrName << " " << shard
                              << ": ";
  };
  int64_t elements = 1;
  for (int64_t dim : shard.getShape())
    if (dim < 0 || llvm::MulOverflow(elements, dim, elements) ||
        elements > kMaxStepBytes / 8)
      return fail() << "its full shape must have dimensions >= 0 and hold at "
                       "most 2^59 elements";
  auto plan = func->getAttrOfType<PlanAttr>(TrainDialect::kPlanAttrName);
  shard::GridOp grid =
      plan ? SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
                 func, plan.getGrid())
           : shard::GridOp();
  if (!grid)
    return fail() << "a flat shard lies on the grid of the step's "
                  << TrainDialect::kPlanAttrName
                  << ", and the step has no plan with a shard.grid";
  ArrayRef<int16_t> axes = shard.getGridAxes();
  int64_t ranks = 1;
  for (auto [i, axis] : llvm::enumerate(axes)) {
    if (axis < 0 || axis >= std::min<int64_t>(grid.getRank(), 31) ||
        (i > 0 && axis <= axes[i - 1]))
      return fail() << "grid_axes must be distinct, ascending axes of "
                    << plan.getGrid() << " (rank " << grid.getRank()
                    << ") below 31";
    int64_t size = grid.getShape()[axis];
    if (size < 1 || llvm::MulOverflow(ranks, size, ranks))
      return fail() << "axis " << axis << " of " << plan.getGrid()
                    << " has no static size of at least 1";
  }
  if (axes.empty())
    return fail() << "a flat shard is sharded over at least one grid axis";
  auto tensor = dyn_cast<RankedTensorType>(type);
  int64_t k = llvm::divideCeil(elements, ranks);
  if (!tensor || tensor.getRank() != 1 || tensor.getDimSize(0) != k)
    return fail() << "the flat shard of " << elements << " elements over "
                  << ranks << (ranks == 1 ? " rank" : " ranks") << " is 1-D "
                  << "with ceil(" << elements << " / " << ranks << ") = " << k
                  << " elements, but the " << what << " is " << type;
  return success();
}

/// Every tensor of the step, argument or op result, has a static shape with
/// no dimension of size 0, and none of them, nor all together, hold more
/// than kMaxStepBytes: the passes
/// size buffers, shards and collectives from these shapes. Names the first
/// tensor that breaks a rule or tips the sum.
static LogicalResult verifyStepTensors(FunctionOpInterface func) {
  int64_t total = 0;
  auto add = [&](Value value, auto emitError) -> LogicalResult {
    auto tensor = dyn_cast<TensorType>(value.getType());
    if (!tensor)
      return success();
    auto type = dyn_cast<RankedTensorType>(tensor);
    if (!type || !type.hasStaticShape())
      return emitError() << "of type " << tensor
                         << " has no static shape; a training step's "
                            "tensors are statically shaped";
    // The runtime sizes kernels, blocks and shards from these shapes and
    // refuses an empty tensor in its manifest.
    if (llvm::is_contained(type.getShape(), 0))
      return emitError() << "of type " << type
                         << " has a dimension of size 0; a training step's "
                            "tensors have at least one element in every "
                            "dimension";
    std::optional<int64_t> bytes = boundedBytes(type);
    if (!bytes)
      return emitError() << "of type " << type
                         << " holds more than 2^62 bytes (4 EiB), the most "
                            "a training step's tensors may hold";
    if (llvm::AddOverflow(total, *bytes, total) || total > kMaxStepBytes)
      return emitError() << "of type " << type
                         << " brings the step's tensors past 2^62 bytes "
                            "(4 EiB), the most they may hold together";
    return success();
  };
  Region &body = func.getFunctionBody();
  for (BlockArgument arg : body.getArguments())
    if (failed(add(arg, [&] {
          return func.emitOpError() << "argument #" << arg.getArgNumber()
                                    << " ";
        })))
      return failure();
  WalkResult walk = body.walk([&](Operation *op) {
    if (failed(verifyCollectiveGrid(op)))
      return WalkResult::interrupt();
    for (OpResult result : op->getResults())
      if (failed(add(result, [&] {
            return op->emitOpError() << "result #" << result.getResultNumber()
                                     << " ";
          })))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}


MemorySpace autoshard::train::getArgMemorySpace(FunctionOpInterface func,
                                                unsigned index) {
  auto memory = func.getArgAttrOfType<MemorySpaceAttr>(
      index, TrainDialect::kMemoryAttrName);
  return memory ? memory.getValue() : MemorySpace::Device;
}

MemorySpace autoshard::train::getResultMemorySpace(FunctionOpInterface func,
                                                   unsigned index) {
  auto memory = func.getResultAttrOfType<MemorySpaceAttr>(
      index, TrainDialect::kMemoryAttrName);
  return memory ? memory.getValue() : MemorySpace::Device;
}

MemorySpace autoshard::train::getMemorySpace(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto func = dyn_cast_or_null<FunctionOpInterface>(
        arg.getOwner()->getParentOp());
    return func ? getArgMemorySpace(func, arg.getArgNumber())
                : MemorySpace::Device;
  }
  Operation *def = value.getDefiningOp();
  if (auto wait = dyn_cast<TransferWaitOp>(def)) {
    auto start = wait.getHandle().getDefiningOp<TransferStartOp>();
    return start && start.getKind() == TransferKind::ToDevice
               ? MemorySpace::Device
               : MemorySpace::Host;
  }
  if (isa<ToHostOp, NvmeReadOp, NvmeWriteOp>(def) ||
      def->hasAttr(TrainDialect::kOnHostAttrName))
    return MemorySpace::Host;
  return MemorySpace::Device;
}

std::optional<Transfer> autoshard::train::getTransfer(Operation *op) {
  if (auto start = dyn_cast<TransferStartOp>(op))
    return Transfer{start.getKind(), start.getInput(), start.getTarget()};
  if (isa<ToHostOp>(op))
    return Transfer{TransferKind::ToHost, op->getOperand(0), Value()};
  if (isa<ToDeviceOp>(op))
    return Transfer{TransferKind::ToDevice, op->getOperand(0), Value()};
  if (isa<NvmeReadOp>(op))
    return Transfer{TransferKind::NvmeRead, op->getOperand(0), Value()};
  if (auto write = dyn_cast<NvmeWriteOp>(op))
    return Transfer{TransferKind::NvmeWrite, write.getValue(),
                    write.getTarget()};
  return std::nullopt;
}

/// The NVMe write behind a returned value: a train.nvme_write, or the wait
/// of an asynchronous one; its target argument, or null.
static Value nvmeWriteTarget(Value value) {
  Operation *def = value.getDefiningOp();
  if (isa_and_nonnull<TransferStartOp>(def))
    return Value(); // its handle, not the written value
  if (auto wait = dyn_cast_or_null<TransferWaitOp>(def))
    def = wait.getHandle().getDefiningOp();
  std::optional<Transfer> transfer = def ? getTransfer(def) : std::nullopt;
  return transfer && transfer->kind == TransferKind::NvmeWrite
             ? transfer->target
             : Value();
}

/// "device memory", "host memory", "an NVMe file".
static std::string describeSpace(MemorySpace space) {
  switch (space) {
  case MemorySpace::Device:
    return "device memory";
  case MemorySpace::Host:
    return "host memory";
  case MemorySpace::Nvme:
    return "an NVMe file";
  }
  return "?";
}

/// The rules of offload (autoshard-offload): train.memory only on params
/// and optimizer states and on the results that update them, the same on
/// both; an NVMe argument is only read by train.nvme_read and replaced by
/// train.nvme_write; every op reads tensors where it runs (host ops, marked
/// train.on_host, in host memory; the others in device memory); a transfer
/// reads from where it copies from; each result is returned from where its
/// signature puts it.
static LogicalResult verifyMemorySpaces(FunctionOpInterface func,
                                        const StepSignature &sig) {
  Region &body = func.getFunctionBody();
  if (body.empty())
    return success();
  for (const StepValue &arg : sig.getArgs()) {
    MemorySpace space = getArgMemorySpace(func, arg.index);
    if (space == MemorySpace::Device)
      continue;
    if (arg.role != Role::Param && arg.role != Role::OptState)
      return func.emitOpError()
             << "argument #" << arg.index << " (" << stringifyRole(arg.role)
             << " \"" << arg.name << "\") is in " << describeSpace(space)
             << "; only parameters and optimizer states are offloaded";
    if (space != MemorySpace::Nvme)
      continue;
    for (OpOperand &use : body.getArgument(arg.index).getUses()) {
      Operation *user = use.getOwner();
      if (isa<NvmeReadOp>(user) ||
          (isa<NvmeWriteOp>(user) && use.getOperandNumber() == 1))
        continue;
      if (auto start = dyn_cast<TransferStartOp>(user);
          start && (start.getKind() == TransferKind::NvmeRead ||
                    (start.getKind() == TransferKind::NvmeWrite &&
                     use.getOperandNumber() == 1)))
        continue;
      return user->emitOpError()
             << "reads argument #" << arg.index << " (\"" << arg.name
             << "\"), which is in an NVMe file; read it with "
                "train.nvme_read";
    }
  }
  for (const StepValue &result : sig.getResults()) {
    MemorySpace space = getResultMemorySpace(func, result.index);
    std::optional<unsigned> updated = sig.getUpdatedArg(result.index);
    MemorySpace expected = updated ? getArgMemorySpace(func, *updated)
                                   : MemorySpace::Device;
    if (space != expected)
      return func.emitOpError()
             << "result #" << result.index << " (\"" << result.name
             << "\") is in " << describeSpace(space) << " but "
             << (updated ? "the argument it updates is in " +
                               describeSpace(expected)
                         : std::string("only updates of offloaded arguments "
                                       "leave device memory"));
  }

  auto expect = [](Operation *op, unsigned operand, Value value,
                   MemorySpace want, StringRef how) -> LogicalResult {
    MemorySpace have = getMemorySpace(value);
    if (have == want)
      return success();
    return op->emitOpError() << "reads operand #" << operand << " from "
                             << describeSpace(have) << " but " << how
                             << " reads " << describeSpace(want);
  };
  for (Operation &op : body.front()) {
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      for (auto [slot, value] : llvm::enumerate(op.getOperands())) {
        MemorySpace want = getResultMemorySpace(func, slot);
        if (want == MemorySpace::Nvme) {
          Value target = nvmeWriteTarget(value);
          std::optional<unsigned> updated = sig.getUpdatedArg(slot);
          if (!target || !updated || target != body.getArgument(*updated))
            return op.emitOpError()
                   << "returns result #" << slot
                   << ", which is kept in an NVMe file, from something "
                      "other than a train.nvme_write to the argument it "
                      "updates";
          continue;
        }
        if (failed(expect(&op, slot, value, want,
                          "the step's signature returns this result from")))
          return failure();
      }
      continue;
    }
    // An NVMe write's result says where the new value went; only the
    // return reads it (the lowering gives it no buffer).
    if (op.getNumResults() == 1 && nvmeWriteTarget(op.getResult(0)))
      for (Operation *user : op.getUsers())
        if (!user->hasTrait<OpTrait::IsTerminator>())
          return user->emitOpError()
                 << "reads the result of a train.nvme_write; only the "
                    "step's return may (read the written value instead)";
    if (isa<TransferWaitOp>(op))
      continue;
    // A transfer, synchronous or started, reads from where it copies from.
    if (std::optional<Transfer> t = getTransfer(&op)) {
      // An NVMe transfer of something other than an argument is its op's
      // own verifier's error.
      Value file = t->kind == TransferKind::NvmeRead    ? t->input
                   : t->kind == TransferKind::NvmeWrite ? t->target
                                                        : Value();
      if (file && !isa<BlockArgument>(file))
        continue;
      LogicalResult ok = success();
      switch (t->kind) {
      case TransferKind::ToHost:
        ok = expect(&op, 0, t->input, MemorySpace::Device, "a copy to the host");
        break;
      case TransferKind::ToDevice:
        ok = expect(&op, 0, t->input, MemorySpace::Host, "a copy to the device");
        break;
      case TransferKind::NvmeRead:
        ok = expect(&op, 0, t->input, MemorySpace::Nvme, "an NVMe read");
        break;
      case TransferKind::NvmeWrite:
        ok = expect(&op, 0, t->input, MemorySpace::Host, "an NVMe write");
        if (succeeded(ok))
          ok = expect(&op, 1, t->target, MemorySpace::Nvme, "an NVMe write");
        break;
      }
      if (failed(ok))
        return failure();
      continue;
    }
    bool onHost = op.hasAttr(TrainDialect::kOnHostAttrName);
    // shard_of takes this rank's shard and sends nothing.
    if (onHost && !isa<ShardOfOp>(op) &&
        (op.hasAttr("grid") || isa<CollectiveWaitOp>(op)))
      return op.emitOpError()
             << "is a collective marked " << TrainDialect::kOnHostAttrName
             << "; collectives run on the device";
    MemorySpace want = onHost ? MemorySpace::Host : MemorySpace::Device;
    for (OpOperand &operand : op.getOpOperands())
      if (isa<TensorType>(operand.get().getType()) &&
          failed(expect(&op, operand.getOperandNumber(), operand.get(), want,
                        onHost ? "an op on the host"
                               : "an op on the device")))
        return failure();
  }
  return success();
}

LogicalResult autoshard::train::verifyStepSignature(FunctionOpInterface func) {
  // Every pass walks the step as one list of ops ending in the return of
  // its results; a branch would leave them reading the wrong terminator.
  Region &body = func.getFunctionBody();
  if (!body.empty() && !body.hasOneBlock())
    return func.emitOpError()
           << "has " << body.getBlocks().size()
           << " blocks; a training step is straight-line code in one block";
  // ... ending in the return of its results, which every pass reads as the
  // block's terminator (an unregistered op, which might be a terminator,
  // passes the function's own verifier).
  if (!body.empty()) {
    Block &block = body.front();
    Operation *last = block.empty() ? nullptr : &block.back();
    if (!last || !last->hasTrait<OpTrait::ReturnLike>() ||
        last->getNumOperands() != func.getNumResults())
      return func.emitOpError()
             << "must end in a return of its " << func.getNumResults()
             << (func.getNumResults() == 1 ? " result" : " results")
             << "; a training step is straight-line code ending in "
                "func.return";
  }
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
    if (failed(verifyTagged(func, "argument", i, type, func.getArgAttrDict(i))))
      return failure();
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    if (failed(verifyTagged(func, "result", i, type,
                            func.getResultAttrDict(i))))
      return failure();

  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
    if (auto shard = func.getArgAttrOfType<FlatShardAttr>(
            i, TrainDialect::kShardAttrName))
      if (failed(verifyFlatShard(func, "argument", i, type, shard)))
        return failure();
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    if (auto shard = func.getResultAttrOfType<FlatShardAttr>(
            i, TrainDialect::kShardAttrName))
      if (failed(verifyFlatShard(func, "result", i, type, shard)))
        return failure();

  StepSignature sig(func);
  // Names are unique among the arguments, and among the results.
  auto claimName = [&](llvm::StringMap<unsigned> &names, StringRef what,
                       const StepValue &value) -> LogicalResult {
    auto [it, inserted] = names.try_emplace(value.name, value.index);
    if (inserted)
      return success();
    return func.emitOpError()
           << what << " #" << value.index << " has the name \"" << value.name
           << "\" of " << what << " #" << it->second
           << "; names must be unique";
  };
  llvm::StringMap<unsigned> argNames;
  std::optional<unsigned> firstBatchArg;
  for (const StepValue &arg : sig.getArgs()) {
    if (failed(claimName(argNames, "argument", arg)))
      return failure();
    StringRef role = stringifyRole(arg.role);
    bool needsInit = arg.role == Role::Param || arg.role == Role::Hyper;
    if (needsInit && !arg.init)
      return func.emitOpError()
             << role << " argument \"" << arg.name << "\" needs a '"
             << TrainDialect::kInitAttrName << "' attribute";
    // Parameter files hold params and opt_states; a hyper's value is its
    // init (or a flag such as --lr).
    if (arg.role == Role::Hyper && arg.init.getKind() == InitKind::Load)
      return func.emitOpError()
             << "hyper argument \"" << arg.name
             << "\" has #train.init<load>, but parameter files hold only "
                "params and opt_states; give it a value, such as "
                "#train.init<constant, value = ...>";
    if (isBatchRole(arg.role)) {
      if (arg.init)
        return func.emitOpError()
               << role << " argument \"" << arg.name
               << "\" is filled from the data and takes no '"
               << TrainDialect::kInitAttrName << "'";
      if (arg.type.getRank() == 0)
        return func.emitOpError()
               << role << " argument \"" << arg.name
               << "\" must have at least one dimension (dimension 0 is the "
                  "batch), got "
               << arg.type;
      if (firstBatchArg) {
        const StepValue &first = sig.getArgs()[*firstBatchArg];
        if (first.type.getDimSize(0) != arg.type.getDimSize(0))
          return func.emitOpError()
                 << "batch arguments disagree on the batch size: \""
                 << first.name << "\" has " << first.type.getDimSize(0)
                 << " rows, \"" << arg.name << "\" has "
                 << arg.type.getDimSize(0);
      } else {
        firstBatchArg = arg.index;
      }
    }
    // Units group parameters; optimizer states, batches and hypers are
    // placed by what they belong to, not by a unit of their own.
    if (!arg.unit.empty() && arg.role != Role::Param)
      return func.emitOpError()
             << role << " argument \"" << arg.name << "\" has '"
             << TrainDialect::kUnitAttrName << "' \"" << arg.unit
             << "\"; only param arguments belong to a unit";
    // A parameter file's names are of params and opt_states; an alias is
    // the further name of a parameter (tied weights).
    if (!arg.aliases.empty() && arg.role != Role::Param)
      return func.emitOpError()
             << role << " argument \"" << arg.name << "\" has '"
             << TrainDialect::kAliasesAttrName
             << "'; only param arguments are saved under aliases";
    // A decay belongs to the parameter the optimizer updates; states,
    // batches and hypers are not updated by an optimizer.
    if (arg.weightDecay && arg.role != Role::Param)
      return func.emitOpError()
             << role << " argument \"" << arg.name << "\" has '"
             << TrainDialect::kWeightDecayAttrName
             << "'; only param arguments have a weight decay";
    if (arg.role == Role::Label && !arg.type.getElementType().isInteger(32))
      return func.emitOpError() << "label argument \"" << arg.name
                                << "\" must hold i32 class indices, got "
                                << arg.type;
    if (arg.role == Role::Hyper &&
        (arg.type.getRank() != 0 || !arg.type.getElementType().isF32()))
      return func.emitOpError()
             << "hyper argument \"" << arg.name
             << "\" must be a scalar tensor<f32>, got " << arg.type;
  }

  // Each name in a parameter file stands for one tensor: an alias is no
  // argument's name and no other alias.
  llvm::StringMap<unsigned> aliasOwners;
  for (const StepValue &arg : sig.getArgs())
    for (StringRef alias : arg.aliases) {
      if (alias == arg.name)
        return func.emitOpError() << "param argument \"" << arg.name
                                  << "\" has its own name as an alias";
      if (auto named = argNames.find(alias); named != argNames.end())
        return func.emitOpError()
               << "param argument \"" << arg.name << "\" has the alias \""
               << alias << "\", the name of argument #" << named->second
               << "; each name in a parameter file stands for one tensor";
      auto [owner, inserted] = aliasOwners.try_emplace(alias, arg.index);
      if (inserted)
        continue;
      if (owner->second == arg.index)
        return func.emitOpError()
               << "param argument \"" << arg.name << "\" lists the alias \""
               << alias << "\" twice";
      return func.emitOpError()
             << "param argument \"" << arg.name << "\" has the alias \""
             << alias << "\" of param argument \""
             << sig.getArgs()[owner->second].name
             << "\"; each name in a parameter file stands for one tensor";
    }

  llvm::StringMap<unsigned> resultNames;
  unsigned losses = 0, gradNorms = 0;
  bool derivesBackward = func->hasAttr(TrainDialect::kOptimizerAttrName);
  for (const StepValue &result : sig.getResults()) {
    if (failed(claimName(resultNames, "result", result)))
      return failure();
    StringRef role = stringifyRole(result.role);
    // The loss and a clipping step's squared gradient norm: one f32 each.
    auto scalarF32 = [&]() -> LogicalResult {
      if (result.type.getRank() == 0 && result.type.getElementType().isF32())
        return success();
      return func.emitOpError()
             << role << " result \"" << result.name
             << "\" must be a scalar tensor<f32>, got " << result.type;
    };
    if (result.role == Role::Loss) {
      ++losses;
      if (failed(scalarF32()))
        return failure();
      continue;
    }
    if (derivesBackward)
      return func.emitOpError()
             << role << " result \"" << result.name
             << "\": a step with a '" << TrainDialect::kOptimizerAttrName
             << "' returns only its loss; autoshard-autodiff adds the "
                "updates";
    if (result.role == Role::GradNormSq) {
      ++gradNorms;
      if (failed(scalarF32()))
        return failure();
      continue;
    }
    if (result.role == Role::Grad) {
      std::optional<unsigned> param = sig.getGradientOf(result.index);
      if (!param)
        return func.emitOpError()
               << "grad result \"" << result.name
               << "\" must be named <param>.grad after a param argument";
      // Either may be a flat shard (ZeRO-1/2 reduce the gradient of a whole
      // parameter into shards): what must agree is the full shape.
      auto fullShape = [](RankedTensorType type, FlatShardAttr shard) {
        return shard ? shard.getShape() : type.getShape();
      };
      if (fullShape(sig.getArgs()[*param].type,
                    func.getArgAttrOfType<FlatShardAttr>(
                        *param, TrainDialect::kShardAttrName)) !=
          fullShape(result.type,
                    func.getResultAttrOfType<FlatShardAttr>(
                        result.index, TrainDialect::kShardAttrName)))
        return func.emitOpError()
               << "grad result \"" << result.name << "\" has type "
               << result.type << " but its param has type "
               << sig.getArgs()[*param].type;
      continue;
    }
    std::optional<unsigned> argIndex = sig.getArgIndex(result.name);
    if (!argIndex)
      return func.emitOpError()
             << role << " result \"" << result.name
             << "\" has no argument of the same name to update";
    const StepValue &arg = sig.getArgs()[*argIndex];
    if (arg.role != result.role)
      return func.emitOpError()
             << role << " result \"" << result.name << "\" updates argument #"
             << arg.index << ", whose role is " << stringifyRole(arg.role);
    if (arg.type != result.type)
      return func.emitOpError()
             << role << " result \"" << result.name << "\" has type "
             << result.type << " but the argument it updates has type "
             << arg.type;
  }
  if (losses != 1)
    return func.emitOpError() << "a train.step function returns exactly one "
                                 "loss result, found "
                              << losses;
  if (gradNorms > 1)
    return func.emitOpError() << "a train.step function returns at most one "
                                 "grad_norm_sq result, found "
                              << gradNorms;
  if (failed(verifyMemorySpaces(func, sig)))
    return failure();
  return verifyStepTensors(func);
}

int64_t StepPlacement::worldSize() const {
  int64_t size = 1;
  for (int64_t dim : grid)
    size *= dim;
  return size;
}

FailureOr<StepPlacement>
autoshard::train::getStepPlacement(FunctionOpInterface step) {
  StepPlacement placement;
  auto plan = step->getAttrOfType<PlanAttr>(TrainDialect::kPlanAttrName);
  if (!plan)
    return placement;
  auto grid =
      SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(step, plan.getGrid());
  if (!grid)
    return step.emitOpError() << "plan refers to " << plan.getGrid()
                              << ", which is not a shard.grid";
  placement.strategy = plan.getStrategy().getValue().str();
  placement.grid.assign(grid.getShape().begin(), grid.getShape().end());
  return placement;
}

FailureOr<FunctionOpInterface>
autoshard::train::findStepFunction(ModuleOp module) {
  SmallVector<FunctionOpInterface> steps;
  module.walk([&](FunctionOpInterface func) {
    if (func->hasAttr(TrainDialect::kStepAttrName))
      steps.push_back(func);
  });
  if (steps.empty()) {
    module.emitError() << "no training step found: expected a func.func with "
                          "the '"
                       << TrainDialect::kStepAttrName << "' attribute";
    return failure();
  }
  if (steps.size() > 1) {
    InFlightDiagnostic diag = module.emitError()
                              << "found " << steps.size()
                              << " functions marked '"
                              << TrainDialect::kStepAttrName
                              << "'; expected exactly one";
    for (FunctionOpInterface step : steps)
      diag.attachNote(step.getLoc()) << "training step here";
    return failure();
  }
  if (steps.front().isExternal()) {
    steps.front().emitOpError() << "is a training step but has no body";
    return failure();
  }
  return steps.front();
}
