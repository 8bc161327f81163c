//===- LowerToRuntime.cpp - a training step as calls into the runtime -----===//
//
// The step is straight-line code on SSA tensors, so buffer placement needs no
// general bufferization: one walk in program order gives every tensor a
// pointer, and the last use of each pointer is known exactly.
//
//===----------------------------------------------------------------------===//

#include "StepEmitter.h"

#include "autoshard/Conversion/Passes.h"
#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

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

/// Builds `autoshard_step` from the tensor-level step.
class StepLowering : public StepEmitter {
public:
  StepLowering(ModuleOp module, FunctionOpInterface step)
      : mod(module), step(step), sig(step), b(module.getContext()),
        body(step.getFunctionBody().front()) {}

  LogicalResult run();

  Value buffer(Value tensor) override {
    Value ptr = bufferOf.lookup(tensor);
    assert(ptr && "tensor used before it has a buffer");
    return ptr;
  }
  Value output(Value result, int mayAliasOperand) override;
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
    Value ptr = buffer(input);
    return temporaries.contains(ptr) && lastUseOf[ptr] == position &&
           !isDirectResult(result);
  }
  void reuse(Value result, Value input) override {
    map(result, buffer(input));
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
  Value emitLoad(Value array, unsigned index);
  void emitFrees(ArrayRef<Operation *> markers);
  LogicalResult emitResultCopies();

  ModuleOp mod;
  FunctionOpInterface step;
  StepSignature sig;
  OpBuilder b;
  Block &body;
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
  /// Pointers into the middle of another buffer, and that buffer.
  DenseMap<Value, Value> viewBase;
  /// Last position at which each pointer is read, over every tensor in it.
  DenseMap<Value, int> lastUseOf;
  /// Pointers this step allocated and must free.
  llvm::SetVector<Value> temporaries;
  /// Result indices already written in place.
  llvm::SmallDenseSet<unsigned> writtenResults;
};

Value StepLowering::emitLoad(Value array, unsigned index) {
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  Value slot = LLVM::GEPOp::create(b, currentLoc, ptrType, ptrType, array,
                                   ArrayRef<LLVM::GEPArg>{int32_t(index)});
  return LLVM::LoadOp::create(b, currentLoc, ptrType, slot);
}

Value StepLowering::output(Value result, int mayAliasOperand) {
  auto slotIt = firstReturnSlot.find(result);
  if (slotIt != firstReturnSlot.end()) {
    unsigned slot = slotIt->second;
    // The caller may pass the updated argument's own buffer as this result's
    // buffer. Writing there now is safe only if nothing reads that argument
    // after this op, and this op reads it only through the operand the
    // runtime lets it overwrite elementwise.
    bool safe = true;
    if (std::optional<unsigned> updated = sig.getUpdatedArg(slot)) {
      Value argPtr = argBuffers[*updated];
      Operation *op = result.getDefiningOp();
      safe = lastUseOf[argPtr] <= position;
      for (OpOperand &operand : op->getOpOperands())
        if (bufferOf.lookup(operand.get()) == argPtr &&
            static_cast<int>(operand.getOperandNumber()) != mayAliasOperand)
          safe = false;
    }
    if (safe) {
      writtenResults.insert(slot);
      map(result, resultBuffers[slot]);
      return resultBuffers[slot];
    }
  }
  Value ptr = callReturningPtr("asrt_alloc", {i64(byteSize(result))});
  temporaries.insert(ptr);
  map(result, ptr);
  return ptr;
}

LogicalResult StepLowering::emitResultCopies() {
  Operation *terminator = body.getTerminator();
  currentLoc = terminator->getLoc();
  SmallVector<std::pair<unsigned, Value>> copies;
  for (auto [slot, value] : llvm::enumerate(terminator->getOperands())) {
    if (writtenResults.contains(slot))
      continue;
    Value source = buffer(value);
    // A result that returns another argument's buffer reads it before any
    // copy can overwrite that argument: stage it.
    auto argIt = llvm::find(argBuffers, source);
    std::optional<unsigned> updated = sig.getUpdatedArg(slot);
    if (argIt != argBuffers.end() &&
        (!updated || argBuffers[*updated] != source)) {
      Value staged = callReturningPtr("asrt_alloc", {i64(byteSize(value))});
      call("asrt_copy", {staged, source, i64(byteSize(value))});
      temporaries.insert(staged);
      lastUseOf[staged] = position;
      source = staged;
    }
    copies.push_back({static_cast<unsigned>(slot), source});
  }
  for (auto [slot, source] : copies)
    call("asrt_copy", {resultBuffers[slot], source,
                       i64(byteSize(terminator->getOperand(slot)))});
  return success();
}

void StepLowering::emitFrees(ArrayRef<Operation *> markers) {
  for (Value ptr : temporaries) {
    Operation *marker = markers[lastUseOf[ptr]];
    b.setInsertionPointAfter(marker);
    currentLoc = marker->getLoc();
    call("asrt_free", {ptr});
  }
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

  // void autoshard_step(asrt_context *ctx, void *const *args,
  //                     void *const *results)
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext());
  b.setInsertionPointToEnd(mod.getBody());
  auto func = func::FuncOp::create(
      b, step.getLoc(), "autoshard_step",
      b.getFunctionType({ptrType, ptrType, ptrType}, {}));
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

  // The op at each position leaves the builder after its last emitted op;
  // frees go there once every lifetime is known.
  SmallVector<Operation *> markers(end + 1, nullptr);
  Operation *lastEmitted = &entry->back();
  position = 0;
  for (Operation &op : body.without_terminator()) {
    position = positionOf[&op];
    currentLoc = op.getLoc();
    if (failed(emitRuntimeCall(&op, *this)))
      return failure();
    if (!entry->empty())
      lastEmitted = &entry->back();
    markers[position] = lastEmitted;
  }
  position = end;
  if (failed(emitResultCopies()))
    return failure();
  markers[end] = &entry->back();
  // A marker stays null only for the (empty) positions of block arguments.
  for (int p = 0; p <= end; ++p)
    if (!markers[p])
      markers[p] = p ? markers[p - 1] : &entry->front();
  emitFrees(markers);

  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, body.getTerminator()->getLoc());
  return success();
}

struct LowerToRuntimePass
    : autoshard::impl::LowerToRuntimePassBase<LowerToRuntimePass> {
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
    if (module.lookupSymbol("autoshard_step") ||
        module.lookupSymbol("autoshard_manifest")) {
      module.emitError() << "the module already defines autoshard_step or "
                            "autoshard_manifest; lower a step once";
      return signalPassFailure();
    }
    FailureOr<std::string> manifest = buildManifest(step);
    if (failed(manifest))
      return signalPassFailure();

    StepLowering lowering(module, step);
    if (failed(lowering.run()))
      return signalPassFailure();

    OpBuilder b(&getContext());
    b.setInsertionPointToStart(module.getBody());
    std::string text = *manifest;
    text.push_back('\0');
    auto arrayType =
        LLVM::LLVMArrayType::get(b.getIntegerType(8), text.size());
    LLVM::GlobalOp::create(b, module.getLoc(), arrayType, /*isConstant=*/true,
                           LLVM::Linkage::External, "autoshard_manifest",
                           b.getStringAttr(text));

    // The grid lives on in the manifest; the collectives are calls now.
    step.erase();
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();
  }
};

} // namespace
