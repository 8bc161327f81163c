//===- device-fuzz.cpp - libFuzzer target over device files ---------------===//
//
// What --device=FILE.json of --strategy=auto runs on a user's file: the
// device parser (nesting, schema, every figure's unit and range), then the
// cluster the cost model builds from it and its checks. A diagnostic is
// the expected answer; a crash, hang or sanitizer report is a finding.
// Built with shard-fuzz (AUTOSHARD_ENABLE_FUZZER; scripts/fuzz.sh runs it
// with the shipped device files as seeds).
//
//===----------------------------------------------------------------------===//

#include "autoshard/CostModel/DeviceCatalog.h"
#include "autoshard/CostModel/Hardware.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace autoshard::cost;
  llvm::Expected<DeviceSpec> device = parseDeviceSpec(
      llvm::StringRef(reinterpret_cast<const char *>(data), size),
      "fuzz.json");
  if (!device) {
    llvm::consumeError(device.takeError());
    return 0;
  }
  // One node, and as many ranks as a large job has.
  for (int64_t worldSize : {int64_t(1), device->devicesPerNode, int64_t(4096)}) {
    ClusterSpec cluster = makeCluster(*device, worldSize);
    if (verifyCluster(cluster).empty())
      (void)rankMemoryBytes(cluster);
  }
  return 0;
}
