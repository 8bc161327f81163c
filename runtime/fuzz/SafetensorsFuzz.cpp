// Fuzzes the safetensors reader (io/Safetensors.h, read from a file by
// driver/Safetensors.h) through --load-params (driver/Params.h), which
// checks a file against a step (names, aliases, dtypes, shapes, non-finite
// values) and copies its tensors into a rank's buffers: an answer or an
// error, never a crash.
#include "FuzzFile.h"
#include "io/Manifest.h"
#include "driver/Params.h"
#include "driver/Safetensors.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace autoshard::rt;

namespace {

// A step with a sharded f32 param, a replicated bf16 one with an alias, an
// f32 optimizer state loaded from the file and an i32 counter: rank 1 of 2.
constexpr const char *kStep =
    "autoshard-manifest 1\nabi 6\nstep s\nstrategy zero3\ngrid 2\n"
    "arg 0 param w f32 8 full=4x4 shard_axes=1 init=normal:0.1\n"
    "arg 1 param e bf16 3x2 init=zeros aliases=head.weight\n"
    "arg 2 opt_state w.m f32 8 full=4x4 shard_axes=1 init=load\n"
    "arg 3 opt_state step i32 scalar init=zeros\n"
    "result 0 param w f32 8 full=4x4 shard_axes=1 updates=0\n"
    "result 1 param e bf16 3x2 updates=1\n"
    "result 2 opt_state w.m f32 8 full=4x4 shard_axes=1 updates=2\n"
    "result 3 opt_state step i32 scalar updates=3\n"
    "result 4 loss loss f32 scalar\nend\n";

const Manifest &step() {
  static const Manifest manifest = [] {
    Expected<Manifest> m = parseManifest(kStep);
    if (!m) {
      std::fprintf(stderr, "asrt fuzz: the target's step does not parse: %s\n",
                   m.message().c_str());
      std::abort();
    }
    return *m;
  }();
  return manifest;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = fuzz::writeScratchFile("in.safetensors", data, size);
  // The reader alone, as shard-ckpt shard reads its input.
  (void)readSafetensors(path);
  const Manifest &manifest = step();
  std::vector<std::vector<char>> buffers;
  std::vector<void *> args;
  for (const TensorSpec &arg : manifest.args) {
    buffers.emplace_back(static_cast<size_t>(arg.numBytes()));
    args.push_back(buffers.back().data());
  }
  (void)loadParams(path, manifest, args, /*rank=*/1);
  return 0;
}
