// Resolving and comparing paths; which file a path names; opening a regular
// file without blocking on anything else.
#include "io/Paths.h"
#include "io/RegularFile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace autoshard::rt;
namespace fs = std::filesystem;

namespace {

class PathsTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::canonical(::testing::TempDir()).string() + "/paths_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir);
    fs::create_directories(dir + "/sub");
    std::ofstream(dir + "/file") << "contents";
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string dir;
};

TEST_F(PathsTest, ResolvedPathIsAbsoluteNormalAndFollowsLinks) {
  EXPECT_EQ(resolvedPath(dir + "/sub/../file"), dir + "/file");
  EXPECT_EQ(resolvedPath(dir + "/sub/"), dir + "/sub");
  fs::create_directory_symlink(dir + "/sub", dir + "/link");
  EXPECT_EQ(resolvedPath(dir + "/link/new.bin"), dir + "/sub/new.bin");
  // Not there yet: named through its real directory.
  EXPECT_EQ(resolvedPath(dir + "/link/no/such/x"), dir + "/sub/no/such/x");
  EXPECT_EQ(resolvedPath("relative"),
            fs::current_path().string() + "/relative");
}

TEST_F(PathsTest, WithinADirectory) {
  EXPECT_TRUE(isWithinDirectory(dir + "/sub/x", dir));
  EXPECT_TRUE(isWithinDirectory(dir + "/sub", dir + "/sub/"));
  EXPECT_FALSE(isWithinDirectory(dir + "/subway/x", dir + "/sub"));
  EXPECT_FALSE(isWithinDirectory(dir, dir + "/sub"));
  fs::create_directory_symlink(dir + "/sub", dir + "/link");
  EXPECT_TRUE(isWithinDirectory(dir + "/link/x", dir + "/sub"));
}

TEST_F(PathsTest, SameFileThroughLinksAndSpellings) {
  fs::create_hard_link(dir + "/file", dir + "/hard");
  fs::create_symlink(dir + "/file", dir + "/soft");
  FileIdentity file = identifyFile(dir + "/file");
  EXPECT_TRUE(file.exists);
  EXPECT_TRUE(sameFile(file, identifyFile(dir + "/hard")));
  EXPECT_TRUE(sameFile(file, identifyFile(dir + "/soft")));
  EXPECT_TRUE(sameFile(file, identifyFile(dir + "/sub/../file")));
  std::ofstream(dir + "/other") << "contents";
  EXPECT_FALSE(sameFile(file, identifyFile(dir + "/other")));
  // Files still to be created: by their resolved paths.
  EXPECT_TRUE(
      sameFile(identifyFile(dir + "/new"), identifyFile(dir + "/sub/../new")));
  EXPECT_FALSE(
      sameFile(identifyFile(dir + "/new"), identifyFile(dir + "/new2")));
}

TEST_F(PathsTest, RegularFileOpensAndKnowsItsSize) {
  Expected<RegularFile> file = RegularFile::open(dir + "/file", "data file");
  ASSERT_TRUE(file) << file.message();
  EXPECT_GE(file->fd(), 0);
  EXPECT_EQ(file->size(), 8);
  char text[8];
  EXPECT_EQ(::read(file->fd(), text, sizeof text), 8);
}

TEST_F(PathsTest, AnythingButARegularFileIsRefusedAtOnce) {
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  Expected<RegularFile> fifo = RegularFile::open(dir + "/fifo", "data file");
  ASSERT_FALSE(fifo);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(fifo.message(), "data file '" + dir +
                                "/fifo' is not a regular file (it is a FIFO)");
  Expected<RegularFile> device = RegularFile::open("/dev/null", "");
  ASSERT_FALSE(device);
  EXPECT_EQ(device.message(),
            "'/dev/null' is not a regular file (it is a character device)");
  Expected<RegularFile> directory = RegularFile::open(dir, "token file");
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.message(), "token file '" + dir +
                                     "' is not a regular file (it is a "
                                     "directory)");
  Expected<RegularFile> missing = RegularFile::open(dir + "/absent", "");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.message(),
            "cannot open '" + dir + "/absent': No such file or directory");
}

TEST_F(PathsTest, WritingNeverWaitsForAFifoReader) {
  // A regular file is created (or truncated) and written.
  Expected<std::FILE *> file = openForWriting(dir + "/out");
  ASSERT_TRUE(file) << file.message();
  EXPECT_GE(std::fputs("written", *file), 0);
  EXPECT_EQ(std::fclose(*file), 0);
  EXPECT_EQ(std::filesystem::file_size(dir + "/out"), 7u);
  // A FIFO without a reader: refused at once instead of blocking forever.
  ASSERT_EQ(::mkfifo((dir + "/out.fifo").c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  Expected<std::FILE *> lonely = openForWriting(dir + "/out.fifo");
  ASSERT_FALSE(lonely);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(lonely.message(), "cannot create '" + dir +
                                  "/out.fifo': it is a FIFO with no reader; "
                                  "start its reader first, or give a regular "
                                  "file");
  // With a reader, the bytes go through.
  int reader = ::open((dir + "/out.fifo").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  Expected<std::FILE *> piped = openForWriting(dir + "/out.fifo");
  ASSERT_TRUE(piped) << piped.message();
  EXPECT_EQ(std::fwrite("abc", 1, 3, *piped), 3u);
  EXPECT_EQ(std::fclose(*piped), 0);
  char text[4] = {};
  EXPECT_EQ(::read(reader, text, 3), 3);
  EXPECT_STREQ(text, "abc");
  ::close(reader);
  // A device is written as usual; a missing directory is named.
  Expected<std::FILE *> null = openForWriting("/dev/null");
  ASSERT_TRUE(null) << null.message();
  std::fclose(*null);
  Expected<std::FILE *> missing = openForWriting(dir + "/no/such");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.message(),
            "cannot create '" + dir + "/no/such': No such file or directory");
}

} // namespace
