// Device data files: the shipped ones load with their cited figures, and
// every malformed or unknown one is an error that says what is wrong.
#include "autoshard/CostModel/DeviceCatalog.h"
#include "autoshard/CostModel/CostModel.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace autoshard::cost;

namespace {

template <typename T> std::string errorOf(llvm::Expected<T> value) {
  return value ? "" : llvm::toString(value.takeError());
}

TEST(DeviceCatalog, ShippedDevicesLoad) {
  llvm::Expected<std::vector<DeviceSpec>> devices =
      loadDeviceDirectory(getDefaultDeviceDirectory());
  ASSERT_TRUE(bool(devices)) << llvm::toString(devices.takeError());
  std::vector<std::string> names;
  for (const DeviceSpec &device : *devices)
    names.push_back(device.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"a100-40gb", "a100-80gb", "b200-180gb",
                                      "cpu-node", "gb200-186gb", "h100-80gb",
                                      "h200-141gb", "l4-24gb", "l40s-48gb"}));
  for (const DeviceSpec &device : *devices) {
    SCOPED_TRACE(device.name);
    EXPECT_GT(device.memoryBytes, 0);
    EXPECT_GE(device.peakFlopsBF16, device.peakFlopsF32);
    if (device.kind == DeviceKind::GPU) {
      // A DGX or an 8-GPU PCIe server; a GB200 NVL72's node is its
      // 72-GPU NVLink domain.
      EXPECT_EQ(device.devicesPerNode, device.name == "gb200-186gb" ? 72 : 8);
      EXPECT_TRUE(device.canOffload());
      EXPECT_TRUE(device.hasNetwork());
      // NVLink (or PCIe) outruns the network, which outruns nothing else.
      EXPECT_GT(device.intraNodeBandwidth, device.interNodeBandwidth);
      EXPECT_GT(device.memoryBandwidth, device.intraNodeBandwidth);
    }
  }
}

