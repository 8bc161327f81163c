//===- LowerToRuntime.cpp - a training step as calls into the runtime -----===//
//
// The step is straight-line code on SSA tensors, so buffer placement needs no
// general bufferization: one walk in program order gives every tensor a
// pointer, and the last use of each pointer is known exactly.
//
//===----------------------------------------------------------------------===//

#include "StepEmitter.h"

#include "autoshard/Conversion/ArenaPacking.h"
#include "autoshard/Conversion/MemoryPlan.h"
#include "autoshard/Conversion/Passes.h"
#include "autoshard/Conversion/StepBufferAssignment.h"
#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/TypeSwitch.h"

namespace autoshard {
#define GEN_PASS_DEF_LOWERTORUNTIMEPASS
#include "autoshard/Conversion/Passes.h.inc"
} // namespace autoshard

using namespace mlir;
using namespace autoshard;
using namespace autoshard::train;

namespace {

int64_t byteSize(Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  return type.getNumElements() *
         llvm::divideCeil(type.getElementTypeBitWidth(), 8);
}

/// Walks the tensor-level step in program order with the per-op rules, in
/// one of two modes. Placing (no `assigned`): decides where every buffer
/// lives from the lifetimes (the buffer assignment, assignStepBuffers),
/// building only the pointers the rules pass around into a scratch
/// `module`. Emitting: builds `symbol` in `module` with each buffer where
/// `assigned` puts it; it decides nothing, and fails if the rules ask for
/// a buffer the assignment does not hold. The step itself is only read.
class StepLowering : public StepEmitter {
public:
  StepLowering(ModuleOp module, FunctionOpInterface step,
               const StepBufferAssignment *assigned = nullptr,
               StringRef symbol = ABI_NAME(autoshard_step))
      : mod(module), step(step), symbol(symbol.str()), sig(step),
        b(module.getContext()), body(step.getFunctionBody().front()),
        assigned(assigned) {
    setPlacementOnly(!assigned);
  }

  LogicalResult run();

  /// The memory plan of the step (valid after run()).
  const MemoryPlan &memoryPlan() const {
    return assigned ? assigned->memory : plan;
  }
  /// The buffer assignment placed (valid after a placing run()).
  StepBufferAssignment assignment() const;
  /// The manifest's `site` records of the emitted step, in index order
  /// (valid after run()): one per op whose lowering called the runtime.
  ArrayRef<std::string> siteRecords() const { return sites; }

  Value buffer(Value tensor) override {
    Value ptr = bufferOf.lookup(tensor);
    assert(ptr && "tensor used before it has a buffer");
    return ptr;
  }
  Value output(Value result, int mayAliasOperand,
               ArrayRef<unsigned> reads) override;
  void alias(Value result, Value tensor, int64_t byteOffset) override {
    Value base = buffer(tensor);
    if (byteOffset == 0)
      return map(result, base);
    auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
    Value view = LLVM::GEPOp::create(b, currentLoc, ptrType, b.getI8Type(),
                                     base, ArrayRef<LLVM::GEPArg>{byteOffset});
    // The view keeps its base buffer alive.
    viewBase[view] = rootOf(base);
    map(result, view);
  }
  bool canReuse(Value input, Value result) override {
    if (assigned)
      return assigned->reusedInputs.lookup(result) == input;
    Value ptr = buffer(input);
    return temporaries.contains(ptr) && lastUseOf[ptr] == position &&
           !isDirectResult(result);
  }
  bool canReuseUntil(Value input, Value result, Operation *wait) override {
    if (assigned)
      return assigned->reusedInputs.lookup(result) == input;
    Value ptr = buffer(input);
    if (!temporaries.contains(ptr) || !input.hasOneUse() ||
        lastUseOf[ptr] != positionOf.lookup(wait) || isDirectResult(result))
      return false;
    // Views and aliases of the buffer (a reshape's result) must be dead
    // already: the op may write `result` before `wait`.
    auto mapped = tensorsOfRoot.find(ptr);
    if (mapped == tensorsOfRoot.end())
      return true;
    return llvm::all_of(mapped->second, [&](Value tensor) {
      return tensor == input || rootOf(bufferOf.lookup(tensor)) != ptr ||
             lastUse.lookup(tensor) <= position;
    });
  }
  void reuse(Value result, Value input) override {
    reusedInputs[result] = input;
    map(result, buffer(input));
  }
  Value packBuffer(int64_t bytes, Operation *until) override;
  void bindHandle(Value pending, Value handle) override {
    handles[pending] = handle;
  }
  Value handle(Value pending) override {
    Value h = handles.lookup(pending);
    assert(h && "a collective is waited before it starts");
    return h;
  }
  Value context() override { return ctx; }
  OpBuilder &builder() override { return b; }
  Location loc() override { return currentLoc; }
  ModuleOp module() override { return mod; }

private:
  /// Records that `tensor` lives in `ptr` (or a view into it), extending the
  /// lifetime of the buffer the pointer belongs to.
  void map(Value tensor, Value ptr) {
    bufferOf[tensor] = ptr;
    // Lifetimes are for placing.
    if (assigned)
      return;
    tensorsOfRoot[rootOf(ptr)].push_back(tensor);
    int &last = lastUseOf[rootOf(ptr)];
    last = std::max(last, lastUse.lookup(tensor));
  }
  /// The buffer a pointer points into.
  Value rootOf(Value ptr) const {
    auto it = viewBase.find(ptr);
    return it == viewBase.end() ? ptr : it->second;
  }
  /// Whether `result` is returned and may be written straight into the
  /// first result buffer that returns it.
  bool isDirectResult(Value result) {
    return firstReturnSlot.contains(result);
  }
  /// Whether result slot `slot` may be written as the op being lowered
  /// computes the result it returns first: see output().
  bool canWriteInPlace(unsigned slot, int mayAliasOperand,
                       ArrayRef<unsigned> reads);
  Value emitLoad(Value array, unsigned index);
  void placeInArena();
  /// Places the temporaries of one arena; returns its size.
  int64_t packArena(bool host);
  LogicalResult emitResultCopies();
  /// The arena buffer of `tensor`.
  Value allocate(Value tensor);
  /// A buffer of `bytes` at a fixed offset of the device or host arena for
  /// `tensor` (null: a pack buffer): placing, a new one whose offset
  /// placeInArena sets; emitting, the assignment's next one.
  Value arenaBuffer(Value tensor, bool host, int64_t bytes,
                    MemoryCategory category, std::string what);
  void classifyTensors();
  /// Precedes what `op`'s lowering emitted after `before` (null: the
  /// block's start) with asrt_op_site, and records the site; an op that
  /// emitted no runtime call gets none.
  void markSite(Operation *op, Block *entry, Operation *before);
  /// The layer of `op` for the trace: see OpSite (runtime/src/io/Manifest.h).
  std::string layerOf(Operation *op);
  std::vector<std::string> sites;
  /// The layer of the last op that read a parameter.
  std::string lastLayer;
  std::pair<MemoryCategory, std::string> describe(Value tensor);
  void computeMemoryPlan(func::FuncOp func);

