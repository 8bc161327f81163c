// Shard files written as ranks write them, read back under other layouts,
// and every way a checkpoint can be damaged refused with the file named.
#include "ckpt/ShardFile.h"
#include "TempDir.h"
#include "TestManifests.h"
#include "ckpt/AtomicFile.h"
#include "ckpt/CheckpointDir.h"
#include "ckpt/CheckpointReader.h"
#include "ckpt/CheckpointWriter.h"
#include "ckpt/Layout.h"
#include "core/Dtype.h"
#include "driver/Safetensors.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <unistd.h>

using namespace autoshard::rt;
using autoshard::rt::testing::modelManifest;
using autoshard::rt::testing::TempDir;

namespace {

/// The full tensors of the test model: element i of tensor t is 100 t + i
/// (the step counter is 7).
std::map<std::string, std::vector<char>> fullTensors(const Manifest &m) {
  std::map<std::string, std::vector<char>> tensors;
  int t = 0;
  for (const TensorSpec &arg : m.args) {
    if (arg.role != Role::Param && arg.role != Role::OptState)
      continue;
    std::vector<char> &bytes = tensors[arg.name];
    bytes.resize(
        static_cast<size_t>(arg.globalElements() * dtypeSize(arg.dtype)));
    for (int64_t i = 0; i < arg.globalElements(); ++i)
      storeElement(bytes.data(), arg.dtype, i,
                   arg.dtype == ASRT_DTYPE_I32 ? 7 : 100.0 * t + i);
    ++t;
  }
  return tensors;
}

/// Writes step `step` of `manifest`'s run into `root` as its ranks would:
/// each rank's file holds its blocks, cut from the full tensors.
void writeCheckpoint(const std::string &root, const Manifest &manifest,
                     int64_t step) {
  auto tensors = fullTensors(manifest);
  std::vector<BlockAssignment> assignments = assignCheckpointBlocks(manifest);
  Expected<std::string> staging = beginCheckpoint(root, step);
  ASSERT_TRUE(staging) << staging.message();
  auto world = static_cast<int>(manifest.worldSize());
  std::vector<std::optional<WrittenShardFile>> files(world);
  for (int rank = 0; rank < world; ++rank) {
    std::vector<ShardBlock> blocks = shardBlocksOfRank(
        manifest, assignments, rank,
        [&](const TensorSpec &arg, int64_t begin) -> const void * {
          return tensors[arg.name].data() + begin * dtypeSize(arg.dtype);
        });
    if (blocks.empty())
      continue;
    auto written =
        writeShardFile(*staging, shardFileName(rank), rank, step, blocks);
    ASSERT_TRUE(written) << written.message();
    files[rank] = *written;
  }
  CheckpointHeader header{step, 5, "synthetic", 0x42};
  std::string text = formatCheckpointManifest(
      describeCheckpoint(manifest, assignments, files, header));
  ASSERT_TRUE(commitCheckpoint(root, step, text));
}

/// What rank `rank` of `manifest` holds of `name`, read from the checkpoint.
std::vector<float> readHeld(const CheckpointReader &reader,
                            const Manifest &manifest, const std::string &name,
                            int rank) {
  const TensorSpec &arg = *manifest.findArg(name);
  HeldBlock held = heldBlock(manifest, arg, rank);
  std::vector<float> values(static_cast<size_t>(held.valid));
  Status s = reader.readRange(name, held.begin, held.valid, values.data());
  EXPECT_TRUE(s) << s.message();
  return values;
}

void flipByte(const std::string &path, long offset) {
  std::FILE *f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, offset, SEEK_SET);
  int c = std::fgetc(f);
  std::fseek(f, offset, SEEK_SET);
  std::fputc(c ^ 0x01, f);
  std::fclose(f);
}

} // namespace

TEST(ShardFile, EveryRankWritesItsBlocksAsSafetensors) {
  TempDir root;
  Manifest zero3 = modelManifest("2", 1, 2);
  writeCheckpoint(root.path(), zero3, 6);
  std::string dir = root / "step-00000006";
  // Rank 1 holds w[3:5), w.m[3:5), b.m[2:3) and writes b (argument 1).
  Expected<SafetensorsFile> file =
      readSafetensors(dir + "/rank-00001.safetensors");
  ASSERT_TRUE(file) << file.message();
  EXPECT_EQ(file->tensors.size(), 4u);
  EXPECT_EQ(file->tensors.at("w").shape, std::vector<int64_t>{2});
  EXPECT_EQ(file->tensors.at("b").shape, std::vector<int64_t>{3});
  EXPECT_EQ(file->metadata.at("w.begin"), "3");
  EXPECT_EQ(file->metadata.at("rank"), "1");
  EXPECT_EQ(file->metadata.at("step"), "6");
  float w3;
  std::memcpy(&w3, file->bytes("w"), sizeof w3);
  EXPECT_EQ(w3, 3.0f);
}

