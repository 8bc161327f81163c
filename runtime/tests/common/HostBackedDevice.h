// A test device over host memory: every operation goes to the host device,
// so a test overrides only what it watches or changes (copies it counts,
// time marks it makes, host access it denies as a GPU's memory would).
#pragma once

#include "memory/Device.h"

#include <memory>

namespace autoshard::rt::test {

class HostBackedDevice : public Device {
public:
  HostBackedDevice(const char *name, bool hostAccessible)
      : name_(name), hostAccessible_(hostAccessible) {}

  const char *name() const override { return name_; }
  bool hostAccessible() const override { return hostAccessible_; }
  void *allocate(int64_t bytes) override { return host->allocate(bytes); }
  void release(void *p) override { host->release(p); }
  void *allocateHost(int64_t bytes) override { return host->allocate(bytes); }
  void releaseHost(void *p) override { host->release(p); }
  void copy(Lane l, void *d, const void *s, int64_t n) override {
    host->copy(l, d, s, n);
  }
  void zero(Lane l, void *d, int64_t n) override { host->zero(l, d, n); }
  void toHost(Lane l, void *d, const void *s, int64_t n) override {
    host->toHost(l, d, s, n);
  }
  void toDevice(Lane l, void *d, const void *s, int64_t n) override {
    host->toDevice(l, d, s, n);
  }
  Fence fence(Lane) override { return nullptr; }
  void waitFence(Lane, const Fence &) override {}
  void synchronize(Lane) override {}

private:
  const char *name_;
  bool hostAccessible_;
  std::unique_ptr<Device> host = makeHostDevice();
};

} // namespace autoshard::rt::test
