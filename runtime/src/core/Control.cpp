// The job's control plane: shared helpers and the single-process plane.
#include "core/Control.h"
#include "core/Context.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace autoshard::rt {

ControlPlane::ControlPlane(int rank, int size, int localRank, int localSize)
    : worldRank(rank), worldSize(size), nodeRank(localRank),
      nodeSize(localSize) {}

ControlPlane::~ControlPlane() = default;

void ControlPlane::setTimeout(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds))
    fatal("control plane: timeout %g s is not a number of seconds >= 0 (0 "
          "waits forever)",
          seconds);
  timeoutSeconds = seconds;
  timeoutChanged();
}

ControlPlane::Purpose::Purpose(ControlPlane &control, std::string what)
    : control(control), outer(std::move(control.currentPurpose)) {
  control.currentPurpose = std::move(what);
}

ControlPlane::Purpose::~Purpose() { control.currentPurpose = std::move(outer); }

void ControlPlane::Purpose::set(std::string what) {
  control.currentPurpose = std::move(what);
}

std::string ControlPlane::forPurpose() const {
  return currentPurpose.empty() ? std::string()
                                : " (for " + currentPurpose + ")";
}

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