// The same checkpoint read as 4 ZeRO-3 ranks, as DDP (whole tensors) and
// as hybrid 2x2 gives each rank exactly its elements.
TEST(ShardFile, ReadsBackUnderEveryLayout) {
  TempDir root;
  Manifest zero3 = modelManifest("2", 1, 2);
  writeCheckpoint(root.path(), zero3, 6);
  Expected<CheckpointReader> reader =
      CheckpointReader::open(root / "step-00000006");
  ASSERT_TRUE(reader) << reader.message();
  ASSERT_TRUE(reader->checkFiles());
  for (const CheckpointFile &f : reader->manifest().files)
    EXPECT_TRUE(reader->verifyFile(f.name)) << f.name;
  EXPECT_EQ(reader->manifest().step, 6);
  EXPECT_EQ(reader->manifest().seed, 5u);

  Manifest four = modelManifest("4", 1, 4);
  EXPECT_EQ(readHeld(*reader, four, "w", 1), (std::vector<float>{2, 3}));
  EXPECT_EQ(readHeld(*reader, four, "w", 2), (std::vector<float>{4}));
  EXPECT_TRUE(readHeld(*reader, four, "w", 3).empty());
  EXPECT_EQ(readHeld(*reader, four, "w.m", 1), (std::vector<float>{202, 203}));
  EXPECT_EQ(readHeld(*reader, four, "b.m", 2), (std::vector<float>{302}));

  Manifest ddp = modelManifest("2", 0, 1, "ddp");
  EXPECT_EQ(readHeld(*reader, ddp, "w", 1),
            (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(readHeld(*reader, ddp, "b.m", 0),
            (std::vector<float>{300, 301, 302}));

  Manifest hybrid = modelManifest("2x2", 2, 2, "hybrid");
  EXPECT_EQ(readHeld(*reader, hybrid, "w", 3), (std::vector<float>{3, 4}));
  EXPECT_EQ(readHeld(*reader, hybrid, "b", 2),
            (std::vector<float>{100, 101, 102}));

  int32_t counter = 0;
  ASSERT_TRUE(reader->readRange("optimizer.step", 0, 1, &counter));
  EXPECT_EQ(counter, 7);
}

TEST(ShardFile, CorruptBlockIsRefusedNamingFileAndTensor) {
  TempDir root;
  Manifest zero3 = modelManifest("2", 1, 2);
  writeCheckpoint(root.path(), zero3, 6);
  std::string dir = root / "step-00000006";
  Expected<CheckpointReader> reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader);
  const CheckpointBlock &block = reader->manifest().findTensor("w")->blocks[1];
  flipByte(dir + "/" + block.file, static_cast<long>(block.offset) + 4);
  std::vector<float> values(5);
  Status read = reader->readRange("w", 0, 5, values.data());
  ASSERT_FALSE(read);
  EXPECT_NE(read.message().find("checkpoint file '" + dir +
                                "/rank-00001.safetensors' is corrupt: the "
                                "block of 'w' at byte " +
                                std::to_string(block.offset) +
                                " (elements [3, 5)) has CRC-32"),
            std::string::npos)
      << read.message();
  // The other block still reads; the whole-file check fails too.
  EXPECT_TRUE(reader->readRange("w", 0, 3, values.data()));
  Status whole = reader->verifyFile("rank-00001.safetensors");
  ASSERT_FALSE(whole);
  EXPECT_NE(whole.message().find("rank-00001.safetensors' is corrupt: its "
                                 "CRC-32 is"),
            std::string::npos);
  // A flipped header byte escapes the block checks but not the file's.
  flipByte(dir + "/rank-00000.safetensors", 20);
  Status header = reader->verifyFile("rank-00000.safetensors");
  ASSERT_FALSE(header);
}

TEST(ShardFile, MissingTruncatedAndIncompleteAreRefused) {
  TempDir root;
  Manifest zero3 = modelManifest("2", 1, 2);
  writeCheckpoint(root.path(), zero3, 6);
  std::string dir = root / "step-00000006";
  Expected<CheckpointReader> reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader);
  uint64_t bytes = reader->manifest().files[0].bytes;
  ASSERT_EQ(::truncate((dir + "/rank-00000.safetensors").c_str(),
                       static_cast<off_t>(bytes - 3)),
            0);
  Status truncated = reader->checkFiles();
  ASSERT_FALSE(truncated);
  EXPECT_EQ(truncated.message(),
            "checkpoint file '" + dir + "/rank-00000.safetensors' has " +
                std::to_string(bytes - 3) + " bytes but the MANIFEST records " +
                std::to_string(bytes) + "; it is truncated");
  ASSERT_EQ(std::remove((dir + "/rank-00001.safetensors").c_str()), 0);
  Status missing = reader->checkFiles();
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("rank-00000.safetensors' has"),
            std::string::npos);
  ASSERT_EQ(::truncate((dir + "/rank-00000.safetensors").c_str(),
                       static_cast<off_t>(bytes)),
            0);
  missing = reader->checkFiles();
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("checkpoint file '" + dir +
                                   "/rank-00001.safetensors' is missing"),
            std::string::npos)
      << missing.message();
  // A FIFO in its place: refused by its type, and never opened (an open
  // would wait for a writer).
  ASSERT_EQ(::mkfifo((dir + "/rank-00001.safetensors").c_str(), 0600), 0);
  Status fifo = reader->checkFiles();
  ASSERT_FALSE(fifo);
  EXPECT_EQ(fifo.message(), "checkpoint file '" + dir +
                                "/rank-00001.safetensors' is not a regular "
                                "file (it is a FIFO)");
  Status verified = reader->verifyFile("rank-00001.safetensors");
  ASSERT_FALSE(verified);
  EXPECT_EQ(verified.message(), fifo.message());

  ASSERT_EQ(std::remove((dir + "/MANIFEST").c_str()), 0);
  Expected<CheckpointReader> incomplete = CheckpointReader::open(dir);
  ASSERT_FALSE(incomplete);
  EXPECT_EQ(incomplete.message(),
            "checkpoint '" + dir +
                "' is incomplete: it has no MANIFEST (a "
                "save that was interrupted before its last write)");
}
