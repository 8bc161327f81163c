// The host device: the CPU backend's memory, and the default of a context.
#include "memory/Device.h"
#include "core/Context.h"

#include <cstdlib>
#include <cstring>

namespace autoshard::rt {

Device::~Device() = default;

TimeMark Device::markTime(Lane) { return nullptr; }

int64_t Device::elapsedNs(const TimeMark &, const TimeMark &) { return 0; }

namespace {

// Every tensor is 64-byte aligned (abi.h): a cache line and an AVX-512
// vector.
constexpr int64_t kAlignment = 64;

void *alignedAllocate(int64_t bytes) {
  // aligned_alloc wants a multiple of the alignment.
  if (bytes > INT64_MAX - kAlignment)
    return nullptr;
  int64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
}

/// Device memory is host memory: every operation is done when it returns,
/// so lanes need no fences.
class HostDevice final : public Device {
public:
  const char *name() const override { return "host"; }
  bool hostAccessible() const override { return true; }

  void *allocate(int64_t bytes) override { return alignedAllocate(bytes); }
  void release(void *ptr) override { std::free(ptr); }
  void *allocateHost(int64_t bytes) override { return alignedAllocate(bytes); }
  void releaseHost(void *ptr) override { std::free(ptr); }

  // memmove: generated code may copy between overlapping views of one
  // arena, and an in-place collective's source may be its destination.
  void copy(Lane, void *dst, const void *src, int64_t bytes) override {
    move(dst, src, bytes);
  }
  void zero(Lane, void *dst, int64_t bytes) override {
    if (bytes > 0)
      std::memset(dst, 0, static_cast<size_t>(bytes));
  }
  void toHost(Lane, void *dstHost, const void *srcDevice,
              int64_t bytes) override {
    move(dstHost, srcDevice, bytes);
  }
  void toDevice(Lane, void *dstDevice, const void *srcHost,
                int64_t bytes) override {
    move(dstDevice, srcHost, bytes);
  }

  Fence fence(Lane) override { return nullptr; }
  void waitFence(Lane, const Fence &) override {}
  void synchronize(Lane) override {}

private:
  static void move(void *dst, const void *src, int64_t bytes) {
    if (bytes > 0 && dst != src)
      std::memmove(dst, src, static_cast<size_t>(bytes));
  }
};

} // namespace

DeviceScratch::~DeviceScratch() {
  if (owner)
    owner->release(buffer);
}

void *DeviceScratch::reserve(Device &device, int64_t bytes,
                             const char *what) {
  if (bytes < 0)
    fatal("%s: size %lld bytes is negative", what,
          static_cast<long long>(bytes));
  if (owner && owner != &device)
    fatal("%s: scratch of %s reused on %s", what, owner->name(),
          device.name());
  if (buffer && bytes <= capacityBytes)
    return buffer;
  // Nothing stale is worth copying into the larger buffer: its users pack
  // it afresh every time.
  if (buffer)
    device.release(buffer);
  int64_t request = bytes > 0 ? bytes : 1;
  buffer = device.allocate(request);
  if (!buffer)
    fatal("%s: out of memory allocating %lld bytes of scratch on %s", what,
          static_cast<long long>(request), device.name());
  owner = &device;
  capacityBytes = request;
  return buffer;
}

std::unique_ptr<Device> makeHostDevice() {
  return std::make_unique<HostDevice>();
}

} // namespace autoshard::rt
