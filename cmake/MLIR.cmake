# Finds Debian's LLVM/MLIR 22 and sets up TableGen and lit for the compiler.
find_package(MLIR REQUIRED CONFIG HINTS /usr/lib/llvm-22/lib/cmake/mlir)
message(STATUS "Using MLIRConfig.cmake in: ${MLIR_DIR}")
message(STATUS "Using LLVMConfig.cmake in: ${LLVM_DIR}")

set(LLVM_RUNTIME_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/bin)
set(LLVM_LIBRARY_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/lib)
set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})

list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
include(AddLLVM)
include(AddMLIR)
include(HandleLLVMOptions)

include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
include_directories(${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
link_directories(${LLVM_BUILD_LIBRARY_DIR})
# LLVM_DEFINITIONS is one string; split it or the flags break (TOOLCHAIN.md).
separate_arguments(AUTOSHARD_LLVM_DEFINITIONS NATIVE_COMMAND ${LLVM_DEFINITIONS})
add_definitions(${AUTOSHARD_LLVM_DEFINITIONS})

# Debian ships bin/lit, not llvm-lit.
find_program(AUTOSHARD_LIT lit HINTS ${LLVM_TOOLS_BINARY_DIR} REQUIRED)
set(LLVM_EXTERNAL_LIT ${AUTOSHARD_LIT} CACHE STRING "lit" FORCE)

find_package(Python3 REQUIRED COMPONENTS Interpreter)
