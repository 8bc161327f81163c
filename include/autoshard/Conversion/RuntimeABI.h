//===- RuntimeABI.h - abi.h as the compiler sees it -------------*- C++ -*-===//
//
// The lowering to the runtime takes the runtime's ABI from the C header
// runtime/include/autoshard/rt/abi.h itself rather than from codes and names
// typed again here: the element type and reduction codes, the ABI version,
// and the functions it calls. ABI_FUNCTION(asrt_x) carries the declared
// function's C type, from which the func.func the step calls is derived. A
// function renamed or removed in abi.h, a parameter added or dropped, or a
// parameter of a type the generated code cannot pass, fails to compile; an
// operand of the wrong type fails when the call is emitted. Only decltype
// and sizeof see the declarations (unevaluated), so the compiler references
// no runtime symbol and never links the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_CONVERSION_RUNTIMEABI_H
#define AUTOSHARD_CONVERSION_RUNTIMEABI_H

#include "autoshard/rt/abi.h"

#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <type_traits>

namespace autoshard {

/// The runtime's element type (asrt_dtype) of `type`, if the runtime has
/// one.
std::optional<asrt_dtype> getRuntimeDType(mlir::Type type);

/// The manifest's spelling of `dtype` ("f32", "bf16", ...), the one the
/// runtime's manifest parser reads (docs/RuntimeABI.md, "Manifest").
llvm::StringRef getRuntimeDTypeName(asrt_dtype dtype);

namespace rtabi {

template <typename T>
inline constexpr bool kAlwaysFalse = false;

/// The MLIR type of a C parameter or result of type `T` in the generated
/// code, as convert-to-llvm lowers it to the C calling convention: pointers
/// are opaque pointers, integers and enums signless integers of their width,
/// float is f32.
template <typename T>
mlir::Type getType(mlir::MLIRContext *context) {
  if constexpr (std::is_pointer_v<T>)
    return mlir::LLVM::LLVMPointerType::get(context);
  else if constexpr (std::is_same_v<T, float>)
    return mlir::Float32Type::get(context);
  else if constexpr ((std::is_integral_v<T> && !std::is_same_v<T, bool>) ||
                     std::is_enum_v<T>)
    return mlir::IntegerType::get(context, 8 * sizeof(T));
  else
    static_assert(kAlwaysFalse<T>, "abi.h declares a parameter or result "
                                   "type the generated code cannot pass");
}

/// The C type of a function of the ABI. Only functions that take the
/// runtime context first match (the ABI's first convention); any other
/// type leaves Signature incomplete, which fails to compile where it is used.
template <typename Fn>
struct Signature;

template <typename Result, typename... Params>
struct Signature<Result(asrt_context *, Params...)> {
  /// The arguments after the context.
  static constexpr size_t kNumArgs = sizeof...(Params);
  static constexpr bool kReturnsValue = !std::is_void_v<Result>;

  static mlir::FunctionType get(mlir::MLIRContext *context) {
    llvm::SmallVector<mlir::Type> inputs = {getType<asrt_context *>(context),
                                            getType<Params>(context)...};
    llvm::SmallVector<mlir::Type> results;
    if constexpr (kReturnsValue)
      results.push_back(getType<Result>(context));
    return mlir::FunctionType::get(context, inputs, results);
  }
};

/// A function abi.h declares, with its C type; made by ABI_FUNCTION.
template <typename Fn>
struct Function {
  llvm::StringRef name;
};

} // namespace rtabi
} // namespace autoshard

/// The name of a symbol abi.h declares: a symbol it does not declare fails
/// to compile. (sizeof is unevaluated: no reference to the symbol remains.)
#define ABI_NAME(symbol)                                                       \
  (static_cast<void>(sizeof(&(symbol))), ::llvm::StringRef(#symbol))

/// The function `fn` of abi.h, for StepEmitter::call and for the entry
/// points the generated code defines.
#define ABI_FUNCTION(fn)                                                       \
  (::autoshard::rtabi::Function<decltype(fn)>{ABI_NAME(fn)})

#endif // AUTOSHARD_CONVERSION_RUNTIMEABI_H
