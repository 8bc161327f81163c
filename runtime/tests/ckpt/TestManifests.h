// Step manifests of one small model under several plans, for the tests.
#pragma once

#include "io/Manifest.h"

#include <gtest/gtest.h>

#include <string>

namespace autoshard::rt::testing {

/// A model of w (5 elements, 5x1), b (3) and their optimizer states
/// w.m and b.m, plus a step counter, on grid `grid` with w, w.m and b.m
/// sharded over grid axes `mask` (0: all replicated, DDP) and b
/// replicated. Flat shards hold ceil(numel / n) elements.
inline std::string modelManifestText(const std::string &grid, int mask,
                                     int64_t shardGroup,
                                     const std::string &strategy = "zero3") {
  auto sharded = [&](const char *name, const char *role, int64_t numel,
                     const char *full, int index) {
    std::string line =
        "arg " + std::to_string(index) + " " + role + " " + name + " f32 ";
    if (mask == 0)
      return line + full + " init=zeros\n";
    return line + std::to_string((numel + shardGroup - 1) / shardGroup) +
           " init=zeros full=" + full + " shard_axes=" + std::to_string(mask) +
           "\n";
  };
  int64_t world = 1;
  for (size_t start = 0; start < grid.size();) {
    size_t x = grid.find('x', start);
    world *= std::stoll(grid.substr(start, x - start));
    start = x == std::string::npos ? grid.size() : x + 1;
  }
  return "autoshard-manifest 1\nabi 6\nstep train_step\nstrategy " + strategy +
         "\ngrid " + grid + "\n" + sharded("w", "param", 5, "5x1", 0) +
         "arg 1 param b f32 3 init=zeros\n" +
         sharded("w.m", "opt_state", 5, "5x1", 2) +
         sharded("b.m", "opt_state", 3, "3", 3) +
         "arg 4 opt_state optimizer.step i32 scalar init=zeros\n"
         "arg 5 input x f32 1x3 batch_dim=0 global=" +
         std::to_string(world) +
         "\n"
         "result 0 loss loss f32 scalar\n"
         "end\n";
}

inline Manifest modelManifest(const std::string &grid, int mask,
                              int64_t shardGroup,
                              const std::string &strategy = "zero3") {
  Expected<Manifest> parsed =
      parseManifest(modelManifestText(grid, mask, shardGroup, strategy));
  EXPECT_TRUE(parsed) << parsed.message();
  return parsed ? *parsed : Manifest();
}

} // namespace autoshard::rt::testing
