//===- Passes.h - distribution passes over training steps -------*- C++ -*-===//

#ifndef AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_PASSES_H
#define AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_PASSES_H

#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "autoshard/Strategy/CommandLine.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace autoshard::train {

#define GEN_PASS_DECL
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"

} // namespace autoshard::train

#endif // AUTOSHARD_DIALECT_TRAIN_TRANSFORMS_PASSES_H
