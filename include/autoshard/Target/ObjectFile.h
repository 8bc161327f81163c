//===- ObjectFile.h - LLVM-dialect module to a host object file -*- C++ -*-===//

#ifndef AUTOSHARD_TARGET_OBJECTFILE_H
#define AUTOSHARD_TARGET_OBJECTFILE_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace llvm {
class raw_pwrite_stream;
} // namespace llvm

namespace autoshard {

/// Registers the LLVM IR translations of the dialects the lowering emits.
void registerObjectFileTranslations(mlir::DialectRegistry &registry);

/// Translates `module` (LLVM dialect only) to LLVM IR text.
llvm::LogicalResult emitLLVMIR(mlir::ModuleOp module, llvm::raw_ostream &os);

/// Compiles `module` (LLVM dialect only) to a position-independent object
/// file for the host, in process. Emits a diagnostic on `module` on failure.
llvm::LogicalResult emitObjectFile(mlir::ModuleOp module,
                                   llvm::raw_pwrite_stream &os);

} // namespace autoshard

#endif // AUTOSHARD_TARGET_OBJECTFILE_H