TEST(DeviceCatalog, FiguresAreTheDataSheets) {
  llvm::Expected<DeviceSpec> h100 = lookupDevice("h100-80gb");
  ASSERT_TRUE(bool(h100)) << llvm::toString(h100.takeError());
  EXPECT_EQ(h100->memoryBytes, int64_t(80e9));
  EXPECT_DOUBLE_EQ(h100->peakFlopsBF16, 989.5e12);
  EXPECT_DOUBLE_EQ(h100->peakFlopsF32, 67e12);
  EXPECT_DOUBLE_EQ(h100->memoryBandwidth, 3.35e12);
  EXPECT_DOUBLE_EQ(h100->intraNodeBandwidth, 450e9);
  EXPECT_DOUBLE_EQ(h100->interNodeBandwidth, 50e9);
  EXPECT_DOUBLE_EQ(h100->hostLinkBandwidth, 64e9);
  llvm::Expected<DeviceSpec> a100 = lookupDevice("a100-80gb");
  ASSERT_TRUE(bool(a100)) << llvm::toString(a100.takeError());
  EXPECT_DOUBLE_EQ(a100->peakFlopsBF16, 312e12);
  EXPECT_DOUBLE_EQ(a100->memoryBandwidth, 2039e9);
  EXPECT_DOUBLE_EQ(a100->interNodeBandwidth, 25e9);
  llvm::Expected<DeviceSpec> h200 = lookupDevice("h200-141gb");
  ASSERT_TRUE(bool(h200)) << llvm::toString(h200.takeError());
  EXPECT_EQ(h200->memoryBytes, int64_t(141e9));
  EXPECT_DOUBLE_EQ(h200->memoryBandwidth, 4.8e12);
  // The devices of 24, 40 and 48 GB and the Blackwell ones: memory in
  // decimal GB, dense peaks, one direction of NVLink or PCIe.
  struct Sheet {
    const char *name;
    double memory, bf16, f32, bandwidth, intra, inter, hostLink;
    int64_t perNode;
    double ringIntra;
  };
  for (const Sheet &e : std::vector<Sheet>{
           {"l4-24gb", 24e9, 121e12, 30.3e12, 300e9, 32e9, 6.25e9, 32e9, 8,
            5.7e-6},
           {"a100-40gb", 40e9, 312e12, 19.5e12, 1555e9, 300e9, 25e9, 32e9, 8,
            3.4e-6},
           {"l40s-48gb", 48e9, 362.05e12, 91.6e12, 864e9, 32e9, 6.25e9, 32e9,
            8, 5.7e-6},
           {"b200-180gb", 180e9, 2.25e15, 75e12, 8e12, 900e9, 50e9, 64e9, 8,
            3.4e-6},
           {"gb200-186gb", 186e9, 2.5e15, 80e12, 8e12, 900e9, 50e9, 225e9, 72,
            3.4e-6}}) {
    SCOPED_TRACE(e.name);
    llvm::Expected<DeviceSpec> device = lookupDevice(e.name);
    ASSERT_TRUE(bool(device)) << llvm::toString(device.takeError());
    EXPECT_EQ(device->memoryBytes, int64_t(e.memory));
    EXPECT_DOUBLE_EQ(device->peakFlopsBF16, e.bf16);
    EXPECT_DOUBLE_EQ(device->peakFlopsF32, e.f32);
    EXPECT_DOUBLE_EQ(device->memoryBandwidth, e.bandwidth);
    EXPECT_DOUBLE_EQ(device->intraNodeBandwidth, e.intra);
    EXPECT_DOUBLE_EQ(device->interNodeBandwidth, e.inter);
    EXPECT_DOUBLE_EQ(device->hostLinkBandwidth, e.hostLink);
    EXPECT_EQ(device->devicesPerNode, e.perNode);
    EXPECT_DOUBLE_EQ(device->ringStepLatencyIntraNode, e.ringIntra);
    EXPECT_TRUE(device->canOffload());
  }
  llvm::Expected<DeviceSpec> cpu = lookupDevice("cpu-node");
  ASSERT_TRUE(bool(cpu)) << llvm::toString(cpu.takeError());
  EXPECT_EQ(cpu->kind, DeviceKind::CPU);
  EXPECT_FALSE(cpu->hasNetwork());
  EXPECT_FALSE(cpu->canOffload());
}

TEST(DeviceCatalog, UnknownDeviceListsTheKnownOnes) {
  std::string error = errorOf(lookupDevice("tpu-v5"));
  EXPECT_NE(error.find("unknown device 'tpu-v5'; known devices: a100-40gb, "
                       "a100-80gb, b200-180gb, cpu-node, gb200-186gb, "
                       "h100-80gb, h200-141gb, l4-24gb, l40s-48gb"),
            std::string::npos)
      << error;
}

/// A directory of its own for files that break one rule each.
class DeviceFiles : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("devices", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string write(const std::string &name, const std::string &text) {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    EXPECT_FALSE(ec);
    os << text;
    return std::string(path);
  }

  llvm::SmallString<128> dir;
};

/// A valid CPU device file whose figures block is `figures`.
std::string cpuFile(const std::string &name, const std::string &figures) {
  return R"({"schema": "autoshard-device/1", "name": ")" + name +
         R"(", "kind": "cpu", "figures": {)" + figures + "}}";
}

const char *kCpuFigures =
    R"("devices_per_node": {"value": 1, "source": "definition"},
       "memory_bytes": {"value": 1e9, "source": "s"},
       "peak_bf16_flop_per_s": {"value": 1e11, "source": "s"},
       "peak_f32_flop_per_s": {"value": 1e11, "source": "s"},
       "memory_bandwidth_bytes_per_s": {"value": 1e10, "source": "s"},
       "intra_node_bandwidth_bytes_per_s": {"value": 1e9, "source": "s"},
       "collective_launch_latency_s": {"value": 1e-6, "source": "s"},
       "ring_step_latency_intra_node_s": {"value": 1e-6, "source": "s"},
       "tree_step_latency_intra_node_s": {"value": 1e-6, "source": "s"})";

