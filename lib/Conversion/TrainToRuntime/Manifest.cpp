//===- Manifest.cpp - the text the runtime reads to drive a step ----------===//
//
// Format: docs/RuntimeABI.md, "Manifest". The runtime's parser is the other
// half of this contract.
//
//===----------------------------------------------------------------------===//

#include "StepEmitter.h"

#include "autoshard/Dialect/Train/IR/Flops.h"
#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mlir;
using namespace autoshard;
using namespace autoshard::train;

namespace {

constexpr int kManifestVersion = 1;

std::optional<StringRef> dtypeName(Type type) {
  if (std::optional<asrt_dtype> dtype = getRuntimeDType(type))
    return getRuntimeDTypeName(*dtype);
  return std::nullopt;
}

std::string shapeText(RankedTensorType type) {
  if (type.getRank() == 0)
    return "scalar";
  std::string text;
  for (auto [i, dim] : llvm::enumerate(type.getShape()))
    text += (i ? "x" : "") + std::to_string(dim);
  return text;
}

std::string initText(InitAttr init) {
  std::string text = stringifyInitKind(init.getKind()).str();
  if (!InitAttr::getValueName(init.getKind()).empty()) {
    // %.9g round-trips a float and prints 0.05 as 0.05.
    char value[32];
    std::snprintf(value, sizeof(value), ":%.9g", init.getValueAsDouble());
    text += value;
  }
  return text;
}

/// What the values of an integer batch argument index: the number of
/// classes and, for a loss's labels, the value marking positions it ignores.
struct IndexUse {
  int64_t classes;
  std::optional<int64_t> ignoreIndex;
};

/// The use of integer batch values `ids`: the class dimension of the loss
/// that reads them as labels, or the rows of the embedding table that reads
/// them as ids, also through the views between (gradient accumulation's
/// micro-batch slices, and a front end's pad / slice / reshape of the
/// labels: HuggingFace shifts its causal-LM labels by padding them with
/// the ignore index and slicing). The ignore index is that of any loss
/// (or loss gradient) reading them: the data may hold it.
std::optional<IndexUse> indexUse(Value ids) {
  std::optional<IndexUse> use;
  // The first reader's classes; the first ignore index of any.
  auto note = [&](const IndexUse &found) {
    if (!use)
      use = found;
    else if (!use->ignoreIndex)
      use->ignoreIndex = found.ignoreIndex;
  };
  auto ofLoss = [](Value logits, IntegerAttr ignoreIndex) {
    IndexUse found{cast<RankedTensorType>(logits.getType()).getShape().back(),
                   std::nullopt};
    if (ignoreIndex)
      found.ignoreIndex = ignoreIndex.getInt();
    return found;
  };
  for (Operation *user : ids.getUsers()) {
    if (isa<SliceRowsOp, SliceOp, PadOp, ReshapeOp, TransposeOp, BroadcastToOp,
            ConcatOp>(user)) {
      if (std::optional<IndexUse> viewed = indexUse(user->getResult(0)))
        note(*viewed);
    } else if (auto loss = dyn_cast<SoftmaxCrossEntropyOp>(user)) {
      note(ofLoss(loss.getLogits(), loss.getIgnoreIndexAttr()));
    } else if (auto grad = dyn_cast<SoftmaxCrossEntropyGradOp>(user)) {
      note(ofLoss(grad.getLogits(), grad.getIgnoreIndexAttr()));
    } else if (auto loss = dyn_cast<NllLossOp>(user)) {
      note(ofLoss(loss.getInput(), loss.getIgnoreIndexAttr()));
    } else if (auto grad = dyn_cast<NllLossGradOp>(user)) {
      note(ofLoss(grad.getInput(), grad.getIgnoreIndexAttr()));
    } else if (auto embedding = dyn_cast<EmbeddingOp>(user)) {
      note({embedding.getTable().getType().getDimSize(0), std::nullopt});
    }
  }
  return use;
}

} // namespace

StringRef autoshard::getRuntimeDTypeName(asrt_dtype dtype) {
  // A switch, not a table indexed by the code, so that a dtype abi.h adds
  // is a -Wswitch warning here rather than a read past the end.
  switch (dtype) {
  case ASRT_DTYPE_F32:
    return "f32";
  case ASRT_DTYPE_I32:
    return "i32";
  case ASRT_DTYPE_BF16:
    return "bf16";
  case ASRT_DTYPE_F16:
    return "f16";
  case ASRT_DTYPE_I64:
    return "i64";
  case ASRT_DTYPE_U16:
    return "u16";
  }
  llvm_unreachable("not an asrt_dtype");
}