  ModuleOp mod;
  FunctionOpInterface step;
  /// The entry point's name: autoshard_step, or autoshard_eval_step.
  std::string symbol;
  StepSignature sig;
  OpBuilder b;
  Block &body;
  /// The placement to emit; null when placing.
  const StepBufferAssignment *assigned;
  /// Emitting: the assignment's next buffer, and whether a buffer asked
  /// for was not the one it placed there.
  size_t nextAssigned = 0;
  bool divergedFromAssignment = false;
  Location currentLoc = UnknownLoc::get(mod.getContext());
  Value ctx, argPtrs, resultPtrs;
  SmallVector<Value> argBuffers, resultBuffers;

  /// Program position of each op of the step; the terminator is last.
  DenseMap<Operation *, int> positionOf;
  int position = 0;
  /// Position of the last use of each tensor (its definition if unused).
  DenseMap<Value, int> lastUse;
  /// The first result index returning each op result.
  DenseMap<Value, unsigned> firstReturnSlot;

  DenseMap<Value, Value> bufferOf;
  /// The tensors mapped into each buffer (a tensor mapped again elsewhere
  /// stays listed; bufferOf says where it is now).
  DenseMap<Value, SmallVector<Value, 2>> tensorsOfRoot;
  /// Pointers into the middle of another buffer, and that buffer.
  DenseMap<Value, Value> viewBase;
  /// Last position at which each pointer is read, over every tensor in it.
  DenseMap<Value, int> lastUseOf;
  /// Pointers this step allocated and must free.
  llvm::SetVector<Value> temporaries;
  /// Result indices already written in place, and the values written so.
  llvm::SmallDenseSet<unsigned> writtenResults;
  llvm::DenseSet<Value> inPlaceResults;
  /// Values computed over a dying input's buffer, and that input.
  DenseMap<Value, Value> reusedInputs;
  /// The runtime handle of each started collective.
  DenseMap<Value, Value> handles;
  /// The op being lowered.
  Operation *currentOp = nullptr;

  /// Memory plan inputs: each allocation's bytes, category and what it
  /// holds; the gradient and gathered-parameter tensors of the step and
  /// the parameter each belongs to.
  using Allocation = StepArenaBuffer;
  /// The arena's base pointer (asrt_arena, called once at the top of the
  /// step when it has temporaries), where the call goes, and its size.
  Value arena, hostArena;
  Operation *arenaPoint = nullptr;
  int64_t arenaBytes = 0, hostArenaBytes = 0;
  DenseMap<Value, Allocation> allocations;
  DenseMap<Value, StringRef> gradientOf, gatheredParam;
  /// Of the gathered parameters, those the plan keeps whole.
  DenseSet<Value> wholeParam;
  /// The parameter arguments that are f32 master weights: the step casts
  /// them (or their shards) to a narrower compute copy.
  DenseSet<unsigned> masterArgs;
  /// A parameter argument's category: its master weight or the parameter.
  MemoryCategory paramCategory(unsigned argIndex) const {
    return masterArgs.contains(argIndex) ? MemoryCategory::MasterWeights
                                         : MemoryCategory::Parameters;
  }
  MemoryPlan plan;
};

Value StepLowering::emitLoad(Value array, unsigned index) {
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  // A buffer assignment needs only a distinct pointer per argument and
  // result, not the address of its slot.
  if (isPlacementOnly())
    return LLVM::LoadOp::create(b, currentLoc, ptrType, array);
  Value slot = LLVM::GEPOp::create(b, currentLoc, ptrType, ptrType, array,
                                   ArrayRef<LLVM::GEPArg>{int32_t(index)});
  return LLVM::LoadOp::create(b, currentLoc, ptrType, slot);
}

bool StepLowering::canWriteInPlace(unsigned slot, int mayAliasOperand,
                                   ArrayRef<unsigned> reads) {
  // The caller may pass the updated argument's own buffer as this result's
  // buffer. Writing there now is safe only if nothing reads that argument
  // after this op, and this op reads it only through the operand the
  // runtime lets it overwrite elementwise.
  std::optional<unsigned> updated = sig.getUpdatedArg(slot);
  if (!updated)
    return true;
  Value argPtr = argBuffers[*updated];
  // The op being lowered writes the result: for a started collective
  // that is the start, not the wait that defines the result.
  Operation *op = currentOp;
  bool safe = lastUseOf[argPtr] <= position;
  auto readsArgument = [&](unsigned number) {
    return static_cast<int>(number) != mayAliasOperand &&
           bufferOf.lookup(op->getOperand(number)) == argPtr;
  };
  // A multi-tensor op names the few operands each result's update
  // reads: looking at those alone keeps its lowering linear.
  if (reads.empty()) {
    for (unsigned number = 0, e = op->getNumOperands(); number < e; ++number)
      safe &= !readsArgument(number);
  } else {
    for (unsigned number : reads)
      safe &= !readsArgument(number);
  }
  return safe;
}

Value StepLowering::output(Value result, int mayAliasOperand,
                          ArrayRef<unsigned> reads) {
  auto slotIt = firstReturnSlot.find(result);
  if (slotIt != firstReturnSlot.end()) {
    unsigned slot = slotIt->second;
    if (assigned ? assigned->inPlaceResults.contains(result)
                 : canWriteInPlace(slot, mayAliasOperand, reads)) {
      writtenResults.insert(slot);
      inPlaceResults.insert(result);
      map(result, resultBuffers[slot]);
      return resultBuffers[slot];
    }
  }
  Value ptr = allocate(result);
  temporaries.insert(ptr);
  map(result, ptr);
  return ptr;
}

/// Buffers in the arena start at multiples of this, as asrt_alloc's do.
constexpr int64_t kArenaAlignment = 64;

/// A buffer at a fixed offset of the step's arena: the offset is a
/// constant the lowering sets once every lifetime is known.
Value StepLowering::allocate(Value tensor) {
  // Offloaded values (host ops' results, copies to the host, NVMe reads)
  // live in the host arena. What a buffer holds is for the reports, which
  // read the assignment: described only when placing.
  auto [category, what] = assigned
                              ? std::pair(MemoryCategory::Other, std::string())
                              : describe(tensor);
  return arenaBuffer(tensor, getMemorySpace(tensor) == MemorySpace::Host,
                     byteSize(tensor), category, std::move(what));
}

Value StepLowering::packBuffer(int64_t bytes, Operation *until) {
  Value ptr = arenaBuffer(Value(), /*host=*/false, bytes,
                          MemoryCategory::Communication, "bucket pack buffer");
  temporaries.insert(ptr);
  lastUseOf[ptr] = until ? positionOf.lookup(until) : position;
  return ptr;
}

Value StepLowering::arenaBuffer(Value tensor, bool host, int64_t bytes,
                                MemoryCategory category, std::string what) {
  Value &base = host ? hostArena : arena;
  if (!base) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(arenaPoint);
    base = host ? call(ABI_FUNCTION(asrt_host_arena))
                : call(ABI_FUNCTION(asrt_arena));
  }
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  if (assigned) {
    // The rules ask for buffers in the order they did when placing: the
    // next one placed is this one, or the two walks disagree.
    int64_t offset = 0;
    if (nextAssigned < assigned->buffers.size()) {
      const StepArenaBuffer &placed = assigned->buffers[nextAssigned];
      if (placed.tensor == tensor && placed.host == host &&
          placed.bytes == bytes)
        offset = placed.offset;
      else
        divergedFromAssignment = true;
    } else {
      divergedFromAssignment = true;
    }
    ++nextAssigned;
    return LLVM::GEPOp::create(b, currentLoc, ptrType, b.getI8Type(), base,
                               ValueRange{i64(offset)});
  }
  // Placing needs only a distinct pointer per buffer: its offset is kept
  // in the Allocation, with no constant to build.
  Value ptr = LLVM::GEPOp::create(b, currentLoc, ptrType, b.getI8Type(), base,
                                  ValueRange{i64(0)});
  Allocation &a = allocations[ptr];
  a.tensor = tensor;
  a.bytes = bytes;
  a.category = category;
  a.what = std::move(what);
  a.firstUse = position;
  a.host = host;
  return ptr;
}

