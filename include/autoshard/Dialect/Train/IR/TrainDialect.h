//===- TrainDialect.h - the training-graph dialect --------------*- C++ -*-===//

#ifndef AUTOSHARD_DIALECT_TRAIN_IR_TRAINDIALECT_H
#define AUTOSHARD_DIALECT_TRAIN_IR_TRAINDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "autoshard/Dialect/Train/IR/TrainDialect.h.inc"
#include "autoshard/Dialect/Train/IR/TrainEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "autoshard/Dialect/Train/IR/TrainAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "autoshard/Dialect/Train/IR/TrainTypes.h.inc"

#include "autoshard/Dialect/Train/IR/TrainInterfaces.h.inc"

#define GET_OP_CLASSES
#include "autoshard/Dialect/Train/IR/TrainOps.h.inc"

#endif // AUTOSHARD_DIALECT_TRAIN_IR_TRAINDIALECT_H
