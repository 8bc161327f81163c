// The NVMe store: files per argument, round trips, cleanup and its errors.
#include "memory/NvmeStore.h"
#include "core/Context.h"

#include "../ckpt/TempDir.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <vector>

using namespace autoshard::rt;
using autoshard::rt::testing::TempDir;

namespace {

/// The names in `dir` (without "." and ".."), or {"<missing>"}.
std::vector<std::string> entries(const std::string &dir) {
  std::vector<std::string> names;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return {"<missing>"};
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..")
      names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool exists(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

std::unique_ptr<NvmeStore> makeStore(const std::string &parent, int rank = 0) {
  Expected<std::unique_ptr<NvmeStore>> store = NvmeStore::create(parent, rank);
  EXPECT_TRUE(store.ok()) << store.message();
  return store.ok() ? std::move(*store) : nullptr;
}

TEST(NvmeStoreTest, RoundTripsWholeTensors) {
  TempDir tmp;
  std::unique_ptr<NvmeStore> store = makeStore(tmp.path(), 3);
  ASSERT_TRUE(store);
  // Its own directory, named after the process and the rank.
  std::string prefix = tmp.path() + "/autoshard-offload-" +
                       std::to_string(::getpid()) + "-rank3-";
  EXPECT_EQ(store->directory().rfind(prefix, 0), 0u) << store->directory();

  std::vector<float> a(1000);
  std::iota(a.begin(), a.end(), 0.5f);
  std::vector<int32_t> b = {7, -8, 9};
  ASSERT_TRUE(store->add(2, "w.exp_avg", a.data(), 4000).ok());
  ASSERT_TRUE(store->add(5, "step", b.data(), 12).ok());
  EXPECT_TRUE(store->holds(2));
  EXPECT_FALSE(store->holds(3));
  EXPECT_EQ(store->bytesOf(2), 4000);
  EXPECT_EQ(store->bytesOf(3), -1);
  EXPECT_EQ(store->nameOf(5), "step");
  EXPECT_EQ(store->totalBytes(), 4012);
  EXPECT_EQ(store->indices(), (std::vector<int>{2, 5}));
  EXPECT_EQ(entries(store->directory()),
            (std::vector<std::string>{"arg2-w.exp_avg.bin", "arg5-step.bin"}));

  std::vector<float> back(1000);
  ASSERT_TRUE(store->read(2, back.data(), 4000).ok());
  EXPECT_EQ(back, a);
  // A write replaces the whole tensor; the other file is untouched.
  for (float &x : a)
    x = -x;
  ASSERT_TRUE(store->write(2, a.data(), 4000).ok());
  ASSERT_TRUE(store->read(2, back.data(), 4000).ok());
  EXPECT_EQ(back, a);
  std::vector<int32_t> b2(3);
  ASSERT_TRUE(store->read(5, b2.data(), 12).ok());
  EXPECT_EQ(b2, b);
}

TEST(NvmeStoreTest, FileNamesAreSanitisedAndUnique) {
  EXPECT_EQ(NvmeStore::fileName(0, "fc1.weight"), "arg0-fc1.weight.bin");
  // Manifest names may be "." or ".."; the index keeps them apart.
  EXPECT_EQ(NvmeStore::fileName(1, ".."), "arg1-...bin");
  EXPECT_EQ(NvmeStore::fileName(12, "a/b c"), "arg12-a_b_c.bin");
}

TEST(NvmeStoreTest, RemovesItsFilesAndDirectory) {
  TempDir tmp;
  std::string dir;
  {
    std::unique_ptr<NvmeStore> store = makeStore(tmp.path());
    ASSERT_TRUE(store);
    dir = store->directory();
    float x = 1;
    ASSERT_TRUE(store->add(0, "x", &x, 4).ok());
    EXPECT_TRUE(exists(store->pathOf(0)));
  }
  EXPECT_FALSE(exists(dir));
  // The parent the user gave stays, empty.
  EXPECT_TRUE(entries(tmp.path()).empty());

  std::unique_ptr<NvmeStore> store = makeStore(tmp.path());
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->remove().ok());
  EXPECT_TRUE(store->remove().ok()); // once only
  EXPECT_FALSE(exists(store->directory()));
  float x = 0;
  EXPECT_EQ(store->add(0, "x", &x, 4).message(),
            "the NVMe store '" + store->directory() + "' was already removed");
}

TEST(NvmeStoreTest, TwoStoresOfOneRankDoNotCollide) {
  TempDir tmp;
  std::unique_ptr<NvmeStore> a = makeStore(tmp.path(), 0);
  std::unique_ptr<NvmeStore> b = makeStore(tmp.path(), 0);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->directory(), b->directory());
}

TEST(NvmeStoreTest, RejectsAMissingParent) {
  TempDir tmp;
  Expected<std::unique_ptr<NvmeStore>> store =
      NvmeStore::create(tmp / "missing", 0);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.message(), "'" + (tmp / "missing") +
                                 "' does not exist (No such file or "
                                 "directory)");
}

