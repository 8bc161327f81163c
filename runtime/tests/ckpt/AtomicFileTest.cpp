// Crash-safe writes: all or nothing, no temporary left behind.
#include "ckpt/AtomicFile.h"
#include "TempDir.h"
#include "ckpt/Checksum.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

using namespace autoshard::rt;
using autoshard::rt::testing::TempDir;

namespace {
bool exists(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}
} // namespace

TEST(AtomicFile, CommitReplacesTheFileWhole) {
  TempDir dir;
  std::string path = dir / "MANIFEST";
  ASSERT_TRUE(writeFileAtomically(path, "old contents\n"));
  auto writer = AtomicFileWriter::create(path);
  ASSERT_TRUE(writer) << writer.message();
  ASSERT_TRUE((*writer)->write("new "));
  ASSERT_TRUE((*writer)->write("contents\n"));
  // Until the commit the old file is what a reader sees.
  EXPECT_EQ(*readWholeFile(path), "old contents\n");
  EXPECT_TRUE(exists(path + ".tmp"));
  EXPECT_EQ((*writer)->bytesWritten(), 13u);
  EXPECT_EQ((*writer)->crc(), crc32Of("new contents\n"));
  ASSERT_TRUE((*writer)->commit());
  EXPECT_EQ(*readWholeFile(path), "new contents\n");
  EXPECT_FALSE(exists(path + ".tmp"));
}

TEST(AtomicFile, AnAbandonedWriteLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  std::string path = dir / "rank-00000.safetensors";
  ASSERT_TRUE(writeFileAtomically(path, "previous"));
  {
    auto writer = AtomicFileWriter::create(path);
    ASSERT_TRUE(writer);
    ASSERT_TRUE((*writer)->write("half of the new"));
    // Destroyed without commit(), as when a write fails part way.
  }
  EXPECT_EQ(*readWholeFile(path), "previous");
  EXPECT_FALSE(exists(path + ".tmp"));
}

TEST(AtomicFile, ErrorsNameTheFile) {
  TempDir dir;
  auto writer = AtomicFileWriter::create(dir / "no/such/dir/file");
  ASSERT_FALSE(writer);
  EXPECT_NE(writer.message().find("cannot create '" + dir.path() +
                                  "/no/such/dir/file.tmp': No such file"),
            std::string::npos)
      << writer.message();
  Expected<std::string> missing = readWholeFile(dir / "absent");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("absent': No such file"), std::string::npos);
}

// A MANIFEST that is a FIFO (or any non-file) is refused at once: a plain
// open would wait for a writer forever.
TEST(AtomicFile, ReadingAFifoIsRefusedNotWaitedOn) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "MANIFEST").c_str(), 0600), 0);
  Expected<std::string> fifo = readWholeFile(dir / "MANIFEST");
  ASSERT_FALSE(fifo);
  EXPECT_EQ(fifo.message(),
            "'" + dir.path() +
                "/MANIFEST' is not a regular file (it is a FIFO)");
  Expected<std::string> directory = readWholeFile(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_NE(directory.message().find("(it is a directory)"), std::string::npos)
      << directory.message();
}

TEST(AtomicFile, MakeDirectoriesCreatesParentsAndRefusesFiles) {
  TempDir dir;
  ASSERT_TRUE(makeDirectories(dir / "a/b/c"));
  EXPECT_TRUE(exists(dir / "a/b/c"));
  ASSERT_TRUE(makeDirectories(dir / "a/b/c")) << "exists already: fine";
  ASSERT_TRUE(writeFileAtomically(dir / "file", "x"));
  Status s = makeDirectories(dir / "file");
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("is not a directory"), std::string::npos);
}

TEST(AtomicFile, ParentDirectory) {
  EXPECT_EQ(parentDirectory("a/b/c"), "a/b");
  EXPECT_EQ(parentDirectory("c"), ".");
  EXPECT_EQ(parentDirectory("/c"), "/");
}