LogicalResult StepLowering::emitResultCopies() {
  Operation *terminator = body.getTerminator();
  currentLoc = terminator->getLoc();
  SmallVector<std::pair<unsigned, Value>> copies;
  for (auto [slot, value] : llvm::enumerate(terminator->getOperands())) {
    // An NVMe result went to its file (train.nvme_write).
    if (writtenResults.contains(slot) ||
        getResultMemorySpace(step, slot) == MemorySpace::Nvme)
      continue;
    Value source = buffer(value);
    // A result that returns another argument's buffer reads it before any
    // copy can overwrite that argument: stage it.
    auto argIt = llvm::find(argBuffers, source);
    std::optional<unsigned> updated = sig.getUpdatedArg(slot);
    if (argIt != argBuffers.end() &&
        (!updated || argBuffers[*updated] != source)) {
      Value staged = allocate(value);
      call(ABI_FUNCTION(asrt_copy), {staged, source, i64(byteSize(value))});
      temporaries.insert(staged);
      lastUseOf[staged] = position;
      source = staged;
    }
    copies.push_back({static_cast<unsigned>(slot), source});
  }
  for (auto [slot, source] : copies)
    call(ABI_FUNCTION(asrt_copy),
         {resultBuffers[slot], source,
          i64(byteSize(terminator->getOperand(slot)))});
  return success();
}

/// Places every temporary in the arena so that buffers alive at the same
/// position never overlap (packArena); the arena is the high-water mark.
void StepLowering::placeInArena() {
  for (Value ptr : temporaries)
    allocations.find(ptr)->second.lastUse = lastUseOf[ptr];
  arenaBytes = packArena(/*host=*/false);
  hostArenaBytes = packArena(/*host=*/true);
}

int64_t StepLowering::packArena(bool host) {
  SmallVector<Allocation *> placed;
  SmallVector<ArenaBuffer> buffers;
  for (Value ptr : temporaries) {
    Allocation &a = allocations.find(ptr)->second;
    if (a.host != host)
      continue;
    placed.push_back(&a);
    buffers.push_back({std::max<int64_t>(llvm::alignTo(a.bytes, kArenaAlignment),
                                         kArenaAlignment),
                       a.firstUse, a.lastUse});
  }
  SmallVector<int64_t> offsets;
  int64_t top = autoshard::packArena(buffers, offsets);
  for (auto [a, offset] : llvm::zip(placed, offsets))
    a->offset = offset;
  return top;
}

/// The parameter name of a value that is a parameter argument, its bf16
/// copy, or this rank's shard of it.
static std::optional<unsigned> paramArgOf(Value v, const StepSignature &sig) {
  // Through the copies of offload, and an NVMe read of the argument.
  auto throughTransfers = [](Value v) {
    while (Operation *def = v.getDefiningOp()) {
      if (auto wait = dyn_cast<TransferWaitOp>(def)) {
        v = wait.getHandle().getDefiningOp<TransferStartOp>().getInput();
        continue;
      }
      if (!isa<ToHostOp, ToDeviceOp, NvmeReadOp>(def))
        break;
      v = def->getOperand(0);
    }
    return v;
  };
  v = throughTransfers(v);
  if (auto cast = v.getDefiningOp<CastOp>())
    v = throughTransfers(cast.getInput());
  if (auto shard = v.getDefiningOp<ShardOfOp>())
    v = throughTransfers(shard.getInput());
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || sig.getArgs()[arg.getArgNumber()].role != Role::Param)
    return std::nullopt;
  return arg.getArgNumber();
}

/// The name of the parameter `v` holds (a copy, a transfer or a shard of).
static std::optional<StringRef> paramNameOf(Value v, const StepSignature &sig) {
  if (std::optional<unsigned> index = paramArgOf(v, sig))
    return StringRef(sig.getArgs()[*index].name);
  return std::nullopt;
}

/// A parameter's layer: its train.unit, or outside every unit its module
/// path ("ln_f" for "ln_f.weight"; "wte" for "wte").
static std::string paramLayer(StringRef name, const StepSignature &sig) {
  if (std::optional<unsigned> index = sig.getArgIndex(name)) {
    const StepValue &arg = sig.getArgs()[*index];
    if (arg.role == Role::Param)
      return !arg.unit.empty() ? arg.unit.str()
                               : name.rsplit('.').first.str();
  }
  return name.str();
}

/// A location as the trace shows it: "file.mlir:LINE" (the file's base
/// name), a NameLoc's name, the first known part of a fused one; empty
/// when unknown. Characters a manifest field cannot hold become '_'.
static std::string siteLocation(Location loc) {
  std::string text;
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    StringRef name = file.getFilename().getValue();
    text = (name.rsplit('/').second.empty() ? name : name.rsplit('/').second)
               .str() +
           ":" + std::to_string(file.getLine());
  } else if (auto named = dyn_cast<NameLoc>(loc)) {
    text = named.getName().str();
  } else if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location part : fused.getLocations())
      if (!(text = siteLocation(part)).empty())
        break;
  } else if (auto site = dyn_cast<CallSiteLoc>(loc)) {
    text = siteLocation(site.getCallee());
  }
  for (char &c : text)
    if (!llvm::isAlnum(c) && !StringRef("_.:/-[]()<>").contains(c))
      c = '_';
  return text;
}

/// "8x32xf32,32x32xf32->8x32xf32": the op's tensor operands and results.
static std::string siteShapes(Operation *op) {
  auto list = [](auto types) {
    std::string text;
    for (Type type : types) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor)
        continue;
      if (!text.empty())
        text += ",";
      for (int64_t dim : tensor.getShape())
        text += std::to_string(dim) + "x";
      std::string element;
      llvm::raw_string_ostream os(element);
      tensor.getElementType().print(os);
      text += element;
    }
    return text;
  };
  return list(op->getOperandTypes()) + "->" + list(op->getResultTypes());
}

