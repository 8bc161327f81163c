// Crash-safe writes: all or nothing, no temporary left behind.
#include "ckpt/AtomicFile.h"
#include "TempDir.h"
#include "ckpt/Checksum.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

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

// ---- writeOutputFile: a run's outputs on a full disk ----------------------

namespace {

/// Makes writes past `bytes` fail with EFBIG, as a full disk fails them
/// with ENOSPC, for the life of the object: RLIMIT_FSIZE with SIGXFSZ
/// ignored (its default action would end the test).
class FileSizeLimit {
public:
  explicit FileSizeLimit(rlim_t bytes) {
    EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
    previousHandler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = saved;
    limited.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, previousHandler);
  }

private:
  rlimit saved{};
  void (*previousHandler)(int) = SIG_DFL;
};

/// Writes `bytes` bytes of 'x' to `path` with write(2), as the run's
/// writers do, failing as they fail.
Status writeBytes(const std::string &path, size_t bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Error("cannot create '" + path + "': " + std::strerror(errno));
  std::string data(bytes, 'x');
  ssize_t n = ::write(fd, data.data(), data.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(data.size()))
    return Error("cannot write '" + path +
                 "': " + std::strerror(n < 0 ? err : ENOSPC));
  return Status::success();
}

} // namespace

TEST(AtomicFile, AnOutputThatDoesNotFitKeepsTheOldFileAndNoTemporary) {
  TempDir dir;
  std::string path = dir / "params.safetensors";
  ASSERT_TRUE(writeFileAtomically(path, "the previous run's parameters"));
  Status s;
  {
    FileSizeLimit full(4096);
    s = writeOutputFile(
        path, [](const std::string &temp) { return writeBytes(temp, 10000); });
  }
  ASSERT_FALSE(s);
  // The writer's own error (its short write), then what became of the files.
  EXPECT_EQ(s.message().rfind("cannot write '" + path + ".tmp': ", 0), 0u)
      << s.message();
  EXPECT_NE(s.message().find(" (the temporary file was removed; '" + path +
                             "' is as it was before)"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(*readWholeFile(path), "the previous run's parameters");
  EXPECT_FALSE(exists(path + ".tmp"));
}

TEST(AtomicFile, AnOutputThatDoesNotFitLeavesNoFile) {
  TempDir dir;
  std::string path = dir / "stats.json";
  Status s;
  {
    FileSizeLimit full(4096);
    s = writeOutputFile(
        path, [](const std::string &temp) { return writeBytes(temp, 10000); });
  }
  ASSERT_FALSE(s);
  EXPECT_FALSE(exists(path));
  EXPECT_FALSE(exists(path + ".tmp"));
}

TEST(AtomicFile, AnOutputThatFitsReplacesTheFileWhole) {
  TempDir dir;
  std::string path = dir / "trace.json";
  ASSERT_TRUE(writeFileAtomically(path, "old"));
  std::string written;
  ASSERT_TRUE(writeOutputFile(path, [&](const std::string &temp) {
    written = temp;
    // Until the rename the old file is what a reader sees.
    EXPECT_EQ(*readWholeFile(path), "old");
    return writeBytes(temp, 5000);
  }));
  EXPECT_EQ(written, path + ".tmp");
  EXPECT_EQ(readWholeFile(path)->size(), 5000u);
  EXPECT_FALSE(exists(path + ".tmp"));
}

TEST(AtomicFile, AnOutputThroughALinkReplacesItsTarget) {
  TempDir dir;
  std::string target = dir / "real.json";
  std::string link = dir / "link.json";
  ASSERT_TRUE(writeFileAtomically(target, "old"));
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(writeOutputFile(
      link, [](const std::string &temp) { return writeBytes(temp, 3); }));
  EXPECT_EQ(*readWholeFile(target), "xxx");
  struct stat info;
  ASSERT_EQ(::lstat(link.c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
}

TEST(AtomicFile, AnOutputThatIsADeviceIsWrittenDirectly) {
  std::string written;
  ASSERT_TRUE(writeOutputFile("/dev/null", [&](const std::string &to) {
    written = to;
    return Status::success();
  }));
  EXPECT_EQ(written, "/dev/null");
}
