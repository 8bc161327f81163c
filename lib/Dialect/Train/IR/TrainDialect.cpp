//===- TrainDialect.cpp - the training-graph dialect and its attributes ---===//

#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "autoshard/Dialect/Train/IR/StepSignature.h"

#include "mlir/IR/Builders.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Regex.h"

#include <cmath>
#include <cstdio>
#include <limits>

using namespace mlir;
using namespace autoshard::train;

#include "autoshard/Dialect/Train/IR/TrainDialect.cpp.inc"
#include "autoshard/Dialect/Train/IR/TrainEnums.cpp.inc"

/// The keyword value of an enum field `field`, or an error listing the
/// `valid` spellings.
template <typename Enum>
static ParseResult parseEnumField(AsmParser &parser, StringRef field,
                                  std::optional<Enum> (*symbolize)(StringRef),
                                  StringRef valid, Enum &out) {
  StringRef value;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&value))
    return failure();
  std::optional<Enum> parsed = symbolize(value);
  if (!parsed)
    return parser.emitError(loc) << "unknown " << field << " '" << value
                                 << "'; valid: " << valid;
  out = *parsed;
  return success();
}

/// The plan's optional trailing fields, `, reduce_dtype = f32`,
/// `, reduce_every = micro_batch`, `, keep_gathered = "REGEX"` and
/// `, groups = [...]`, each printed only when it differs from its default.
static ParseResult
parsePlanOptionalFields(AsmParser &parser, ReduceDtype &reduce,
                        ReduceEvery &every, StringAttr &keepGathered,
                        SmallVector<ParamGroupAttr> &groups) {
  reduce = ReduceDtype::Gradient;
  every = ReduceEvery::Step;
  keepGathered = {};
  groups.clear();
  bool seenReduce = false, seenEvery = false, seenKeep = false,
       seenGroups = false;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc loc = parser.getCurrentLocation();
    StringRef keyword;
    if (parser.parseKeyword(&keyword) || parser.parseEqual())
      return failure();
    if (keyword == "reduce_dtype" && !seenReduce) {
      seenReduce = true;
      if (failed(parseEnumField(parser, keyword, symbolizeReduceDtype,
                                "gradient, f32", reduce)))
        return failure();
      continue;
    }
    if (keyword == "reduce_every" && !seenEvery) {
      seenEvery = true;
      if (failed(parseEnumField(parser, keyword, symbolizeReduceEvery,
                                "step, micro_batch", every)))
        return failure();
      continue;
    }
    if (keyword == "keep_gathered" && !seenKeep) {
      seenKeep = true;
      std::string regex;
      if (parser.parseString(&regex))
        return failure();
      keepGathered = StringAttr::get(parser.getContext(), regex);
      continue;
    }
    if (keyword == "groups" && !seenGroups) {
      seenGroups = true;
      if (parser.parseCommaSeparatedList(
              AsmParser::Delimiter::Square, [&]() -> ParseResult {
                FailureOr<ParamGroupAttr> group =
                    FieldParser<ParamGroupAttr>::parse(parser);
                if (failed(group))
                  return failure();
                groups.push_back(*group);
                return success();
              }))
        return failure();
      continue;
    }
    return parser.emitError(loc)
           << "expected 'reduce_dtype', 'reduce_every', 'keep_gathered' or "
              "'groups' (each at most once), got '"
           << keyword << "'";
  }
  return success();
}

static void printPlanOptionalFields(AsmPrinter &printer, ReduceDtype reduce,
                                    ReduceEvery every, StringAttr keepGathered,
                                    ArrayRef<ParamGroupAttr> groups) {
  if (reduce != ReduceDtype::Gradient)
    printer << ", reduce_dtype = " << stringifyReduceDtype(reduce);
  if (every != ReduceEvery::Step)
    printer << ", reduce_every = " << stringifyReduceEvery(every);
  if (keepGathered) {
    printer << ", keep_gathered = ";
    printer.printString(keepGathered.getValue());
  }
  if (groups.empty())
    return;
  printer << ", groups = [";
  llvm::interleaveComma(groups, printer, [&](ParamGroupAttr group) {
    printer.printStrippedAttrOrType(group);
  });
  printer << "]";
}