std::string StepLowering::layerOf(Operation *op) {
  for (Value operand : op->getOperands()) {
    std::optional<StringRef> name = paramNameOf(operand, sig);
    if (!name)
      if (auto it = gatheredParam.find(operand); it != gatheredParam.end())
        name = it->second;
    if (name)
      return lastLayer = paramLayer(*name, sig);
  }
  // Activations, their gradients, the loss: the layer of the op before.
  return lastLayer;
}

void StepLowering::markSite(Operation *op, Block *entry, Operation *before) {
  auto first = before ? std::next(before->getIterator()) : entry->begin();
  std::string layer = layerOf(op);
  for (Operation &emitted : llvm::make_range(first, entry->end())) {
    // The arena's base pointer is the step's, fetched once where the
    // first op needs it.
    auto callOp = dyn_cast<func::CallOp>(emitted);
    if (!callOp || !callOp.getCallee().starts_with("asrt_") ||
        callOp.getCallee() == ABI_NAME(asrt_arena) ||
        callOp.getCallee() == ABI_NAME(asrt_host_arena))
      continue;
    // Before everything the op emitted, so that its constants and call
    // stay together.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(&*first);
    int32_t index = static_cast<int32_t>(sites.size());
    call(ABI_FUNCTION(asrt_op_site), {i32(index)});
    std::string record = "site " + std::to_string(index) +
                         " op=" + op->getName().getStringRef().str();
    if (!layer.empty())
      record += " layer=" + layer;
    if (std::string loc = siteLocation(op->getLoc()); !loc.empty())
      record += " loc=" + loc;
    record += " shapes=" + siteShapes(op);
    sites.push_back(std::move(record));
    return;
  }
}

/// For the memory plan: which tensors are gradients (of which parameter)
/// and which are gathered parameters. A gradient is what an optimizer
/// reads as one, and what flows into it through reductions, casts, sums
/// and scales.
void StepLowering::classifyTensors() {
  // A parameter cast to a narrower type is a master weight.
  body.walk([&](CastOp cast) {
    if (std::optional<unsigned> arg = paramArgOf(cast.getInput(), sig))
      if (getElementTypeOrSelf(cast.getType()).getIntOrFloatBitWidth() <
          getElementTypeOrSelf(cast.getInput()).getIntOrFloatBitWidth())
        masterArgs.insert(*arg);
  });
  SmallVector<std::pair<Value, StringRef>> worklist;
  body.walk([&](OptimizerOpInterface optimizer) {
    for (auto [param, grad] : llvm::zip(optimizer.getParamOperands(),
                                        optimizer.getGradientOperands()))
      if (std::optional<StringRef> name = paramNameOf(param.get(), sig))
        worklist.push_back({grad.get(), *name});
  });
  while (!worklist.empty()) {
    auto [value, name] = worklist.pop_back_val();
    if (!gradientOf.try_emplace(value, name).second)
      continue;
    Operation *def = value.getDefiningOp();
    if (!def)
      continue;
    unsigned index = cast<OpResult>(value).getResultNumber();
    if (auto wait = dyn_cast<CollectiveWaitOp>(def)) {
      auto start = wait.getHandle().getDefiningOp<CollectiveStartOp>();
      worklist.push_back({start.getInputs()[index], name});
    } else if (isa<shard::AllReduceOp, AllReduceBucketOp,
                   ReduceScatterShardsOp>(def)) {
      worklist.push_back({def->getOperand(index), name});
    } else if (auto wait = dyn_cast<TransferWaitOp>(def)) {
      worklist.push_back(
          {wait.getHandle().getDefiningOp<TransferStartOp>().getInput(),
           name});
    } else if (isa<CastOp, AddOp, ScaleOp, ToHostOp>(def)) {
      for (Value operand : def->getOperands())
        worklist.push_back({operand, name});
    }
  }
  // A parameter the plan keeps whole (ZeRO-1/2, a replicated group) is
  // gathered once a step from the updated shards: its whole copy is the
  // rank's parameter, not one gathered for its use.
  auto plan = step->getAttrOfType<PlanAttr>(TrainDialect::kPlanAttrName);
  auto noteGathered = [&](ValueRange inputs, ValueRange results) {
    for (auto [input, result] : llvm::zip(inputs, results))
      if (std::optional<StringRef> name = paramNameOf(input, sig)) {
        gatheredParam[result] = *name;
        ParamGroupAttr group =
            plan ? plan.groupOf(
                       *name,
                       cast<ShapedType>(result.getType()).getNumElements())
                 : ParamGroupAttr();
        if (plan && (group ? group.getParameters() : plan.getParameters()) ==
                        Placement::Replicated)
          wholeParam.insert(result);
      }
  };
  for (Operation &op : body) {
    if (auto gather = dyn_cast<AllGatherShardsOp>(op))
      noteGathered(gather.getInputs(), gather.getResults());
    if (auto wait = dyn_cast<CollectiveWaitOp>(op)) {
      auto start = wait.getHandle().getDefiningOp<CollectiveStartOp>();
      if (start.getKind() == CollectiveKind::AllGatherShards)
        noteGathered(start.getInputs(), wait.getResults());
    }
  }
}

