// The compiler's view of abi.h: element type codes and their manifest
// names, and the MLIR types of the functions the lowering calls.
#include "autoshard/Conversion/RuntimeABI.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using namespace autoshard;

namespace {

std::string print(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// The MLIR type the lowering declares `Fn` with, printed.
template <typename Fn>
std::string declaredType(MLIRContext &context) {
  return print(rtabi::Signature<Fn>::get(&context));
}

} // namespace

TEST(RuntimeABI, ElementTypesHaveAbiHsCodes) {
  MLIRContext context;
  Builder b(&context);
  EXPECT_EQ(getRuntimeDType(b.getF32Type()), ASRT_DTYPE_F32);
  EXPECT_EQ(getRuntimeDType(b.getI32Type()), ASRT_DTYPE_I32);
  EXPECT_EQ(getRuntimeDType(b.getBF16Type()), ASRT_DTYPE_BF16);
  EXPECT_EQ(getRuntimeDType(b.getF16Type()), ASRT_DTYPE_F16);
  EXPECT_EQ(getRuntimeDType(b.getI64Type()), ASRT_DTYPE_I64);
  EXPECT_EQ(
      getRuntimeDType(IntegerType::get(&context, 16, IntegerType::Unsigned)),
      ASRT_DTYPE_U16);
  // Types the runtime has no code for, close to ones it has.
  EXPECT_EQ(getRuntimeDType(b.getF64Type()), std::nullopt);
  EXPECT_EQ(getRuntimeDType(b.getIntegerType(16)), std::nullopt);
  EXPECT_EQ(
      getRuntimeDType(IntegerType::get(&context, 32, IntegerType::Signed)),
      std::nullopt);
}

TEST(RuntimeABI, DTypeNamesAreTheManifests) {
  // The spellings runtime/src/core/Dtype.cpp parses.
  EXPECT_EQ(getRuntimeDTypeName(ASRT_DTYPE_F32), "f32");
  EXPECT_EQ(getRuntimeDTypeName(ASRT_DTYPE_I32), "i32");
  EXPECT_EQ(getRuntimeDTypeName(ASRT_DTYPE_BF16), "bf16");
  EXPECT_EQ(getRuntimeDTypeName(ASRT_DTYPE_F16), "f16");
  EXPECT_EQ(getRuntimeDTypeName(ASRT_DTYPE_I64), "i64");
  EXPECT_EQ(getRuntimeDTypeName(ASRT_DTYPE_U16), "u16");
}

TEST(RuntimeABI, DeclarationsFollowTheCParameterTypes) {
  MLIRContext context;
  context.loadDialect<LLVM::LLVMDialect>();
  // Context and buffers are pointers, the dtype an i32, sizes i64.
  EXPECT_EQ(declaredType<decltype(asrt_linear_fwd)>(context),
            "(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, "
            "i64, i64, i64) -> ()");
  // A float parameter is f32.
  EXPECT_EQ(declaredType<decltype(asrt_scale)>(context),
            "(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i64, f32) -> ()");
  // Results: a handle, a pointer.
  EXPECT_EQ(declaredType<decltype(asrt_bucket_start)>(context),
            "(!llvm.ptr) -> i64");
  EXPECT_EQ(declaredType<decltype(asrt_arena)>(context),
            "(!llvm.ptr) -> !llvm.ptr");
  // The entry point the generated code defines.
  EXPECT_EQ(declaredType<decltype(autoshard_step)>(context),
            "(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()");
  EXPECT_EQ(ABI_FUNCTION(asrt_all_reduce).name, "asrt_all_reduce");
  EXPECT_EQ(ABI_NAME(autoshard_manifest), "autoshard_manifest");
}
