// Philox-4x32-10 counter-based RNG (Salmon et al., SC'11) and FNV-1a hashing.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

// The rounds and the uniform below are also device code: the CUDA
// kernels draw the same numbers as the host (asrt_dropout's masks).
#ifdef __CUDACC__
#define ASRT_HOST_DEVICE __host__ __device__
#else
#define ASRT_HOST_DEVICE
#endif

namespace autoshard::rt {

/// Philox-4x32-10 on `c` in place, with the key words `k0`, `k1`: the one
/// definition of the rounds, which philox4x32_10 and the kernels call.
ASRT_HOST_DEVICE inline void philoxRounds(uint32_t c[4], uint32_t k0,
                                          uint32_t k1) {
  // Multipliers and Weyl key increments from the paper's Philox-4x32 table.
  constexpr uint32_t kMultiplier0 = 0xD2511F53u;
  constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u;
  constexpr uint32_t kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    // One round: two 32x32->64 multiplies, the high halves xored with the
    // other words and the key, then the words permuted.
    uint64_t p0 = static_cast<uint64_t>(kMultiplier0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kMultiplier1) * c[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = uint32_t(p1);
    uint32_t c1 = c[1], c3 = c[3];
    c[0] = hi1 ^ c1 ^ k0;
    c[1] = lo1;
    c[2] = hi0 ^ c3 ^ k1;
    c[3] = lo0;
  }
}

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

/// Philox-4x32 with 10 rounds: a bijection of the 128-bit counter for each
/// 64-bit key. Random123's known-answer vectors pin it (tests/core).
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnv1aPrime = 0x100000001b3ull;

/// 64-bit FNV-1a over `bytes`, continuing from `hash` so that several
/// pieces can be hashed in sequence.
uint64_t fnv1a64(std::string_view bytes, uint64_t hash = kFnv1aOffset);
/// Continues an FNV-1a hash with the 8 little-endian bytes of `value`.
uint64_t fnv1a64(uint64_t value, uint64_t hash);

/// [0, 1) from the top 24 bits, so every value is an exact float.
ASRT_HOST_DEVICE inline float uniformFromBits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

/// A standard normal from two uniform words (Box–Muller, cosine branch).
double normalFromBits(uint32_t a, uint32_t b);

/// An endless array of random words addressed by a 64-bit index: word i is
/// word (i mod 4) of Philox(counter = {i/4 low, i/4 high, nonce low,
/// nonce high}, key). Any element is computed without computing others,
/// which is what lets a shard fill only its slice.
class PhiloxStream {
public:
  PhiloxStream(uint64_t key, uint64_t nonce);

  uint32_t word(uint64_t index) const;
  /// Element `index` of a uniform [0, 1) sequence.
  float uniform(uint64_t index) const { return uniformFromBits(word(index)); }
  /// Element `index` of a standard normal sequence (uses words 2i, 2i+1).
  double normal(uint64_t index) const;
  /// Element `index` of a uniform integer sequence in [0, bound), bound > 0.
  int64_t uniformInt(uint64_t index, int64_t bound) const;

  /// The four words [4 * blockIndex, 4 * blockIndex + 4), for loops that use
  /// all of them.
  PhiloxCounter block(uint64_t blockIndex) const;

private:
  PhiloxKey key;
  uint32_t nonceLow, nonceHigh;
};

} // namespace autoshard::rt