std::pair<MemoryCategory, std::string> StepLowering::describe(Value tensor) {
  if (auto it = gatheredParam.find(tensor); it != gatheredParam.end())
    return {wholeParam.contains(tensor) ? MemoryCategory::Parameters
                                        : MemoryCategory::Gathered,
            ("gathered " + it->second).str()};
  if (auto it = gradientOf.find(tensor); it != gradientOf.end())
    return {MemoryCategory::Gradients, ("gradient of " + it->second).str()};
  if (auto arg = dyn_cast<BlockArgument>(tensor))
    return {MemoryCategory::Other,
            ("copy of " + sig.getArgs()[arg.getArgNumber()].name).str()};
  Operation *def = tensor.getDefiningOp();
  unsigned index = cast<OpResult>(tensor).getResultNumber();
  // Offload's copies and NVMe reads hold what they copy.
  auto transferStart = [](Operation *def) {
    auto wait = dyn_cast<TransferWaitOp>(def);
    return wait ? wait.getHandle().getDefiningOp<TransferStartOp>()
                : TransferStartOp();
  };
  if (isa<ToHostOp, ToDeviceOp, NvmeReadOp>(def) || transferStart(def)) {
    TransferStartOp start = transferStart(def);
    bool nvme = isa<NvmeReadOp>(def) ||
                (start && start.getKind() == TransferKind::NvmeRead);
    bool toHost = isa<ToHostOp>(def) ||
                  (start && start.getKind() == TransferKind::ToHost);
    std::string how = nvme     ? "NVMe read of "
                      : toHost ? "host copy of "
                               : "device copy of ";
    Value source = start ? start.getInput() : def->getOperand(0);
    // On the device, a copy is staging for its use, whatever it holds.
    if (!nvme && !toHost) {
      std::string what =
          isa<BlockArgument>(source)
              ? sig.getArgs()[cast<BlockArgument>(source).getArgNumber()]
                    .name.str()
              : describe(source).second;
      return {MemoryCategory::OffloadStaging, how + what};
    }
    if (auto arg = dyn_cast<BlockArgument>(source)) {
      const StepValue &value = sig.getArgs()[arg.getArgNumber()];
      MemoryCategory category = value.role == Role::Param
                                    ? paramCategory(arg.getArgNumber())
                                : value.role == Role::OptState
                                    ? MemoryCategory::OptimizerStates
                                    : MemoryCategory::Other;
      return {category, how + value.name.str()};
    }
    auto [category, what] = describe(source);
    return {category, how + what};
  }
  // A parameter's compute copy (bf16 under mixed precision), whole or this
  // rank's shard of it before its gather.
  if (isa<CastOp>(def))
    if (std::optional<StringRef> name = paramNameOf(def->getOperand(0), sig))
      return {MemoryCategory::Parameters, ("compute copy of " + *name).str()};
  // A multi-tensor update's results: the new parameters, then the first
  // and the second moments, each in tensor order.
  auto updateCategory = [&](Value param) {
    std::optional<unsigned> arg = paramArgOf(param, sig);
    return arg ? paramCategory(*arg) : MemoryCategory::Parameters;
  };
  if (auto multi = dyn_cast<AdamwMultiOp>(def)) {
    unsigned n = multi.getNumTensors();
    std::string name =
        paramNameOf(multi.getParams()[index % n], sig)
            .value_or("a parameter")
            .str();
    if (index < n)
      return {updateCategory(multi.getParams()[index]), "update of " + name};
    return {MemoryCategory::OptimizerStates, "state update of " + name};
  }
  if (auto optimizer = dyn_cast<OptimizerOpInterface>(def)) {
    std::string name =
        paramNameOf(optimizer.getParamOperands()[0].get(), sig)
            .value_or("a parameter")
            .str();
    if (index == 0)
      return {updateCategory(optimizer.getParamOperands()[0].get()),
              "update of " + name};
    return {MemoryCategory::OptimizerStates, "state update of " + name};
  }
  // ZeRO-1/2 gather the updated shards of replicated parameters.
  Value source;
  if (auto gather = dyn_cast<AllGatherShardsOp>(def))
    source = gather.getInputs()[index];
  if (auto wait = dyn_cast<CollectiveWaitOp>(def))
    source =
        wait.getHandle().getDefiningOp<CollectiveStartOp>().getInputs()[index];
  if (source && source.getDefiningOp<OptimizerOpInterface>())
    return {MemoryCategory::Parameters, "gathered update"};
  // A fused op's result is named after the op that computes it unfused.
  StringRef opName =
      TypeSwitch<Operation *, StringRef>(def)
          .Case<LinearGeluOp, LinearGradGeluOp, LinearGradWeightBiasOp>(
              [&](auto fused) { return fused.getUnfusedOpName(index); })
          .Default([](Operation *op) { return op->getName().getStringRef(); });
  return {MemoryCategory::Activations, ("result of " + opName).str()};
}