#define GET_ATTRDEF_CLASSES
#include "autoshard/Dialect/Train/IR/TrainAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "autoshard/Dialect/Train/IR/TrainTypes.cpp.inc"

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "autoshard/Dialect/Train/IR/TrainOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "autoshard/Dialect/Train/IR/TrainAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "autoshard/Dialect/Train/IR/TrainTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// InitAttr
//===----------------------------------------------------------------------===//

StringRef InitAttr::getValueName(InitKind kind) {
  switch (kind) {
  case InitKind::Zeros:
  case InitKind::Ones:
  case InitKind::Load:
    return "";
  case InitKind::Normal:
    return "std";
  case InitKind::Uniform:
    return "bound";
  case InitKind::Constant:
    return "value";
  }
  llvm_unreachable("unknown init kind");
}

// #train.init<zeros> | #train.init<normal, std = 0.02>
Attribute InitAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown init kind '" << keyword
                          << "'; expected zeros, ones, normal, uniform, "
                             "constant or load";
    return {};
  }
  double value = 0.0;
  StringRef valueName = getValueName(*kind);
  if (valueName.empty()) {
    SMLoc commaLoc = parser.getCurrentLocation();
    if (succeeded(parser.parseOptionalComma())) {
      parser.emitError(commaLoc) << "'" << keyword << "' init takes no value";
      return {};
    }
  } else {
    if (parser.parseComma())
      return {};
    SMLoc nameLoc = parser.getCurrentLocation();
    StringRef name;
    if (parser.parseKeyword(&name))
      return {};
    if (name != valueName) {
      parser.emitError(nameLoc)
          << "'" << keyword << "' init takes '" << valueName << "', not '"
          << name << "'";
      return {};
    }
    if (parser.parseEqual() || parser.parseFloat(value))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<InitAttr>(loc, parser.getContext(), *kind,
                                     APFloat(value));
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyInitKind(getKind());
  StringRef valueName = getValueName(getKind());
  if (!valueName.empty())
    printer << ", " << valueName << " = " << getValue();
  printer << ">";
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, APFloat value) {
  double v = value.convertToDouble();
  if (failed(verifyFloat(emitError, "init value", v, FloatRule::Finite)))
    return failure();
  if ((kind == InitKind::Normal || kind == InitKind::Uniform) && v <= 0.0)
    return emitError() << "'" << stringifyInitKind(kind) << "' init needs a "
                       << getValueName(kind) << " > 0, got " << v;
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer configurations
//===----------------------------------------------------------------------===//

static std::string formatValue(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

LogicalResult
autoshard::train::verifyFloat(function_ref<InFlightDiagnostic()> emitError,
                              StringRef name, double value, FloatRule rule) {
  switch (rule) {
  case FloatRule::Finite:
    if (std::isfinite(value))
      return success();
    return emitError() << name << " must be finite, got " << formatValue(value);
  case FloatRule::NonNegative:
    if (std::isfinite(value) && value >= 0.0)
      return success();
    return emitError() << name << " must be finite and >= 0, got "
                       << formatValue(value);
  case FloatRule::Positive:
    if (std::isfinite(value) && value > 0.0)
      return success();
    return emitError() << name << " must be finite and > 0, got "
                       << formatValue(value);
  case FloatRule::UnitInterval:
    if (value >= 0.0 && value < 1.0)
      return success();
    return emitError() << name << " must lie in [0, 1), got "
                       << formatValue(value);
  }
  llvm_unreachable("unknown float rule");
}

LogicalResult
AdamwConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        FloatAttr lr, FloatAttr beta1, FloatAttr beta2,
                        FloatAttr eps, FloatAttr weightDecay) {
  return success(
      succeeded(verifyFloat(emitError, "lr", lr.getValueAsDouble(),
                            FloatRule::Positive)) &&
      succeeded(verifyFloat(emitError, "beta1", beta1.getValueAsDouble(),
                            FloatRule::UnitInterval)) &&
      succeeded(verifyFloat(emitError, "beta2", beta2.getValueAsDouble(),
                            FloatRule::UnitInterval)) &&
      succeeded(verifyFloat(emitError, "eps", eps.getValueAsDouble(),
                            FloatRule::Positive)) &&
      succeeded(verifyFloat(emitError, "weight_decay",
                            weightDecay.getValueAsDouble(),
                            FloatRule::NonNegative)));
}

LogicalResult
SgdConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      FloatAttr lr, FloatAttr momentum, FloatAttr weightDecay) {
  return success(
      succeeded(verifyFloat(emitError, "lr", lr.getValueAsDouble(),
                            FloatRule::Positive)) &&
      succeeded(verifyFloat(emitError, "momentum", momentum.getValueAsDouble(),
                            FloatRule::NonNegative)) &&
      succeeded(verifyFloat(emitError, "weight_decay",
                            weightDecay.getValueAsDouble(),
                            FloatRule::NonNegative)));
}

