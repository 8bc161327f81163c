//===- Passes.h - lowering passes -------------------------------*- C++ -*-===//

#ifndef AUTOSHARD_CONVERSION_PASSES_H
#define AUTOSHARD_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace autoshard {

#define GEN_PASS_DECL
#include "autoshard/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "autoshard/Conversion/Passes.h.inc"

} // namespace autoshard

#endif // AUTOSHARD_CONVERSION_PASSES_H
