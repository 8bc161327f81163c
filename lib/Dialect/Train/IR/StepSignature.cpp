//===- StepSignature.cpp - roles and names of a training step -------------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace autoshard::train;

bool autoshard::train::isValidStepName(StringRef name) {
  if (name.empty() || name.front() == '.')
    return false;
  return llvm::all_of(name, [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.';
  });
}

static StepValue decode(unsigned index, Type type, DictionaryAttr attrs) {
  StepValue value{index, Role::Param, "", dyn_cast<RankedTensorType>(type),
                  {}};
  if (!attrs)
    return value;
  if (auto role = attrs.getAs<RoleAttr>(TrainDialect::kRoleAttrName))
    value.role = role.getValue();
  if (auto name = attrs.getAs<StringAttr>(TrainDialect::kNameAttrName))
    value.name = name.getValue();
  value.init = attrs.getAs<InitAttr>(TrainDialect::kInitAttrName);
  return value;
}

StepSignature::StepSignature(FunctionOpInterface func) {
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    args.push_back(decode(i, type, func.getArgAttrDict(i)));
    argIndexByName.try_emplace(args.back().name, i);
  }
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    results.push_back(decode(i, type, func.getResultAttrDict(i)));
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

LogicalResult autoshard::train::verifyStepSignature(FunctionOpInterface func) {
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
    if (failed(verifyTagged(func, "argument", i, type, func.getArgAttrDict(i))))
      return failure();
  for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
    if (failed(verifyTagged(func, "result", i, type,
                            func.getResultAttrDict(i))))
      return failure();

  StepSignature sig(func);
  llvm::StringMap<unsigned> argNames;
  std::optional<unsigned> firstBatchArg;
  for (const StepValue &arg : sig.getArgs()) {
    auto [it, inserted] = argNames.try_emplace(arg.name, arg.index);
    if (!inserted)
      return func.emitOpError()
             << "argument #" << arg.index << " has the name \"" << arg.name
             << "\" of argument #" << it->second << "; names must be unique";
    StringRef role = stringifyRole(arg.role);
    bool needsInit = arg.role == Role::Param || arg.role == Role::Hyper;
    if (needsInit && !arg.init)
      return func.emitOpError()
             << role << " argument \"" << arg.name << "\" needs a '"
             << TrainDialect::kInitAttrName << "' attribute";
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

  llvm::StringMap<unsigned> resultNames;
  unsigned losses = 0;
  bool derivesBackward = func->hasAttr(TrainDialect::kOptimizerAttrName);
  for (const StepValue &result : sig.getResults()) {
    auto [it, inserted] = resultNames.try_emplace(result.name, result.index);
    if (!inserted)
      return func.emitOpError()
             << "result #" << result.index << " has the name \"" << result.name
             << "\" of result #" << it->second << "; names must be unique";
    if (result.role == Role::Loss) {
      ++losses;
      if (result.type.getRank() != 0 || !result.type.getElementType().isF32())
        return func.emitOpError() << "loss result \"" << result.name
                                  << "\" must be a scalar tensor<f32>, got "
                                  << result.type;
      continue;
    }
    StringRef role = stringifyRole(result.role);
    if (derivesBackward)
      return func.emitOpError()
             << role << " result \"" << result.name
             << "\": a step with a '" << TrainDialect::kOptimizerAttrName
             << "' returns only its loss; autoshard-autodiff adds the "
                "updates";
    if (result.role == Role::Grad) {
      std::optional<unsigned> param = sig.getGradientOf(result.index);
      if (!param)
        return func.emitOpError()
               << "grad result \"" << result.name
               << "\" must be named <param>.grad after a param argument";
      if (sig.getArgs()[*param].type.getShape() != result.type.getShape())
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
  return success();
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