TEST_F(DeviceFiles, AValidFileLoads) {
  std::string path = write("box.json", cpuFile("box", kCpuFigures));
  llvm::Expected<DeviceSpec> device = loadDeviceFile(path);
  ASSERT_TRUE(bool(device)) << llvm::toString(device.takeError());
  EXPECT_EQ(device->name, "box");
  EXPECT_EQ(device->memoryBytes, 1000000000);
  llvm::Expected<DeviceSpec> found = lookupDevice("box", dir);
  EXPECT_TRUE(bool(found)) << llvm::toString(found.takeError());
}

TEST_F(DeviceFiles, APathIsADeviceFileOfTheUsersOwn) {
  // --device=PATH: a device the catalog lacks, without touching it.
  std::string path = write("box.json", cpuFile("box", kCpuFigures));
  llvm::Expected<DeviceSpec> device = lookupDevice(path);
  ASSERT_TRUE(bool(device)) << llvm::toString(device.takeError());
  EXPECT_EQ(device->name, "box");
  // A bare file name with the extension is a path too, not a catalog name.
  EXPECT_NE(errorOf(lookupDevice("box.json"))
                .find("cannot read device file "
                      "'box.json'"),
            std::string::npos);
  EXPECT_NE(errorOf(lookupDevice(std::string(dir) + "/none.json"))
                .find("cannot read device file"),
            std::string::npos);
  EXPECT_NE(errorOf(lookupDevice("tpu-v5"))
                .find("or the path of a device file of your own"),
            std::string::npos);
}

// The catalogue is looked for beside the running program first (an
// installed or moved tree's bin/../share/autoshard/devices), then in the
// source tree: a copied bin/ used to read only the tree it was configured
// from.
TEST(DeviceCatalog, LookedForBesideTheProgramThenInTheSourceTree) {
  std::vector<std::string> candidates = getDeviceDirectoryCandidates();
  ASSERT_EQ(candidates.size(), 2u);
  llvm::SmallString<256> exe;
  ASSERT_FALSE(llvm::sys::fs::real_path("/proc/self/exe", exe));
  llvm::SmallString<256> expected =
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe));
  llvm::sys::path::append(expected, "share", "autoshard", "devices");
  EXPECT_EQ(candidates[0], std::string(expected));
  EXPECT_TRUE(llvm::StringRef(candidates[1]).ends_with("data/devices"));
  // The build's own tests find the source tree's (no share/ beside them).
  EXPECT_EQ(getDefaultDeviceDirectory(), candidates[1]);
  // "" is the default catalogue, looked for as above.
  EXPECT_EQ(errorOf(loadDeviceDirectory("")), "");
}

TEST_F(DeviceFiles, TheFirstCandidateThatExistsIsTheCatalogue) {
  std::string none = std::string(dir) + "/none";
  llvm::Expected<std::string> found =
      findDeviceDirectory({none, std::string(dir)});
  ASSERT_TRUE(bool(found)) << llvm::toString(found.takeError());
  EXPECT_EQ(*found, std::string(dir));
}

TEST_F(DeviceFiles, NoCatalogueNamesEveryPlaceLooked) {
  std::string a = std::string(dir) + "/bin/../share/autoshard/devices";
  std::string b = std::string(dir) + "/src/data/devices";
  EXPECT_EQ(errorOf(findDeviceDirectory({a, b})),
            "cannot find the device catalogue (the shipped device files): "
            "looked for the directory '" +
                a + "' and '" + b +
                "', and none exists. An installed tree keeps it in "
                "share/autoshard/devices beside bin/ (cmake --install puts it "
                "there); a build finds the data/devices of its source tree. "
                "Install autoshard, copy data/devices there, or give --device "
                "the path of a device file");
}

