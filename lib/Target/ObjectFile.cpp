//===- ObjectFile.cpp - LLVM-dialect module to a host object file ---------===//

#include "autoshard/Target/ObjectFile.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;

void autoshard::registerObjectFileTranslations(DialectRegistry &registry) {
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

static std::unique_ptr<llvm::Module> translate(ModuleOp module,
                                               llvm::LLVMContext &context) {
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context, "autoshard_step");
  if (!llvmModule)
    module.emitError() << "cannot translate the lowered step to LLVM IR";
  return llvmModule;
}

/// The translations of `modules`, linked into the first. Two lowered steps
/// declare the same runtime functions, which the linker merges; their
/// entry points and manifests have names of their own.
static std::unique_ptr<llvm::Module> translate(ArrayRef<ModuleOp> modules,
                                               llvm::LLVMContext &context) {
  assert(!modules.empty() && "nothing to translate");
  std::unique_ptr<llvm::Module> linked = translate(modules.front(), context);
  if (!linked)
    return nullptr;
  for (ModuleOp module : modules.drop_front()) {
    std::unique_ptr<llvm::Module> next = translate(module, context);
    if (!next)
      return nullptr;
    if (llvm::Linker::linkModules(*linked, std::move(next))) {
      module.emitError() << "cannot link the lowered steps into one module "
                            "(do two of them define the same entry point?)";
      return nullptr;
    }
  }
  return linked;
}

LogicalResult autoshard::emitLLVMIR(ArrayRef<ModuleOp> modules,
                                    llvm::raw_ostream &os) {
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule = translate(modules, context);
  if (!llvmModule)
    return failure();
  llvmModule->print(os, nullptr);
  return success();
}

LogicalResult autoshard::emitObjectFile(ArrayRef<ModuleOp> modules,
                                        llvm::raw_pwrite_stream &os) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule = translate(modules, context);
  if (!llvmModule)
    return failure();
  ModuleOp module = modules.front();

  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module.emitError() << "no LLVM target for the host triple "
                              << triple.str() << ": " << error;
  // The step is a sequence of runtime calls: generic code for the host CPU
  // family is all it needs, and it stays portable across the cluster.
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "generic", "", llvm::TargetOptions(), llvm::Reloc::PIC_));
  if (!machine)
    return module.emitError() << "cannot create a target machine for "
                              << triple.str();
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());

  llvm::legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return module.emitError() << "the target cannot emit object files";
  passes.run(*llvmModule);
  return success();
}