//===----------------------------------------------------------------------===//
// PlanAttr
//===----------------------------------------------------------------------===//

/// The rules every placement triple obeys: a sharded gradient updates only
/// a shard of the optimizer state, and a sharded parameter is updated from
/// a sharded gradient.
static LogicalResult
verifyPlacements(function_ref<InFlightDiagnostic()> emitError,
                 Placement optimizerStates, Placement gradients,
                 Placement parameters) {
  if (gradients == Placement::Sharded &&
      optimizerStates != Placement::Sharded)
    return emitError() << "sharded gradients need sharded optimizer states";
  if (parameters == Placement::Sharded && gradients != Placement::Sharded)
    return emitError() << "sharded parameters need sharded gradients";
  return success();
}

static LogicalResult
verifyShardAxes(function_ref<InFlightDiagnostic()> emitError,
                ArrayRef<int16_t> shardAxes) {
  for (auto [i, axis] : llvm::enumerate(shardAxes))
    if (axis < 0 || (i > 0 && axis <= shardAxes[i - 1]))
      return emitError() << "shard_axes must be distinct, ascending grid "
                            "axes";
  return success();
}

llvm::Regex autoshard::train::wholeNameRegex(StringRef regex) {
  return llvm::Regex(("^(" + regex + ")$").str());
}

/// Fails, naming `field`, unless `regex` (when present) is a valid,
/// non-empty regular expression.
static LogicalResult verifyRegex(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef field, StringAttr regex) {
  std::string error;
  if (!regex || (!regex.getValue().empty() &&
                 wholeNameRegex(regex.getValue()).isValid(error)))
    return success();
  return emitError() << field << " \"" << regex.getValue()
                     << "\" is not a valid regular expression"
                     << (error.empty() ? "" : ": " + error);
}

LogicalResult
ParamGroupAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       StringAttr names, int64_t maxElements,
                       Placement optimizerStates, Placement gradients,
                       Placement parameters, Unit unit,
                       ArrayRef<int16_t> shardAxes) {
  if (failed(verifyRegex(emitError, "param_group names", names)))
    return failure();
  if (maxElements < 0)
    return emitError() << "param_group max_elements must be at least 0 (0: "
                          "any size), got "
                       << maxElements;
  if (failed(verifyPlacements(emitError, optimizerStates, gradients,
                              parameters)) ||
      failed(verifyShardAxes(emitError, shardAxes)))
    return failure();
  return success();
}