TEST_F(DeviceFiles, MissingFileAndDirectory) {
  EXPECT_NE(errorOf(loadDeviceFile(std::string(dir) + "/none.json"))
                .find("cannot read device file"),
            std::string::npos);
  EXPECT_NE(errorOf(loadDeviceDirectory(dir))
                .find("has no *.json device "
                      "files"),
            std::string::npos);
  EXPECT_NE(errorOf(loadDeviceDirectory(std::string(dir) + "/none"))
                .find("cannot read the device directory"),
            std::string::npos);
}

TEST_F(DeviceFiles, EachRuleHasItsError) {
  struct Case {
    const char *what;
    std::string text;
    const char *error;
  };
  std::string figures = kCpuFigures;
  auto without = [&](const std::string &key) {
    std::string copy = figures;
    size_t at = copy.find("\"" + key + "\"");
    size_t end = copy.find('}', at);
    copy.erase(at, end - at + 2);
    return copy;
  };
  const Case cases[] = {
      {"not JSON", "{", "not valid JSON"},
      {"not an object", "[1]", "the top level must be a JSON object"},
      {"wrong schema",
       R"({"schema": "x", "name": "box", "kind": "cpu", "figures": {}})",
       "\"schema\" must be \"autoshard-device/1\""},
      {"unknown key",
       R"({"schema": "autoshard-device/1", "name": "box", "kind": "cpu",
           "figures": {}, "colour": 1})",
       "unknown key \"colour\""},
      {"bad name", cpuFile("Box!", figures), "\"name\" must be"},
      {"bad kind",
       R"({"schema": "autoshard-device/1", "name": "box", "kind": "tpu",
           "figures": {}})",
       "\"kind\" must be \"gpu\" or \"cpu\""},
      {"missing figure", cpuFile("box", without("memory_bytes")),
       "figure \"memory_bytes\" is missing"},
      {"unknown figure",
       cpuFile("box",
               figures + R"(, "warp_size": {"value": 32, "source": "s"})"),
       "unknown figure \"warp_size\" (known: devices_per_node, memory_bytes"},
      {"no source",
       cpuFile("box",
               without("memory_bytes") + R"(, "memory_bytes": {"value": 1e9})"),
       "figure \"memory_bytes\" has no \"source\""},
      {"empty source",
       cpuFile("box", without("memory_bytes") +
                          R"(, "memory_bytes": {"value": 1e9, "source": " "})"),
       "has no \"source\""},
      {"negative value",
       cpuFile("box", without("memory_bytes") +
                          R"(, "memory_bytes": {"value": -1, "source": "s"})"),
       "figure \"memory_bytes\" needs a positive number"},
      {"fractional count",
       cpuFile("box",
               without("devices_per_node") +
                   R"(, "devices_per_node": {"value": 1.5, "source": "s"})"),
       "\"devices_per_node\" must be a whole number"},
      {"unknown part",
       cpuFile(
           "box",
           without("memory_bytes") +
               R"(, "memory_bytes": {"value": 1e9, "source": "s", "unit": "GB"})"),
       "has unknown key \"unit\""},
      {"gpu figure on a cpu",
       cpuFile("box",
               figures + R"(, "nvme_bytes": {"value": 1e12, "source": "s"})"),
       "\"nvme_bytes\" describes a GPU's host"},
      {"curve not increasing",
       cpuFile(
           "box",
           figures +
               R"(, "intra_node_all_gather_bandwidth_bytes_per_s": {"value": 1e9, "source": "s", "by_message_bytes": [[4096, 2e9], [1024, 1e9]]})"),
       "\"by_message_bytes\" must be a list of [bytes, value] pairs of "
       "positive numbers in increasing bytes"},
      {"curve on a scalar figure",
       cpuFile(
           "box",
           without("memory_bytes") +
               R"(, "memory_bytes": {"value": 1e9, "source": "s", "by_message_bytes": [[1, 1]]})"),
       "has unknown key \"by_message_bytes\" (expected value, source, "
       "published, assumption)"},
      {"efficiency above one",
       cpuFile("box",
               figures +
                   R"(, "compute_efficiency": {"value": 1.5, "source": "s"})"),
       "figure \"compute_efficiency\" is 1.5, outside [0.001, 1]"},
      // Positive and finite but no device's: each unit's bounds, both ends.
      {"FLOP/s too small",
       cpuFile(
           "box",
           without("peak_f32_flop_per_s") +
               R"(, "peak_f32_flop_per_s": {"value": 1e-300, "source": "s"})"),
       "figure \"peak_f32_flop_per_s\" is 1e-300 FLOP/s, outside [1e+06, "
       "1e+18] FLOP/s, the range of any real device's; check its unit and "
       "exponent"},
      {"FLOP/s too large",
       cpuFile(
           "box",
           without("peak_bf16_flop_per_s") +
               R"(, "peak_bf16_flop_per_s": {"value": 2e18, "source": "s"})"),
       "\"peak_bf16_flop_per_s\" is 2e+18 FLOP/s, outside [1e+06, 1e+18]"},
      {"bandwidth too small",
       cpuFile(
           "box",
           without("memory_bandwidth_bytes_per_s") +
               R"(, "memory_bandwidth_bytes_per_s": {"value": 1000, "source": "s"})"),
       "\"memory_bandwidth_bytes_per_s\" is 1000 bytes/s, outside [1e+06, "
       "1e+15] bytes/s"},
      {"bandwidth too large",
       cpuFile(
           "box",
           without("intra_node_bandwidth_bytes_per_s") +
               R"(, "intra_node_bandwidth_bytes_per_s": {"value": 1e16, "source": "s"})"),
       "\"intra_node_bandwidth_bytes_per_s\" is 1e+16 bytes/s, outside"},
      {"latency too large",
       cpuFile(
           "box",
           without("collective_launch_latency_s") +
               R"(, "collective_launch_latency_s": {"value": 60, "source": "s"})"),
       "\"collective_launch_latency_s\" is 60 s, outside [1e-09, 10] s"},
      {"latency too small",
       cpuFile(
           "box",
           without("ring_step_latency_intra_node_s") +
               R"(, "ring_step_latency_intra_node_s": {"value": 1e-12, "source": "s"})"),
       "\"ring_step_latency_intra_node_s\" is 1e-12 s, outside"},
      {"memory too small",
       cpuFile("box",
               without("memory_bytes") +
                   R"(, "memory_bytes": {"value": 1024, "source": "s"})"),
       "\"memory_bytes\" is 1024 bytes, outside [4096, 1e+18] bytes"},
      {"count too large",
       cpuFile("box", figures + R"(, "cores": {"value": 1e7, "source": "s"})"),
       "\"cores\" is 1e+07, outside [1, 1e+06]"},
      {"curve point out of range",
       cpuFile(
           "box",
           figures +
               R"(, "intra_node_all_gather_bandwidth_bytes_per_s": {"value": 1e9, "source": "s", "by_message_bytes": [[1024, 1e9], [4096, 1e-3]]})"),
       "\"by_message_bytes\" of figure "
       "\"intra_node_all_gather_bandwidth_bytes_per_s\" is 0.001 bytes/s, "
       "outside [1e+06, 1e+15] bytes/s"},
      // llvm::json recurses per level: refused before it parses.
      {"nested too deep", std::string(50000, '[') + std::string(50000, ']'),
       "arrays and objects nest more than 32 levels deep (at line 1, column "
       "33)"},
      {"nested to the limit", std::string(32, '[') + std::string(32, ']'),
       "the top level must be a JSON object"},
      {"half a network",
       cpuFile(
           "box",
           figures +
               R"(, "inter_node_bandwidth_bytes_per_s": {"value": 1e9, "source": "s"})"),
       "come together: give all three or none"},
  };
  for (const Case &c : cases) {
    std::string error = errorOf(parseDeviceSpec(c.text, "box.json"));
    EXPECT_NE(error.find(c.error), std::string::npos)
        << c.what << ": " << error;
    EXPECT_EQ(error.rfind("box.json: ", 0), 0u) << c.what << ": " << error;
  }
}

