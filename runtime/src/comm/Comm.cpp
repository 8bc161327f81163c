// Collectives over groups of ranks of the compiled device grid.
#include "comm/Comm.h"
#include "core/Context.h"
#include "core/Dtype.h"
#include "io/Manifest.h"

#include <string>

namespace autoshard::rt {

namespace {
std::string rankList(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}
} // namespace

std::string describePeerWords(const std::vector<PeerWord> &others) {
  std::vector<int> missing, here;
  std::vector<std::string> elsewhere;
  for (const PeerWord &word : others) {
    switch (word.state) {
    case PeerWord::None:
      missing.push_back(word.rank);
      break;
    case PeerWord::Here:
      here.push_back(word.rank);
      break;
    case PeerWord::Elsewhere:
      elsewhere.push_back("rank " + std::to_string(word.rank) +
                          " waits itself, in " + word.where);
      break;
    }
  }
  std::vector<std::string> parts;
  if (!missing.empty())
    parts.push_back(rankList(missing) +
                    (missing.size() == 1 ? " has" : " have") +
                    " not reached it");
  for (std::string &part : elsewhere)
    parts.push_back(std::move(part));
  if (!here.empty())
    parts.push_back(here.size() == others.size()
                        ? std::string("every other member waits in it too")
                        : rankList(here) +
                              (here.size() == 1 ? " waits" : " wait") +
                              " in it too");
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i)
    text += (i ? "; " : "") + parts[i];
  return text;
}

std::vector<int64_t> gridCoordinates(int64_t rank,
                                     const std::vector<int64_t> &grid) {
  std::vector<int64_t> coords(grid.size());
  for (size_t i = grid.size(); i-- > 0;) {
    coords[i] = rank % grid[i];
    rank /= grid[i];
  }
  return coords;
}

int64_t gridRank(const std::vector<int64_t> &coords,
                 const std::vector<int64_t> &grid) {
  int64_t rank = 0;
  for (size_t i = 0; i < grid.size(); ++i)
    rank = rank * grid[i] + coords[i];
  return rank;
}

Status checkGridMask(int32_t mask, const std::vector<int64_t> &grid) {
  uint32_t valid = grid.size() >= 32 ? ~0u : (1u << grid.size()) - 1u;
  if (mask < 0 || (static_cast<uint32_t>(mask) & ~valid) != 0)
    return Error("grid_axes_mask " + std::to_string(mask) +
                 " names an axis the grid " + formatShape(grid) +
                 " does not have; valid masks are 0.." + std::to_string(valid));
  return Status::success();
}

std::vector<int> gridGroup(int rank, const std::vector<int64_t> &grid,
                           int32_t mask) {
  std::vector<int64_t> base = gridCoordinates(rank, grid);
  std::vector<size_t> axes;
  for (size_t i = 0; i < grid.size(); ++i) {
    if (mask & (1 << i)) {
      axes.push_back(i);
      base[i] = 0;
    }
  }
  // Enumerate the masked coordinates row-major; with the unmasked ones
  // fixed, that is increasing rank order.
  std::vector<int> ranks;
  std::vector<int64_t> coords = base;
  while (true) {
    ranks.push_back(static_cast<int>(gridRank(coords, grid)));
    size_t k = axes.size();
    while (k > 0) {
      size_t axis = axes[k - 1];
      if (++coords[axis] < grid[axis])
        break;
      coords[axis] = 0;
      --k;
    }
    if (k == 0)
      return ranks;
  }
}

int64_t gridGroupSize(const std::vector<int64_t> &grid, int32_t mask) {
  int64_t n = 1;
  for (size_t i = 0; i < grid.size(); ++i)
    if (mask & (1 << i))
      n *= grid[i];
  return n;
}

int64_t gridGroupIndex(int rank, const std::vector<int64_t> &grid,
                       int32_t mask) {
  std::vector<int64_t> coords = gridCoordinates(rank, grid);
  int64_t index = 0;
  for (size_t i = 0; i < grid.size(); ++i)
    if (mask & (1 << i))
      index = index * grid[i] + coords[i];
  return index;
}

Comm::Comm(int rank, int size, std::vector<int64_t> grid)
    : worldRank(rank), worldSize(size), gridDims(std::move(grid)) {
  int64_t product = 1;
  for (int64_t d : gridDims)
    product *= d;
  if (gridDims.empty() || product != size)
    fatal("grid %s has %lld ranks but the world has %d",
          formatShape(gridDims).c_str(), static_cast<long long>(product), size);
}

Comm::~Comm() = default;

int Comm::groupSize(int32_t mask) const {
  if (Status s = checkGridMask(mask, gridDims); !s)
    fatal("%s", s.message().c_str());
  return static_cast<int>(gridGroupSize(gridDims, mask));
}

std::vector<int> Comm::groupRanks(int32_t mask) const {
  if (Status s = checkGridMask(mask, gridDims); !s)
    fatal("%s", s.message().c_str());
  return gridGroup(worldRank, gridDims, mask);
}

int Comm::groupIndex(int32_t mask) const {
  if (Status s = checkGridMask(mask, gridDims); !s)
    fatal("%s", s.message().c_str());
  return static_cast<int>(gridGroupIndex(worldRank, gridDims, mask));
}

void divideByGroup(void *buffer, int64_t count, asrt_dtype dtype, int n) {
  if (dtype == ASRT_DTYPE_F32) {
    auto *f = static_cast<float *>(buffer);
    for (int64_t i = 0; i < count; ++i)
      f[i] /= static_cast<float>(n);
  } else {
    auto *h = static_cast<uint16_t *>(buffer);
    for (int64_t i = 0; i < count; ++i)
      h[i] = floatToBf16(bf16ToFloat(h[i]) / static_cast<float>(n));
  }
}

} // namespace autoshard::rt
