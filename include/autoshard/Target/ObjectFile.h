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

/// Translates `modules` (LLVM dialect only) to LLVM IR text: one LLVM
/// module, the translations linked together (a training step and its
/// evaluation step share their runtime declarations; clashing private
/// symbols are renamed).
llvm::LogicalResult emitLLVMIR(llvm::ArrayRef<mlir::ModuleOp> modules,
                               llvm::raw_ostream &os);

/// Compiles `modules` (LLVM dialect only), linked as emitLLVMIR does, to one
/// position-independent object file for the host, in process. Emits a
/// diagnostic on the first module on failure.
llvm::LogicalResult emitObjectFile(llvm::ArrayRef<mlir::ModuleOp> modules,
                                   llvm::raw_pwrite_stream &os);

} // namespace autoshard

#endif // AUTOSHARD_TARGET_OBJECTFILE_H