TEST_F(DeviceFiles, TheFileIsNamedAfterTheDevice) {
  std::string path = write("other.json", cpuFile("box", kCpuFigures));
  EXPECT_NE(errorOf(loadDeviceFile(path))
                .find("the device is named 'box' but the file is "
                      "'other.json'"),
            std::string::npos);
  // A bad file in a directory names itself.
  EXPECT_NE(errorOf(lookupDevice("box", dir)).find("other.json"),
            std::string::npos);
}

TEST(DeviceCatalog, ClustersOfTheShippedDevices) {
  llvm::Expected<DeviceSpec> h100 = lookupDevice("h100-80gb");
  ASSERT_TRUE(bool(h100));
  ClusterSpec sixteen = makeCluster(*h100, 16);
  EXPECT_EQ(sixteen.nodes, 2);
  EXPECT_EQ(sixteen.ranksPerNode, 8);
  EXPECT_EQ(verifyCluster(sixteen), "");
  ClusterSpec four = makeCluster(*h100, 4);
  EXPECT_EQ(four.nodes, 1);
  EXPECT_EQ(four.ranksPerNode, 4);
  EXPECT_NE(verifyCluster(makeCluster(*h100, 12))
                .find("8 GPUs per node, one rank each: 12 ranks per node "
                      "do not fit"),
            std::string::npos);
  llvm::Expected<DeviceSpec> cpu = lookupDevice("cpu-node");
  ASSERT_TRUE(bool(cpu));
  ClusterSpec node = makeCluster(*cpu, 4);
  EXPECT_EQ(node.nodes, 1);
  EXPECT_EQ(node.ranksPerNode, 4);
  EXPECT_EQ(verifyCluster(node), "");
  EXPECT_NE(verifyCluster(ClusterSpec{*cpu, 2, 4})
                .find("describes no network between nodes"),
            std::string::npos);
  // The CPU node's memory and FLOPs are shared by its ranks.
  EXPECT_EQ(rankMemoryBytes(node), cpu->memoryBytes / 4);
  EXPECT_DOUBLE_EQ(rankPeakFlops(node, false), cpu->peakFlopsF32 / 4);
}

