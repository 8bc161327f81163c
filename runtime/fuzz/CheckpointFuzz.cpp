// Fuzzes a checkpoint's readers (ckpt/CheckpointManifest.h,
// ckpt/CheckpointReader.h), what --resume and shard-ckpt run on a
// checkpoint directory: the MANIFEST's parser, checkResumable against a
// step, then the files: sizes, whole-file CRCs, and every tensor's
// elements read back through its blocks.
//
// The input is a MANIFEST, optionally followed by a line "%%file" and the
// bytes of the shard file rank-00000.safetensors. The MANIFEST's last line
// must hold the CRC-32 of what precedes it, which mutated bytes never do,
// so the target writes it: any "end ..." line the input ends with is
// replaced by the right one (an input without one is read as it is, to
// keep the truncation check reachable).
#include "FuzzFile.h"
#include "ckpt/CheckpointManifest.h"
#include "ckpt/CheckpointReader.h"
#include "ckpt/Checksum.h"
#include "io/Manifest.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

using namespace autoshard::rt;

namespace {

// The step a resume would check the checkpoint against: one tensor of
// each role a checkpoint holds, sharded over 2 ranks.
constexpr const char *kStep =
    "autoshard-manifest 1\nabi 6\nstep s\nstrategy zero3\ngrid 2\n"
    "arg 0 param w f32 8 full=4x4 shard_axes=1 init=zeros\n"
    "arg 1 opt_state w.m f32 8 full=4x4 shard_axes=1 init=zeros\n"
    "arg 2 opt_state step i32 scalar init=zeros\n"
    "result 0 param w f32 8 full=4x4 shard_axes=1 updates=0\n"
    "result 1 opt_state w.m f32 8 full=4x4 shard_axes=1 updates=1\n"
    "result 2 opt_state step i32 scalar updates=2\n"
    "result 3 loss loss f32 scalar\nend\n";

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

/// `text` with its final "end" line replaced by the right checksum.
std::string withChecksum(std::string_view text) {
  size_t last = text.rfind("\nend ");
  if (last == std::string_view::npos)
    return std::string(text);
  std::string body(text.substr(0, last + 1));
  char end[32];
  std::snprintf(end, sizeof end, "end crc32=%08x\n",
                static_cast<unsigned>(crc32Of(body)));
  return body + end;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input(reinterpret_cast<const char *>(data), size);
  std::string_view manifestPart = input, filePart;
  if (size_t split = input.find("\n%%file\n"); split != std::string_view::npos) {
    manifestPart = input.substr(0, split + 1);
    filePart = input.substr(split + 8);
  }
  std::string text = withChecksum(manifestPart);
  const std::string &dir = fuzz::scratchDirectory();
  std::string manifestPath = dir + "/MANIFEST";
  Expected<CheckpointManifest> parsed =
      parseCheckpointManifest(text, manifestPath);
  if (!parsed)
    return 0;
  (void)checkResumable(*parsed, dir, step(), 0, "synthetic");
  (void)formatCheckpointManifest(*parsed);

  fuzz::writeScratchFile("MANIFEST", text.data(), text.size());
  fuzz::writeScratchFile("rank-00000.safetensors", filePart.data(),
                         filePart.size());
  Expected<CheckpointReader> reader = CheckpointReader::open(dir);
  if (!reader)
    return 0;
  (void)reader->checkFiles();
  for (const CheckpointFile &file : reader->manifest().files)
    (void)reader->verifyFile(file.name);
  // Each tensor read back whole, and its second half alone (the range a
  // rank of two holds), when it is small enough to hold.
  for (const CheckpointTensor &tensor : reader->manifest().tensors) {
    int64_t elements = tensor.numElements();
    if (elements <= 0 || elements > (int64_t(1) << 16))
      continue;
    std::vector<char> out(static_cast<size_t>(elements) * 8);
    (void)reader->readRange(tensor.name, 0, elements, out.data());
    (void)reader->readRange(tensor.name, elements / 2, elements - elements / 2,
                            out.data());
  }
  return 0;
}