TEST(NvmeStoreTest, RejectsAParentThatIsNotADirectory) {
  TempDir tmp;
  std::ofstream(tmp / "file") << "x";
  Expected<std::unique_ptr<NvmeStore>> store =
      NvmeStore::create(tmp / "file", 0);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.message(), "'" + (tmp / "file") + "' is not a directory");
  // A path through a regular file cannot be examined at all.
  store = NvmeStore::create(tmp / "file/sub", 0);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.message(), "'" + (tmp / "file/sub") +
                                 "' cannot be examined (Not a directory)");
}

TEST(NvmeStoreDeathTest, RejectsAnUnwritableParent) {
  TempDir tmp;
  std::string dir = tmp / "readonly";
  ASSERT_EQ(::mkdir(dir.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0755), 0);
  // Permission bits do not stop root: as root, the check runs in a child
  // that has given up root for the "nobody" user.
  EXPECT_EXIT(
      {
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0))
          std::_Exit(2);
        Expected<std::unique_ptr<NvmeStore>> store = NvmeStore::create(dir, 0);
        std::fprintf(stderr, "%s\n",
                     store.ok() ? "created" : store.message().c_str());
        std::_Exit(store.ok() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0),
      "'" + dir + "' is not writable \\(Permission denied\\)");
  ::chmod(dir.c_str(), 0700);
}

TEST(NvmeStoreTest, ReadsAndWritesCheckTheArgumentAndSize) {
  TempDir tmp;
  std::unique_ptr<NvmeStore> store = makeStore(tmp.path());
  ASSERT_TRUE(store);
  std::vector<float> a(4, 1.0f);
  ASSERT_TRUE(store->add(1, "m", a.data(), 16).ok());
  EXPECT_EQ(store->read(1, a.data(), 8).message(),
            "argument 1 (m) is 16 bytes in '" + store->pathOf(1) +
                "', but 8 bytes were asked for; reads and writes move the "
                "whole tensor");
  EXPECT_EQ(store->write(0, a.data(), 16).message(),
            "argument 0 has no NVMe file (only memory=nvme arguments have "
            "one; this store holds arguments 1)");
  EXPECT_EQ(store->add(1, "m", a.data(), 16).message(),
            "NVMe store: argument 1 already has a file, '" + store->pathOf(1) +
                "'");
}

TEST(NvmeStoreTest, AShortFileIsAShortRead) {
  TempDir tmp;
  std::unique_ptr<NvmeStore> store = makeStore(tmp.path());
  ASSERT_TRUE(store);
  std::vector<float> a(4, 1.0f);
  ASSERT_TRUE(store->add(0, "m", a.data(), 16).ok());
  ASSERT_EQ(::truncate(store->pathOf(0).c_str(), 10), 0);
  EXPECT_EQ(store->read(0, a.data(), 16).message(),
            "short read of '" + store->pathOf(0) +
                "': it ends after 10 of its 16 bytes");
}

TEST(NvmeStoreDeathTest, FatalRemovesTheStore) {
  TempDir tmp;
  // The child makes a store and fails; its files must not outlive it.
  EXPECT_EXIT(
      {
        std::unique_ptr<NvmeStore> store = makeStore(tmp.path());
        float x = 1;
        (void)store->add(0, "x", &x, 4);
        fatal("the step failed");
      },
      ::testing::ExitedWithCode(1), "the step failed");
  EXPECT_TRUE(entries(tmp.path()).empty());
}

} // namespace