TEST(DeviceCatalog, EveryPresetOfGpt2SmallOnEveryDevice) {
  // An end-to-end smoke test over the shipped data: every preset gives a
  // positive time and traffic that grows with sharding.
  TransformerShape shape{
      TransformerShape::Family::GPT2, 12, 768, 12, 12, 3072, 50257, 1024, true};
  ModelDescription model =
      describeTransformer("gpt2-small", shape, 64, 1024, 1, Optimizer::AdamW,
                          Precision::BF16, true);
  for (const char *name :
       {"a100-80gb", "h100-80gb", "h200-141gb", "b200-180gb", "gb200-186gb"}) {
    llvm::Expected<DeviceSpec> device = lookupDevice(name);
    ASSERT_TRUE(bool(device));
    ClusterSpec cluster = makeCluster(*device, 16);
    CostEstimate ddp = estimateCost(model, *presetPlan("ddp", 16), cluster);
    CostEstimate zero3 = estimateCost(model, *presetPlan("zero3", 16), cluster);
    EXPECT_GT(ddp.time.total(), 0) << name;
    EXPECT_TRUE(ddp.fits()) << name;
    EXPECT_GT(zero3.traffic.total(), ddp.traffic.total()) << name;
    EXPECT_LT(zero3.memory.device.modelStates(),
              ddp.memory.device.modelStates())
        << name;
  }
}

} // namespace