/// The plan of the emitted step: its allocations and frees in program
/// order (the buckets' pack buffers among them) on top of the persistent
/// state.
void StepLowering::computeMemoryPlan(func::FuncOp func) {
  plan = MemoryPlan();
  // Of an argument (a result that is not an update is never a master).
  auto persistentCategory = [&](const StepValue &value, bool argument) {
    switch (value.role) {
    case Role::Param:
      return argument ? paramCategory(value.index)
                      : MemoryCategory::Parameters;
    case Role::OptState:
      return MemoryCategory::OptimizerStates;
    case Role::Input:
    case Role::Label:
      return MemoryCategory::Batch;
    case Role::Grad:
      return MemoryCategory::Gradients;
    default:
      return MemoryCategory::Other;
    }
  };
  std::array<int64_t, kNumMemoryCategories> persistentBy{};
  SmallVector<std::pair<std::string, int64_t>> largest;
  auto addPersistent = [&](const StepValue &value, bool argument, Type type,
                           MemorySpace space = MemorySpace::Device) {
    auto tensor = cast<RankedTensorType>(type);
    int64_t bytes = tensor.getNumElements() *
                    llvm::divideCeil(tensor.getElementTypeBitWidth(), 8);
    // Offloaded state is not device memory: the host's, or a file's.
    if (space == MemorySpace::Host) {
      plan.hostPersistent += bytes;
      return;
    }
    if (space == MemorySpace::Nvme) {
      plan.nvme += bytes;
      return;
    }
    plan.persistent += bytes;
    persistentBy[static_cast<int>(persistentCategory(value, argument))] +=
        bytes;
  };
  for (const StepValue &arg : sig.getArgs())
    addPersistent(arg, /*argument=*/true, step.getArgumentTypes()[arg.index],
                  getArgMemorySpace(step, arg.index));
  for (const StepValue &result : sig.getResults())
    if (!sig.getUpdatedArg(result.index))
      addPersistent(result, /*argument=*/false,
                    step.getResultTypes()[result.index]);

  // The step's buffers are the arena; the most they hold at once (each
  // alive from its op to its last use) is its live peak.
  plan.stepPeak = arenaBytes;
  plan.hostArena = hostArenaBytes;
  // Each buffer adds its bytes where it starts and takes them back after
  // its last use; the running sums are what is alive at each position.
  SmallVector<int64_t> liveAt(positionOf.size() + 2, 0);
  SmallVector<std::array<int64_t, kNumMemoryCategories>> liveBy(
      positionOf.size() + 2);
  for (Value ptr : temporaries) {
    const Allocation &a = allocations.find(ptr)->second;
    if (a.host || a.lastUse < a.firstUse)
      continue;
    int c = static_cast<int>(a.category);
    liveAt[a.firstUse] += a.bytes;
    liveAt[a.lastUse + 1] -= a.bytes;
    liveBy[a.firstUse][c] += a.bytes;
    liveBy[a.lastUse + 1][c] -= a.bytes;
  }
  for (size_t p = 1; p < liveAt.size(); ++p) {
    liveAt[p] += liveAt[p - 1];
    for (int c = 0; c < kNumMemoryCategories; ++c)
      liveBy[p][c] += liveBy[p - 1][c];
  }
  for (const auto &by : liveBy)
    for (int c = 0; c < kNumMemoryCategories; ++c)
      plan.stepMaxBy[c] = std::max(plan.stepMaxBy[c], by[c]);
  // The gradients alive until the optimizer (from the first optimizer op
  // on) at each position, beside the rest: what the cost model needs to
  // tell another plan's peak from this one's.
  int optimizerStart = static_cast<int>(positionOf.size());
  for (Operation &op : body)
    if (isa<OptimizerOpInterface, AdamwMultiOp>(op)) {
      optimizerStart = positionOf.lookup(&op);
      break;
    }
  // Beside them, the parameter copies made before the optimizer (the
  // compute copies of a mixed-precision step).
  SmallVector<int64_t> heldAt(liveAt.size(), 0), copiesAt(liveAt.size(), 0);
  // And the gradients whose bucket's reduction has completed: its pack
  // buffer, freed at the collective's completion, holds as many bytes.
  SmallVector<int64_t> reducedAt(liveAt.size(), 0);
  bool packed = false;
  for (Value ptr : temporaries) {
    const Allocation &a = allocations.find(ptr)->second;
    if (a.host || a.lastUse < a.firstUse)
      continue;
    if (a.category == MemoryCategory::Communication &&
        a.lastUse < optimizerStart) {
      reducedAt[a.lastUse + 1] += a.bytes;
      packed = true;
    }
    SmallVector<int64_t> *at = nullptr;
    if (a.category == MemoryCategory::Gradients && a.lastUse >= optimizerStart)
      at = &heldAt;
    if ((a.category == MemoryCategory::Parameters ||
         a.category == MemoryCategory::MasterWeights) &&
        a.firstUse < optimizerStart)
      at = &copiesAt;
    if (!at)
      continue;
    (*at)[a.firstUse] += a.bytes;
    (*at)[a.lastUse + 1] -= a.bytes;
  }
  // And the parameters in use: each from one read to its next, unless a
  // loss comes between (the forward and the backward pass gather or fetch a
  // parameter apart, and each micro-batch again) and another parameter is
  // read between too (the last one read by the forward pass, read first by
  // the backward pass, stays across the loss). The optimizer reads
  // parameters where they are kept, whole or shard: no plan gathers or
  // fetches one for it.
  SmallVector<int> losses;
  DenseMap<unsigned, SmallVector<int>> readsOfParam;
  // A parameter's bytes as the step reads it: the largest width it is
  // read in (the compute copy of a mixed-precision step).
  DenseMap<unsigned, int64_t> readBytesOfParam;
  SmallVector<std::pair<int, unsigned>> paramReads;
  for (Operation &op : body) {
    int at = positionOf.lookup(&op);
    if (op.hasTrait<LossTrait>())
      losses.push_back(at);
    if (isa<CastOp, OptimizerOpInterface, AdamwMultiOp>(op))
      continue;
    for (Value operand : op.getOperands())
      if (std::optional<unsigned> arg = paramArgOf(operand, sig)) {
        int64_t &bytes = readBytesOfParam[*arg];
        bytes = std::max(bytes, byteSize(operand));
        SmallVector<int> &reads = readsOfParam[*arg];
        if (reads.empty() || reads.back() != at) {
          reads.push_back(at);
          paramReads.push_back({at, *arg});
        }
      }
  }
  // paramReads is in program order already (ops are visited in order).
  // Whether a parameter that `other` selects is read after `from` and
  // before `to`.
  auto readBetween = [&](int from, int to,
                         function_ref<bool(unsigned)> other) {
    for (auto it = llvm::upper_bound(paramReads, std::make_pair(from, ~0u));
         it != paramReads.end() && it->first < to; ++it)
      if (other(it->second))
        return true;
    return false;
  };
  auto otherParamReadBetween = [&](unsigned param, int from, int to) {
    return readBetween(from, to, [&](unsigned p) { return p != param; });
  };
  SmallVector<int64_t> inUseAt(liveAt.size(), 0),
      acrossLossAt(liveAt.size(), 0);
  // And by unit (below): a parameter outside the blocks is its own unit.
  SmallVector<int64_t> unitInUseAt(liveAt.size(), 0);
  for (auto &[param, reads] : readsOfParam)
    for (size_t i = 0; i < reads.size(); ++i) {
      int from = reads[i], to = reads[i];
      const int64_t bytes = readBytesOfParam.lookup(param);
      if (i + 1 < reads.size()) {
        auto loss = llvm::lower_bound(losses, from);
        if (loss == losses.end() || *loss >= reads[i + 1]) {
          to = reads[i + 1];
        } else if (!otherParamReadBetween(param, from, reads[i + 1])) {
          to = reads[i + 1];
          acrossLossAt[from + 1] += bytes;
          acrossLossAt[to] -= bytes;
        }
      }
      inUseAt[from] += bytes;
      inUseAt[to + 1] -= bytes;
      if (sig.getUnitIndex(param) < 0) {
        unitInUseAt[from] += bytes;
        unitInUseAt[to + 1] -= bytes;
      }
    }
  // And the blocks in use, as a plan that gathers a whole block for the
  // use of any of its parameters holds them (FSDP): a block's parameters
  // from the first read of one of them to the last, within a pass (split
  // where a loss comes between two reads and another unit's parameter is
  // read between them too).
  DenseMap<int64_t, SmallVector<int>> readsOfUnit;
  DenseMap<int64_t, int64_t> bytesOfUnit;
  for (auto &[param, reads] : readsOfParam) {
    int64_t unit = sig.getUnitIndex(param);
    if (unit < 0)
      continue;
    readsOfUnit[unit].append(reads.begin(), reads.end());
    bytesOfUnit[unit] += readBytesOfParam.lookup(param);
  }
  auto otherUnitReadBetween = [&](int64_t unit, int from, int to) {
    return readBetween(from, to, [&](unsigned p) {
      return sig.getUnitIndex(p) != unit;
    });
  };
  for (auto &[unit, reads] : readsOfUnit) {
    llvm::sort(reads);
    reads.erase(llvm::unique(reads), reads.end());
    const int64_t bytes = bytesOfUnit.lookup(unit);
    int from = reads.front();
    for (size_t i = 0; i < reads.size(); ++i) {
      bool last = i + 1 == reads.size();
      if (!last) {
        auto loss = llvm::lower_bound(losses, reads[i]);
        if (loss == losses.end() || *loss >= reads[i + 1] ||
            !otherUnitReadBetween(unit, reads[i], reads[i + 1]))
          continue;
      }
      unitInUseAt[from] += bytes;
      unitInUseAt[reads[i] + 1] -= bytes;
      if (!last)
        from = reads[i + 1];
    }
  }
  // And the parameters each op reads, and the next op that reads any.
  SmallVector<int64_t> readAt(liveAt.size(), 0), nextReadAt(liveAt.size(), 0);
  for (auto [at, param] : paramReads)
    readAt[at] += readBytesOfParam.lookup(param);
  for (int p = static_cast<int>(liveAt.size()) - 2; p >= 0; --p)
    nextReadAt[p] = readAt[p + 1] > 0 ? readAt[p + 1] : nextReadAt[p + 1];
  // On one rank a reduction packs nothing: it completes at its wait.
  if (!packed)
    for (Operation &op : body)
      if (auto wait = dyn_cast<CollectiveWaitOp>(op)) {
        int at = positionOf.lookup(&op);
        if (at >= optimizerStart)
          continue;
        for (Value result : wait.getResults())
          reducedAt[at + 1] += byteSize(result);
      }
  // And those of the reductions that completed last at each position.
  SmallVector<int64_t> lastReducedAt(liveAt.size(), 0);
  for (size_t p = 0; p < liveAt.size(); ++p)
    lastReducedAt[p] = reducedAt[p] > 0 ? reducedAt[p]
                       : p > 0          ? lastReducedAt[p - 1]
                                        : 0;
  std::vector<cost::StepMoment> moments;
  moments.reserve(liveAt.size());
  for (size_t p = 0; p < liveAt.size(); ++p) {
    if (p > 0) {
      heldAt[p] += heldAt[p - 1];
      copiesAt[p] += copiesAt[p - 1];
      inUseAt[p] += inUseAt[p - 1];
      acrossLossAt[p] += acrossLossAt[p - 1];
      reducedAt[p] += reducedAt[p - 1];
      unitInUseAt[p] += unitInUseAt[p - 1];
    }
    cost::StepMoment &moment = moments.emplace_back();
    moment.heldGradients = heldAt[p];
    moment.others = liveAt[p] - heldAt[p];
    moment.computeCopies = copiesAt[p];
    moment.paramBytesInUse = inUseAt[p];
    moment.onlyAcrossLoss = inUseAt[p] > 0 && acrossLossAt[p] == inUseAt[p];
    moment.unreducedGradients = std::max<int64_t>(heldAt[p] - reducedAt[p], 0);
    moment.unitBytesInUse = unitInUseAt[p];
    moment.paramBytesRead = readAt[p];
    moment.nextParamBytesRead = nextReadAt[p];
    moment.lastReducedGradients = lastReducedAt[p];
    auto live = [&](MemoryCategory c) {
      return liveBy[p][static_cast<int>(c)];
    };
    moment.activations = live(MemoryCategory::Activations);
    moment.parameterBuffers =
        live(MemoryCategory::Parameters) + live(MemoryCategory::MasterWeights);
    moment.summingGradients = live(MemoryCategory::Gradients) - heldAt[p];
    moment.communication = live(MemoryCategory::Communication);
    moment.batch = live(MemoryCategory::Batch);
  }
  plan.stepMoments = cost::peakCandidates(std::move(moments));
  int peakPosition = 0;
  for (auto [p, bytes] : llvm::enumerate(liveAt))
    if (bytes > plan.stepLive) {
      plan.stepLive = bytes;
      peakPosition = static_cast<int>(p);
    }
  plan.atPeak = persistentBy;
  SmallVector<const Allocation *> liveAtPeak;
  for (Value ptr : temporaries) {
    const Allocation &a = allocations.find(ptr)->second;
    if (!a.host && a.firstUse <= peakPosition && peakPosition <= a.lastUse)
      liveAtPeak.push_back(&a);
  }
  for (const Allocation *a : liveAtPeak) {
    plan.atPeak[static_cast<int>(a->category)] += a->bytes;
    largest.push_back({a->what, a->bytes});
  }
  llvm::sort(largest, [](const auto &x, const auto &y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  largest.truncate(std::min<size_t>(largest.size(), 5));
  plan.largestAtPeak.assign(largest.begin(), largest.end());
}

LogicalResult StepLowering::run() {
  if (!llvm::hasSingleElement(step.getFunctionBody()))
    return step.emitOpError()
           << "has " << step.getFunctionBody().getBlocks().size()
           << " blocks; a training step is straight-line code in one block";

  // Positions and last uses, on the tensor program.
  for (Operation &op : body)
    positionOf[&op] = position++;
  int end = positionOf[body.getTerminator()];
  auto noteUses = [&](Value v, int def) {
    int last = def;
    for (Operation *user : v.getUsers())
      last = std::max(last, positionOf.lookup(user));
    lastUse[v] = last;
  };
  for (BlockArgument arg : body.getArguments())
    noteUses(arg, 0);
  for (Operation &op : body.without_terminator())
    for (Value result : op.getResults())
      noteUses(result, positionOf[&op]);
  for (auto [slot, value] :
       llvm::enumerate(body.getTerminator()->getOperands()))
    if (isa<OpResult>(value))
      firstReturnSlot.try_emplace(value, slot);
  // A started collective or transfer reads its inputs until its wait.
  for (auto start : body.getOps<CollectiveStartOp>()) {
    int wait = positionOf[*start.getHandle().user_begin()];
    for (Value input : start.getInputs())
      lastUse[input] = std::max(lastUse[input], wait);
  }
  for (auto start : body.getOps<TransferStartOp>()) {
    int wait = positionOf[*start.getHandle().user_begin()];
    lastUse[start.getInput()] = std::max(lastUse[start.getInput()], wait);
  }
  classifyTensors();

  // The entry point abi.h declares; the evaluation step's has its type.
  static_assert(
      std::is_same_v<decltype(autoshard_step), decltype(autoshard_eval_step)>);
  b.setInsertionPointToEnd(mod.getBody());
  auto func = func::FuncOp::create(
      b, step.getLoc(), symbol,
      rtabi::Signature<decltype(autoshard_step)>::get(b.getContext()));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  ctx = entry->getArgument(0);
  argPtrs = entry->getArgument(1);
  resultPtrs = entry->getArgument(2);
  currentLoc = step.getLoc();
  for (BlockArgument arg : body.getArguments()) {
    argBuffers.push_back(emitLoad(argPtrs, arg.getArgNumber()));
    map(arg, argBuffers.back());
  }
  for (unsigned i = 0, e = step.getNumResults(); i < e; ++i)
    resultBuffers.push_back(emitLoad(resultPtrs, i));
  arenaPoint = &entry->back();

  position = 0;
  for (Operation &op : body.without_terminator()) {
    position = positionOf[&op];
    currentLoc = op.getLoc();
    currentOp = &op;
    Operation *before = entry->empty() ? nullptr : &entry->back();
    if (failed(emitRuntimeCall(&op, *this)))
      return failure();
    // The trace's site records are the emitted code's.
    if (!isPlacementOnly())
      markSite(&op, entry, before);
  }
  position = end;
  if (failed(emitResultCopies()))
    return failure();
  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, body.getTerminator()->getLoc());
  if (assigned) {
    if (divergedFromAssignment || nextAssigned != assigned->buffers.size())
      return step.emitOpError()
             << "asks the lowering for other buffers than its buffer "
                "assignment placed ("
             << nextAssigned << " asked for, " << assigned->buffers.size()
             << " placed): the assignment is not this step's";
    return success();
  }
  // Every lifetime is known: the temporaries get their arena offsets.
  placeInArena();
  computeMemoryPlan(func);
  return success();
}

StepBufferAssignment StepLowering::assignment() const {
  StepBufferAssignment assigned;
  // `temporaries` holds every arena buffer, in the order of allocation.
  for (Value ptr : temporaries) {
    const StepArenaBuffer &buffer = allocations.find(ptr)->second;
    assigned.buffers.push_back(buffer);
  }
  assigned.inPlaceResults = inPlaceResults;
  assigned.reusedInputs = reusedInputs;
  assigned.arenaBytes = arenaBytes;
  assigned.hostArenaBytes = hostArenaBytes;
  assigned.memory = plan;
  assigned.traffic = traffic;
  return assigned;
}

/// The manifest with the plan's `memory` record before its `end`.
std::string withMemoryRecord(StringRef manifest, const MemoryPlan &plan) {
  std::string record = "memory peak=" + std::to_string(plan.peak()) +
                       " persistent=" + std::to_string(plan.persistent) +
                       " arena=" + std::to_string(plan.stepPeak) +
                       " live=" + std::to_string(plan.stepLive);
  for (int c = 0; c < kNumMemoryCategories; ++c)
    record += " " + memoryCategoryName(static_cast<MemoryCategory>(c)).str() +
              "=" + std::to_string(plan.atPeak[c]);
  // Offload (docs/RuntimeABI.md, "Offload"): the host's share and the
  // NVMe files'; the keys above count device memory only.
  if (plan.hostPersistent || plan.hostArena || plan.nvme)
    record += " host_persistent=" + std::to_string(plan.hostPersistent) +
              " host_arena=" + std::to_string(plan.hostArena) +
              " nvme=" + std::to_string(plan.nvme);
  size_t end = manifest.rfind("end\n");
  assert(end != StringRef::npos && "a manifest ends with its end record");
  return (manifest.take_front(end) + record + "\n" + manifest.drop_front(end))
      .str();
}

/// The manifest with the step's `site` records before its `end`.
std::string withSiteRecords(StringRef manifest, ArrayRef<std::string> sites) {
  size_t end = manifest.rfind("end\n");
  assert(end != StringRef::npos && "a manifest ends with its end record");
  std::string text = manifest.take_front(end).str();
  for (const std::string &site : sites)
    text += site + "\n";
  return text + manifest.drop_front(end).str();
}

struct LowerToRuntimePass
    : autoshard::impl::LowerToRuntimePassBase<LowerToRuntimePass> {
  using LowerToRuntimePassBase::LowerToRuntimePassBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<FunctionOpInterface> found = findStepFunction(module);
    if (failed(found))
      return signalPassFailure();
    FunctionOpInterface step = *found;
    if (step->hasAttr(TrainDialect::kPlanAttrName) &&
        !step->hasAttr(TrainDialect::kPartitionedAttrName)) {
      step.emitOpError() << "has a plan but is not partitioned; run "
                            "autoshard-partition before lowering";
      return signalPassFailure();
    }
    if (entry != "step" && entry != "eval") {
      module.emitError() << "autoshard-lower-to-runtime: entry '" << entry
                         << "' is not valid; expected step or eval";
      return signalPassFailure();
    }
    bool eval = entry == "eval";
    std::string stepSymbol =
        (eval ? ABI_NAME(autoshard_eval_step) : ABI_NAME(autoshard_step)).str();
    std::string manifestSymbol = (eval ? ABI_NAME(autoshard_eval_manifest)
                                       : ABI_NAME(autoshard_manifest))
                                     .str();
    if (module.lookupSymbol(stepSymbol) ||
        module.lookupSymbol(manifestSymbol)) {
      module.emitError() << "the module already defines " << stepSymbol
                         << " or " << manifestSymbol << "; lower a step once";
      return signalPassFailure();
    }
    FailureOr<std::string> manifest = buildManifest(step);
    if (failed(manifest))
      return signalPassFailure();

    // The placement is the analysis's: the reports read the same one.
    const auto &analysis = getAnalysis<StepBufferAssignmentAnalysis>();
    if (!analysis.assignment)
      return signalPassFailure();
    StepLowering lowering(module, step, &*analysis.assignment, stepSymbol);
    if (failed(lowering.run()))
      return signalPassFailure();

    OpBuilder b(&getContext());
    b.setInsertionPointToStart(module.getBody());
    std::string text = withSiteRecords(
        withMemoryRecord(*manifest, lowering.memoryPlan()),
        lowering.siteRecords());
    text.push_back('\0');
    auto arrayType =
        LLVM::LLVMArrayType::get(b.getIntegerType(8), text.size());
    LLVM::GlobalOp::create(b, module.getLoc(), arrayType, /*isConstant=*/true,
                           LLVM::Linkage::External, manifestSymbol,
                           b.getStringAttr(text));

    // The grid lives on in the manifest; the collectives are calls now.
    step.erase();
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();
  }
};

} // namespace