bool ParamGroupAttr::selects(StringRef name, int64_t elements) const {
  if (getMaxElements() > 0 && elements > getMaxElements())
    return false;
  return !getNames() || wholeNameRegex(getNames().getValue()).match(name);
}

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringAttr strategy, FlatSymbolRefAttr grid,
                               Placement optimizerStates, Placement gradients,
                               Placement parameters,
                               ArrayRef<int16_t> shardAxes, Unit unit,
                               Reshard reshard, int64_t bucketCapMb,
                               ReduceDtype reduceDtype, ReduceEvery reduceEvery,
                               ArrayRef<ParamGroupAttr> groups,
                               StringAttr keepGathered) {
  if (failed(verifyPlacements(emitError, optimizerStates, gradients,
                              parameters)) ||
      failed(verifyShardAxes(emitError, shardAxes)) ||
      failed(verifyRegex(emitError, "plan keep_gathered", keepGathered)))
    return failure();
  if (reduceEvery == ReduceEvery::MicroBatch &&
      gradients != Placement::Sharded &&
      llvm::none_of(groups, [](ParamGroupAttr group) {
        return group.getGradients() == Placement::Sharded;
      }))
    return emitError()
           << "reduce_every = micro_batch reduce-scatters sharded gradients "
              "every micro-batch, but this plan shards no gradients; use a "
              "plan with sharded gradients (zero2, zero3, fsdp, hybrid) or "
              "reduce_every = step";
  if (bucketCapMb < 1)
    return emitError() << "bucket_cap_mb must be at least 1, got "
                       << bucketCapMb;
  // Passes count the cap in bytes, as an int64.
  constexpr int64_t maxBucketCapMb = std::numeric_limits<int64_t>::max() >> 20;
  if (bucketCapMb > maxBucketCapMb)
    return emitError() << "bucket_cap_mb must be at most " << maxBucketCapMb
                       << " (8 EiB in bytes), got " << bucketCapMb;
  return success();
}

bool PlanAttr::keepsGathered(StringRef name) const {
  return getReshard() == Reshard::AfterBackward ||
         (getKeepGathered() &&
          wholeNameRegex(getKeepGathered().getValue()).match(name));
}

ParamGroupAttr
autoshard::train::firstSelectingGroup(ArrayRef<ParamGroupAttr> groups,
                                      StringRef name, int64_t elements) {
  for (ParamGroupAttr group : groups)
    if (group.selects(name, elements))
      return group;
  return {};
}

ParamGroupAttr PlanAttr::groupOf(StringRef name, int64_t elements) const {
  return firstSelectingGroup(getGroups(), name, elements);
}

//===----------------------------------------------------------------------===//
// Verification of the train.* discardable attributes
//===----------------------------------------------------------------------===//

