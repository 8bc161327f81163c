// The checkpoint directory: names, listing, staging, commit and retention.
#include "ckpt/CheckpointDir.h"
#include "TempDir.h"
#include "ckpt/AtomicFile.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

using namespace autoshard::rt;
using autoshard::rt::testing::TempDir;

namespace {

bool exists(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

/// A complete checkpoint of `step` in `root`, through the real staging and
/// commit path (its MANIFEST's contents do not matter here).
void makeCheckpoint(const std::string &root, int64_t step) {
  Expected<std::string> staging = beginCheckpoint(root, step);
  ASSERT_TRUE(staging) << staging.message();
  ASSERT_TRUE(writeFileAtomically(*staging + "/rank-00000.safetensors", "x"));
  ASSERT_TRUE(commitCheckpoint(root, step, "manifest\n"));
}

std::vector<int64_t> steps(const std::string &root, bool completeOnly) {
  std::vector<int64_t> out;
  Expected<std::vector<CheckpointEntry>> entries = listCheckpoints(root);
  EXPECT_TRUE(entries) << entries.message();
  for (const CheckpointEntry &e : *entries)
    if (e.complete || !completeOnly)
      out.push_back(e.step);
  return out;
}

} // namespace

TEST(CheckpointDir, Names) {
  EXPECT_EQ(checkpointDirName(40), "step-00000040");
  EXPECT_EQ(checkpointDirName(123456789), "step-123456789");
}

TEST(CheckpointDir, NamesItWritesRenamesAndRemoves) {
  for (const char *name : {"step-00000040", "step-7", "step-00000040.partial",
                           "step-00000040.deleting"})
    EXPECT_TRUE(isCheckpointDirName(name)) << name;
  for (const char *name : {"step-", "step-x", "steps-1", "step-1.tmp", "logs",
                           "step-1/", ".partial", "MANIFEST"})
    EXPECT_FALSE(isCheckpointDirName(name)) << name;
}

TEST(CheckpointDir, ListsCheckpointsByStepAndIgnoresEverythingElse) {
  TempDir root;
  EXPECT_TRUE(listCheckpoints(root / "absent")->empty());
  makeCheckpoint(root.path(), 10);
  makeCheckpoint(root.path(), 2);
  ASSERT_TRUE(makeDirectories(root / "step-00000020"));         // incomplete
  ASSERT_TRUE(makeDirectories(root / "step-00000030.partial")); // staging
  ASSERT_TRUE(makeDirectories(root / "notes"));
  ASSERT_TRUE(writeFileAtomically(root / "step-00000040", "a file"));
  EXPECT_EQ(steps(root.path(), false), (std::vector<int64_t>{2, 10, 20}));
  EXPECT_EQ(steps(root.path(), true), (std::vector<int64_t>{2, 10}));
  std::vector<CheckpointEntry> entries = *listCheckpoints(root.path());
  EXPECT_EQ(entries[1].path, root / "step-00000010");

  ASSERT_TRUE(writeFileAtomically(root / "plain", "x"));
  Expected<std::vector<CheckpointEntry>> notDir =
      listCheckpoints(root / "plain");
  ASSERT_FALSE(notDir);
  EXPECT_EQ(notDir.message(),
            "checkpoint directory '" + root / "plain" + "' is not a directory");
}

TEST(CheckpointDir, StagingIsInvisibleUntilTheCommit) {
  TempDir root;
  Expected<std::string> staging = beginCheckpoint(root / "ck", 4);
  ASSERT_TRUE(staging) << staging.message();
  EXPECT_EQ(*staging, root / "ck/step-00000004.partial");
  ASSERT_TRUE(writeFileAtomically(*staging + "/rank-00000.safetensors", "x"));
  EXPECT_TRUE(listCheckpoints(root / "ck")->empty());
  ASSERT_TRUE(commitCheckpoint(root / "ck", 4, "manifest\n"));
  EXPECT_EQ(steps(root / "ck", true), (std::vector<int64_t>{4}));
  EXPECT_EQ(*readWholeFile(root / "ck/step-00000004/MANIFEST"), "manifest\n");
  EXPECT_FALSE(exists(*staging));
}

TEST(CheckpointDir, OneRunAtATimeHoldsTheLock) {
  // flock locks belong to an open file: a second open, even in this
  // process, is another run.
  TempDir root;
  Expected<int> first = lockCheckpointDirectory(root.path());
  ASSERT_TRUE(first) << first.message();
  Expected<int> second = lockCheckpointDirectory(root.path());
  ASSERT_FALSE(second);
  EXPECT_NE(second.message().find("is in use by another run (pid " +
                                  std::to_string(::getpid()) + " on "),
            std::string::npos)
      << second.message();
  EXPECT_NE(second.message().find("wait for that run to end or choose "
                                  "another directory"),
            std::string::npos);
  // The lock file is not a checkpoint.
  EXPECT_TRUE(listCheckpoints(root.path())->empty());
  // Released with its descriptor (or the process): the next run takes it.
  ::close(*first);
  Expected<int> third = lockCheckpointDirectory(root.path());
  ASSERT_TRUE(third) << third.message();
  ::close(*third);
  // A directory that does not exist cannot be locked, and says so.
  Expected<int> missing = lockCheckpointDirectory(root / "no/such");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("cannot open the lock"), std::string::npos);
}