void autoshard::addLoweringCleanupPasses(OpPassManager &pm) {
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  // After the cleanup, which must not see fused ops (nothing folds them),
  // and right before the lowering, which lowers each to one call.
  pm.addPass(createFusePass());
}

FailureOr<StepBufferAssignment> autoshard::assignStepBuffers(ModuleOp module) {
  FailureOr<FunctionOpInterface> step = findStepFunction(module);
  if (failed(step))
    return failure();
  if ((*step)->hasAttr(TrainDialect::kPlanAttrName) &&
      !(*step)->hasAttr(TrainDialect::kPartitionedAttrName))
    return (*step).emitOpError()
           << "has a plan but is not partitioned; its memory is planned "
              "after autoshard-partition";
  // The rules' walk of the step, placing, with the pointers they pass
  // around built into a module of its own and dropped: the step is only
  // read.
  OwningOpRef<ModuleOp> scratch(ModuleOp::create(module.getLoc()));
  StepLowering lowering(*scratch, *step);
  if (failed(lowering.run()))
    return failure();
  return lowering.assignment();
}

autoshard::StepBufferAssignmentAnalysis::StepBufferAssignmentAnalysis(
    Operation *module) {
  FailureOr<StepBufferAssignment> assigned =
      assignStepBuffers(cast<ModuleOp>(module));
  if (succeeded(assigned))
    assignment = std::move(*assigned);
}

FailureOr<StepPlan> autoshard::planStep(ModuleOp module) {
  OwningOpRef<ModuleOp> copy(module.clone());
  return planStepInPlace(*copy);
}

FailureOr<StepPlan> autoshard::planStepInPlace(ModuleOp module) {
  // The lowering pipeline cleans up before lowering; so does the plan. The
  // compile pipeline runs the same cleanup with the verifier on: none here.
  PassManager cleanup(module.getContext());
  cleanup.enableVerifier(false);
  addLoweringCleanupPasses(cleanup);
  if (failed(cleanup.run(module)))
    return failure();
  FailureOr<StepBufferAssignment> assigned = assignStepBuffers(module);
  if (failed(assigned))
    return failure();
  return StepPlan{std::move(assigned->memory), assigned->traffic};
}

FailureOr<MemoryPlan> autoshard::planStepMemory(ModuleOp module) {
  FailureOr<StepPlan> plan = planStep(module);
  if (failed(plan))
    return failure();
  return plan->memory;
}
