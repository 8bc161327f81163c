// The job's control plane: shared helpers and the single-process plane.
#include "core/Control.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace autoshard::rt {

ControlPlane::ControlPlane(int rank, int size, int localRank, int localSize)
    : worldRank(rank), worldSize(size), nodeRank(localRank),
      nodeSize(localSize) {}

ControlPlane::~ControlPlane() = default;

std::vector<std::string> ControlPlane::gather(const std::string &mine) {
  std::vector<std::string> all = allGather(mine);
  if (worldRank != 0)
    all.clear();
  return all;
}

namespace {

std::string encode(int64_t value) {
  std::string bytes(sizeof value, '\0');
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

int64_t decode(const std::string &bytes) {
  int64_t value = 0;
  std::memcpy(&value, bytes.data(), std::min(bytes.size(), sizeof value));
  return value;
}

class SingleProcessControl final : public ControlPlane {
public:
  SingleProcessControl() : ControlPlane(0, 1, 0, 1) {}
  const char *kind() const override { return "single"; }
  std::vector<std::string> allGather(const std::string &mine) override {
    return {mine};
  }
  void broadcast(std::string &, int) override {}
  void barrier() override {}
  [[noreturn]] void abortJob(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }
};

} // namespace

int64_t allMin(ControlPlane &control, int64_t value) {
  int64_t smallest = value;
  for (const std::string &bytes : control.allGather(encode(value)))
    smallest = std::min(smallest, decode(bytes));
  return smallest;
}

Status agreeOnStatus(const Status &mine, ControlPlane &control) {
  int64_t first =
      allMin(control, mine.ok() ? control.size() : control.rank());
  if (first == control.size())
    return Status::success();
  std::string message =
      first == control.rank() ? mine.message() : std::string();
  control.broadcast(message, static_cast<int>(first));
  return Error(message);
}

std::unique_ptr<ControlPlane> makeSingleProcessControl() {
  return std::make_unique<SingleProcessControl>();
}

} // namespace autoshard::rt