TEST(CheckpointDir, NeverOverwritesACompleteCheckpoint) {
  TempDir root;
  makeCheckpoint(root.path(), 4);
  Expected<std::string> again = beginCheckpoint(root.path(), 4);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.message(),
            "cannot write the checkpoint of step 4: '" +
                root / "step-00000004" +
                "' already holds a complete one, which a save never "
                "overwrites");
  EXPECT_EQ(*readWholeFile(root / "step-00000004/MANIFEST"), "manifest\n");
}

TEST(CheckpointDir, ReplacesIncompleteAndInterruptedSaves) {
  TempDir root;
  // An interrupted save (staging left behind) and a damaged directory.
  ASSERT_TRUE(makeDirectories(root / "step-00000004.partial"));
  ASSERT_TRUE(writeFileAtomically(
      root / "step-00000004.partial/rank-00001.safetensors", "old"));
  ASSERT_TRUE(makeDirectories(root / "step-00000004"));
  ASSERT_TRUE(writeFileAtomically(root / "step-00000004/rank-00000.safetensors",
                                  "old"));
  makeCheckpoint(root.path(), 4);
  EXPECT_FALSE(exists(root / "step-00000004/rank-00001.safetensors"));
  EXPECT_EQ(*readWholeFile(root / "step-00000004/rank-00000.safetensors"), "x");
}

TEST(CheckpointDir, PruneKeepsTheNewestAndRemovesLeftovers) {
  TempDir root;
  for (int64_t step : {2, 4, 6, 8})
    makeCheckpoint(root.path(), step);
  ASSERT_TRUE(makeDirectories(root / "step-00000003")); // incomplete, old
  ASSERT_TRUE(makeDirectories(root / "step-00000009")); // incomplete, new
  ASSERT_TRUE(makeDirectories(root / "step-00000005.partial"));
  ASSERT_TRUE(makeDirectories(root / "step-00000001.deleting"));
  ASSERT_TRUE(makeDirectories(root / "mine.partial")); // not ours
  std::vector<std::string> removed;
  ASSERT_TRUE(pruneCheckpoints(root.path(), 2, removed));
  EXPECT_EQ(steps(root.path(), true), (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(steps(root.path(), false), (std::vector<int64_t>{6, 8, 9}));
  EXPECT_FALSE(exists(root / "step-00000005.partial"));
  EXPECT_FALSE(exists(root / "step-00000001.deleting"));
  EXPECT_FALSE(exists(root / "step-00000004.deleting"));
  EXPECT_TRUE(exists(root / "mine.partial"));
  EXPECT_EQ(removed.size(), 5u);
}
