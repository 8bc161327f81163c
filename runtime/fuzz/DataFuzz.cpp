// Fuzzes the data readers of --data (data/Data.h): an asdata file for a
// classifier's step and a token file for a language model's, each opened
// (every check before the first step) and read for a few steps, as a run
// would: an answer or an error, never a crash. ASRT_FUZZ_TOKENS picks the
// token-file target; without it the input is an asdata file.
#include "FuzzFile.h"
#include "data/Data.h"
#include "io/Manifest.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

using namespace autoshard::rt;

namespace {

#ifdef ASRT_FUZZ_TOKENS
// A language model of sequence 8 over 50 token ids, 4 rows of 2 ranks.
constexpr const char *kStep =
    "autoshard-manifest 1\nabi 6\nstep lm\nstrategy ddp\ngrid 2\n"
    "arg 0 param wte f32 50x4 init=normal:0.02\n"
    "arg 1 input ids i32 2x8 batch_dim=0 global=4 classes=50\n"
    "arg 2 label labels i32 2x8 batch_dim=0 global=4 classes=50\n"
    "result 0 param wte f32 50x4 updates=0\n"
    "result 1 loss loss f32 scalar\nend\n";
constexpr DataFormat kFormat = DataFormat::Tokens;
#else
// A classifier of 3 features and 5 classes with a bf16 input of its own,
// 4 rows of 2 ranks; labels may be -100 (ignore_index).
constexpr const char *kStep =
    "autoshard-manifest 1\nabi 6\nstep s\nstrategy ddp\ngrid 2\n"
    "arg 0 param w f32 5x3 init=zeros\n"
    "arg 1 input x f32 2x3 batch_dim=0 global=4\n"
    "arg 2 input seq bf16 2x2 batch_dim=0 global=4\n"
    "arg 3 label y i32 2 batch_dim=0 global=4 classes=5 ignore_index=-100\n"
    "result 0 param w f32 5x3 updates=0\n"
    "result 1 loss loss f32 scalar\nend\n";
constexpr DataFormat kFormat = DataFormat::Asdata;
#endif

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
  const Manifest &manifest = step();
  std::string path = fuzz::writeScratchFile("data.bin", data, size);
  for (int rank = 0; rank < 2; ++rank) {
    Expected<std::unique_ptr<BatchSource>> source =
        openDataFile(path, manifest, rank, 2, kFormat, /*seed=*/3);
    if (!source)
      return 0;
    std::vector<std::vector<char>> buffers;
    std::vector<void *> args;
    for (const TensorSpec &arg : manifest.args) {
      buffers.emplace_back(static_cast<size_t>(arg.numBytes()));
      args.push_back(buffers.back().data());
    }
    for (int64_t s : {0, 1, 5, 1000003})
      (*source)->fill(s, args.data());
    (void)(*source)->describe();
  }
  return 0;
}