LogicalResult TrainDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  if (attr.getName() == kStepAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << kStepAttrName
                             << "' must be a unit attribute";
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (!func)
      return op->emitError() << "'" << kStepAttrName
                             << "' may only mark a function";
    return verifyStepSignature(func);
  }
  if (attr.getName() == kPlanAttrName) {
    auto plan = dyn_cast<PlanAttr>(attr.getValue());
    if (!plan)
      return op->emitError() << "'" << kPlanAttrName
                             << "' must be a #train.plan attribute";
    if (!op->hasAttr(kStepAttrName))
      return op->emitError() << "'" << kPlanAttrName
                             << "' may only be set on a '" << kStepAttrName
                             << "' function";
    Operation *gridSymbol =
        SymbolTable::lookupNearestSymbolFrom(op, plan.getGrid());
    if (!gridSymbol)
      return op->emitError() << "plan refers to grid " << plan.getGrid()
                             << ", which is not defined";
    if (auto grid = dyn_cast<shard::GridOp>(gridSymbol)) {
      // Passes divide by the grid's size and its axes' sizes (a dynamic
      // axis is autoshard-partition's error).
      for (auto [axis, size] : llvm::enumerate(grid.getShape()))
        if (!ShapedType::isDynamic(size) && size < 1)
          return op->emitError()
                 << "plan runs on " << plan.getGrid() << ", whose axis "
                 << axis << " has size " << size
                 << "; a training grid has at least 1 rank on every axis";
      SmallVector<ArrayRef<int16_t>> axisSets{plan.getShardAxes()};
      for (ParamGroupAttr group : plan.getGroups())
        axisSets.push_back(group.getShardAxes());
      for (ArrayRef<int16_t> axes : axisSets)
        for (int16_t axis : axes)
          if (axis >= grid.getRank())
            return op->emitError()
                   << "plan shards over axis " << axis << " of "
                   << plan.getGrid() << ", which has " << grid.getRank()
                   << (grid.getRank() == 1 ? " axis" : " axes");
    }
    return success();
  }
  if (attr.getName() == kOptimizerAttrName) {
    if (!isa<AdamwConfigAttr, SgdConfigAttr>(attr.getValue()))
      return op->emitError() << "'" << kOptimizerAttrName
                             << "' must be #train.adamw<...> or "
                                "#train.sgd<...>";
    if (!op->hasAttr(kStepAttrName))
      return op->emitError() << "'" << kOptimizerAttrName
                             << "' may only be set on a '" << kStepAttrName
                             << "' function";
    return success();
  }
  if (attr.getName() == kMaxGradNormAttrName) {
    auto maxNorm = dyn_cast<FloatAttr>(attr.getValue());
    if (!maxNorm)
      return op->emitError() << "'" << kMaxGradNormAttrName
                             << "' must be a finite float > 0";
    if (failed(verifyFloat([&] { return op->emitError(); },
                           "'" + kMaxGradNormAttrName.str() + "'",
                           maxNorm.getValueAsDouble(), FloatRule::Positive)))
      return failure();
    if (!op->hasAttr(kOptimizerAttrName))
      return op->emitError() << "'" << kMaxGradNormAttrName
                             << "' clips the gradients of a step with a '"
                             << kOptimizerAttrName << "'";
    return success();
  }
  if (attr.getName() == kMicroBatchesAttrName) {
    auto count = dyn_cast<IntegerAttr>(attr.getValue());
    if (!count || count.getInt() < 1)
      return op->emitError() << "'" << kMicroBatchesAttrName
                             << "' must be an integer >= 1";
    if (!op->hasAttr(kOptimizerAttrName))
      return op->emitError() << "'" << kMicroBatchesAttrName
                             << "' accumulates the gradients of a step with a '"
                             << kOptimizerAttrName << "'";
    return success();
  }
  if (attr.getName() == kPartitionedAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) || !op->hasAttr(kPlanAttrName))
      return op->emitError() << "'" << kPartitionedAttrName
                             << "' is a unit attribute of a function with a '"
                             << kPlanAttrName << "'";
    return success();
  }
  if (attr.getName() == kRecomputeAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) ||
        !isa_and_nonnull<TrainDialect>(op->getDialect()))
      return op->emitError() << "'" << kRecomputeAttrName
                             << "' is a unit attribute of a train op";
    return success();
  }
  if (attr.getName() == kOnHostAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) ||
        !isa_and_nonnull<TrainDialect>(op->getDialect()))
      return op->emitError() << "'" << kOnHostAttrName
                             << "' is a unit attribute of a train op";
    return success();
  }
  if (attr.getName() == kMemoryPlanAttrName) {
    auto plan = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!plan || !op->hasAttr(kStepAttrName) ||
        llvm::any_of(plan, [](NamedAttribute field) {
          auto bytes = dyn_cast<IntegerAttr>(field.getValue());
          return !bytes || bytes.getInt() < 0;
        }))
      return op->emitError() << "'" << kMemoryPlanAttrName
                             << "' is a dictionary of byte counts (integers "
                                ">= 0) on a '"
                             << kStepAttrName << "' function";
    return success();
  }
  return op->emitError() << "unknown attribute '"
                         << attr.getName().getValue()
                         << "' of the train dialect on an operation";
}

