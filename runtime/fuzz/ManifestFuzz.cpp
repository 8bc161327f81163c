// Fuzzes the step manifest reader (io/Manifest.h), which every training
// binary and shard-ckpt run over the manifest a binary embeds or a
// --manifest file: an answer or an error, never a crash.
#include "data/Data.h"
#include "io/Manifest.h"
#include "data/TokenData.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace autoshard::rt;
  Expected<Manifest> manifest = parseManifest(
      std::string_view(reinterpret_cast<const char *>(data), size));
  if (!manifest)
    return 0;
  // What a run derives from it first: the language-model batch, and the
  // spelling of each argument's shape in messages.
  (void)findLanguageModelBatch(*manifest);
  int64_t bytes = 0;
  for (const TensorSpec &arg : manifest->args) {
    (void)formatShape(arg.shape);
    int64_t b = arg.numBytes();
    bytes = b > (int64_t(1) << 20) || bytes > (int64_t(1) << 20) ? INT64_MAX
                                                                 : bytes + b;
  }
  // Synthetic batches from it, when its arguments are small enough to hold
  // (a real step's are not; the fuzzer's mostly are).
  if (bytes > (int64_t(1) << 20))
    return 0;
  // As a run would: rank 0 of the grid's world, whose size a binary checks
  // against its launch before anything else.
  int64_t world = 1;
  for (int64_t axis : manifest->grid)
    world = axis > 0 && world <= 1024 / axis ? world * axis : 0;
  if (world < 1)
    return 0;
  Expected<std::unique_ptr<BatchSource>> batches =
      makeSyntheticBatches(*manifest, 1, 0, static_cast<int>(world));
  if (!batches)
    return 0;
  std::vector<std::vector<char>> buffers;
  std::vector<void *> args;
  for (const TensorSpec &arg : manifest->args) {
    buffers.emplace_back(static_cast<size_t>(arg.numBytes()) + 1);
    args.push_back(buffers.back().data());
  }
  (*batches)->fill(0, args.data());
  (*batches)->fill(7, args.data());
  return 0;
}