FailureOr<std::string> autoshard::buildManifest(FunctionOpInterface step) {
  StepSignature sig(step);
  Block &body = step.getFunctionBody().front();

  FailureOr<StepPlacement> placement = getStepPlacement(step);
  if (failed(placement))
    return failure();
  const std::string &strategy = placement->strategy;
  ArrayRef<int64_t> gridShape = placement->grid;
  const int64_t worldSize = placement->worldSize();

  std::string text;
  llvm::raw_string_ostream os(text);
  os << "autoshard-manifest " << kManifestVersion << "\n";
  // The version of the abi.h this compiler was built with, whose
  // declarations the step's calls were derived from.
  os << "abi " << ASRT_ABI_VERSION << "\n";
  os << "step " << step.getName() << "\n";
  os << "strategy " << strategy << "\n";
  os << "grid ";
  llvm::interleave(gridShape, os, "x");
  os << "\n";
  // This rank's matrix products and attention, recomputation included.
  os << "flops "
     << static_cast<int64_t>(blockFlops(step.getFunctionBody().front()))
     << "\n";

  auto describe = [&](StringRef record, const StepValue &value)
      -> FailureOr<std::string> {
    std::optional<StringRef> dtype = dtypeName(value.type.getElementType());
    if (!dtype)
      return step.emitOpError()
             << record << " \"" << value.name << "\" has element type "
             << value.type.getElementType()
             << ", which the runtime does not support (f32, i32, bf16, f16, "
                "i64, ui16)";
    return llvm::formatv("{0} {1} {2} {3} {4} {5}", record, value.index,
                         stringifyRole(value.role), value.name, *dtype,
                         shapeText(value.type))
        .str();
  };

  // A flat shard's full shape and grid axes (docs/RuntimeABI.md).
  auto describeShard = [&](FlatShardAttr shard) {
    if (!shard)
      return;
    os << " full=" << shapeText(RankedTensorType::get(
                           shard.getShape(), Builder(step.getContext())
                                                 .getF32Type()));
    int32_t mask = 0;
    for (int16_t axis : shard.getGridAxes())
      mask |= 1 << axis;
    os << " shard_axes=" << mask;
  };

  // Offloaded state (docs/RuntimeABI.md, "Offload"); device when absent.
  auto describeMemory = [&](MemorySpace space) {
    if (space != MemorySpace::Device)
      os << " memory=" << stringifyMemorySpace(space);
  };

  for (const StepValue &arg : sig.getArgs()) {
    FailureOr<std::string> line = describe("arg", arg);
    if (failed(line))
      return failure();
    os << *line;
    describeShard(step.getArgAttrOfType<FlatShardAttr>(
        arg.index, TrainDialect::kShardAttrName));
    describeMemory(getArgMemorySpace(step, arg.index));
    if (arg.init)
      os << " init=" << initText(arg.init);
    else if (arg.role == Role::OptState)
      os << " init=zeros";
    // Further names the runtime saves the param under (tied weights).
    if (!arg.aliases.empty()) {
      os << " aliases=";
      llvm::interleave(arg.aliases, os, ",");
    }
    if (arg.role == Role::Input || arg.role == Role::Label)
      os << " batch_dim=0 global=" << arg.type.getDimSize(0) * worldSize;
    if (arg.role == Role::Label || (arg.role == Role::Input &&
                                    arg.type.getElementType().isInteger())) {
      std::optional<IndexUse> use = indexUse(body.getArgument(arg.index));
      if (!use && arg.role == Role::Label)
        return step.emitOpError()
               << "label argument \"" << arg.name
               << "\" is not consumed by a loss, so its number of classes is "
                  "unknown";
      if (use)
        os << " classes=" << use->classes;
      // The data may hold it where no class is (asdata's range check).
      if (use && use->ignoreIndex && arg.role == Role::Label)
        os << " ignore_index=" << *use->ignoreIndex;
    }
    os << "\n";
  }
  for (const StepValue &result : sig.getResults()) {
    FailureOr<std::string> line = describe("result", result);
    if (failed(line))
      return failure();
    os << *line;
    describeShard(step.getResultAttrOfType<FlatShardAttr>(
        result.index, TrainDialect::kShardAttrName));
    describeMemory(getResultMemorySpace(step, result.index));
    if (std::optional<unsigned> updated = sig.getUpdatedArg(result.index))
      os << " updates=" << *updated;
    if (std::optional<unsigned> param = sig.getGradientOf(result.index))
      os << " of=" << *param;
    os << "\n";
  }
  os << "end\n";
  return text;
}
