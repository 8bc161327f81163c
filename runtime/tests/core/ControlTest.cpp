// The control plane's shared logic: agreeing on a verdict, the smallest
// value, gathering to rank 0, and the single-process plane.
#include "core/Control.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

using namespace autoshard::rt;

namespace {

std::string encoded(int64_t value) {
  std::string bytes(sizeof value, '\0');
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

/// One rank's view of a job whose other ranks are scripted: what each sends
/// to an all-gather, and what the root of a broadcast sends.
class ScriptedControl final : public ControlPlane {
public:
  ScriptedControl(int rank, std::vector<std::string> sent,
                  std::string broadcastText)
      : ControlPlane(rank, static_cast<int>(sent.size()), rank,
                     static_cast<int>(sent.size())),
        sent(std::move(sent)), broadcastText(std::move(broadcastText)) {}

  const char *kind() const override { return "scripted"; }
  std::vector<std::string> allGather(const std::string &mine) override {
    std::vector<std::string> all = sent;
    all[static_cast<size_t>(rank())] = mine;
    return all;
  }
  void broadcast(std::string &bytes, int root) override {
    if (root != rank())
      bytes = broadcastText;
    broadcastRoot = root;
  }
  void barrier() override {}
  [[noreturn]] void abortJob(int code) override { std::_Exit(code); }

  std::vector<std::string> sent;
  std::string broadcastText;
  int broadcastRoot = -1;
};

TEST(ControlTest, ASingleProcessAgreesWithItself) {
  std::unique_ptr<ControlPlane> single = makeSingleProcessControl();
  EXPECT_EQ(single->size(), 1);
  EXPECT_STREQ(single->kind(), "single");
  EXPECT_TRUE(agreeOnStatus(Status::success(), *single).ok());
  EXPECT_EQ(agreeOnStatus(Error("no such file"), *single).message(),
            "no such file");
  EXPECT_EQ(allMin(*single, 7), 7);
  EXPECT_EQ(single->gather("x"), std::vector<std::string>{"x"});
}

TEST(ControlTest, EveryRankGetsTheLowestFailingRanksError) {
  // Rank 2 of 4 succeeded; ranks 1 and 3 failed (each sends its own rank,
  // the others the world size).
  ScriptedControl control(2, {encoded(4), encoded(1), "", encoded(3)},
                          "rank 1: no such file");
  Status agreed = agreeOnStatus(Status::success(), control);
  EXPECT_EQ(agreed.message(), "rank 1: no such file");
  EXPECT_EQ(control.broadcastRoot, 1);
  // A failure of its own does not win over a lower rank's.
  EXPECT_EQ(agreeOnStatus(Error("rank 2's"), control).message(),
            "rank 1: no such file");
  // When every rank succeeded there is nothing to send.
  ScriptedControl fine(2, {encoded(4), encoded(4), "", encoded(4)}, "");
  EXPECT_TRUE(agreeOnStatus(Status::success(), fine).ok());
  EXPECT_EQ(fine.broadcastRoot, -1);
}

TEST(ControlTest, AllMinAndGatherToRankZero) {
  ScriptedControl control(1, {encoded(5), "", encoded(-3)}, "");
  EXPECT_EQ(allMin(control, 2), -3);
  // Only rank 0 keeps a gather.
  EXPECT_TRUE(control.gather("mine").empty());
  ScriptedControl root(0, {"", "b", "c"}, "");
  EXPECT_EQ(root.gather("a"), (std::vector<std::string>{"a", "b", "c"}));
}

} // namespace