// Shared by arguments and results: the attributes' kinds.
static LogicalResult verifyValueAttribute(Operation *op, StringRef what,
                                          unsigned index, NamedAttribute attr,
                                          bool isResult) {
  StringRef name = attr.getName().getValue();
  // Every diagnostic names the value ("argument #2"); most name the
  // attribute too.
  auto error = [&] { return op->emitError() << what << " #" << index; };
  auto mustBe = [&](StringRef kind) {
    return error() << ": '" << name << "' must be " << kind;
  };
  auto resultsTakeNone = [&] {
    return error() << ": results take no '" << name << "'";
  };
  if (name == TrainDialect::kRoleAttrName) {
    auto role = dyn_cast<RoleAttr>(attr.getValue());
    if (!role)
      return mustBe("a #train.role attribute");
    bool resultRole =
        role.getValue() == Role::Param || role.getValue() == Role::OptState ||
        role.getValue() == Role::Loss || role.getValue() == Role::Grad ||
        role.getValue() == Role::GradNormSq;
    bool argRole = role.getValue() != Role::Loss &&
                   role.getValue() != Role::Grad &&
                   role.getValue() != Role::GradNormSq;
    if (isResult ? !resultRole : !argRole)
      return error() << " has role '" << stringifyRole(role.getValue()) << "'; "
                     << what << "s may have the roles "
                     << (isResult
                             ? "param, opt_state, grad, grad_norm_sq or loss"
                             : "param, opt_state, input, label or hyper");
    return success();
  }
  if (name == TrainDialect::kNameAttrName) {
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str)
      return mustBe("a string");
    if (!isValidStepName(str.getValue()))
      return error()
             << " has the name \"" << str.getValue()
             << "\"; names are made of letters, digits, '_' and '.', and do "
                "not start with '.'";
    return success();
  }
  if (name == TrainDialect::kShardAttrName) {
    if (!isa<FlatShardAttr>(attr.getValue()))
      return mustBe("a #train.flat_shard attribute");
    return success();
  }
  if (name == TrainDialect::kMemoryAttrName) {
    auto memory = dyn_cast<MemorySpaceAttr>(attr.getValue());
    if (!memory)
      return mustBe("a #train.memory attribute");
    return success();
  }
  if (name == TrainDialect::kInitAttrName) {
    if (isResult)
      return resultsTakeNone();
    if (!isa<InitAttr>(attr.getValue()))
      return mustBe("a #train.init attribute");
    return success();
  }
  if (name == TrainDialect::kUnitAttrName) {
    // Updates and gradients belong to the unit of the argument they follow;
    // a second statement of it could only disagree.
    if (isResult)
      return resultsTakeNone();
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str)
      return mustBe("a string");
    if (!isValidStepName(str.getValue()))
      return error()
             << " is in the unit \"" << str.getValue()
             << "\"; units are module paths made of letters, digits, '_' "
                "and '.', not starting with '.'";
    return success();
  }
  if (name == TrainDialect::kAliasesAttrName) {
    // Saved names of the argument's tensor; an update or gradient is saved
    // (or not) as the argument is.
    if (isResult)
      return resultsTakeNone();
    auto array = dyn_cast<ArrayAttr>(attr.getValue());
    if (!array || !llvm::all_of(array, llvm::IsaPred<StringAttr>))
      return mustBe("an array of strings");
    if (array.empty())
      return error()
             << ": '" << name
             << "' is empty; a param saved under its name alone has none";
    for (StringAttr alias : array.getAsRange<StringAttr>())
      if (!isValidStepName(alias.getValue()))
        return error()
               << " has the alias \"" << alias.getValue()
               << "\"; names are made of letters, digits, '_' and '.', and "
                  "do not start with '.'";
    return success();
  }
  if (name == TrainDialect::kWeightDecayAttrName) {
    // An update's decay is that of the parameter it updates.
    if (isResult)
      return resultsTakeNone();
    auto decay = dyn_cast<FloatAttr>(attr.getValue());
    if (!decay)
      return mustBe("a float (0.0 : f64 turns decay off for the parameter)");
    return verifyFloat([&] { return error() << ": "; }, name,
                       decay.getValueAsDouble(), FloatRule::NonNegative);
  }
  return error()
         << " has the unknown attribute '" << name
         << "'; the train dialect defines train.role, "
            "train.name, train.init, train.unit, "
            "train.aliases, train.weight_decay, train.shard and train.memory";
}

LogicalResult TrainDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  return verifyValueAttribute(op, "argument", argIndex, attr,
                              /*isResult=*/false);
}

LogicalResult TrainDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  return verifyValueAttribute(op, "result", resultIndex, attr,
                              /*isResult=*/true);
}
