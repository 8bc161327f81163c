//===- UninstrumentedLLVM.h - LLVM's ASan hooks off in a sanitized build ---===//
//
// Force-included (-include) into every instrumented file of the fuzzer
// build. LLVM's headers poison and unpoison BumpPtrAllocator slabs when the
// including file is built with ASan, but Debian's LLVM/MLIR libraries are
// not: an inline allocator function instantiated here poisons a slab that
// library code then fills without unpoisoning, a false use-after-poison.
// Declaring the hooks first and turning them into no-ops makes every copy
// of those functions behave like the libraries' own.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_TOOLS_SHARD_FUZZ_UNINSTRUMENTEDLLVM_H
#define AUTOSHARD_TOOLS_SHARD_FUZZ_UNINSTRUMENTEDLLVM_H

#include <sanitizer/asan_interface.h>

#define __asan_poison_memory_region(addr, size) ((void)(addr), (void)(size))
#define __asan_unpoison_memory_region(addr, size) ((void)(addr), (void)(size))

#endif // AUTOSHARD_TOOLS_SHARD_FUZZ_UNINSTRUMENTEDLLVM_H
