// Philox-4x32-10 counter-based RNG (Salmon et al., SC'11) and FNV-1a hashing.
#include "data/Philox.h"

#include <cmath>

namespace autoshard::rt {

PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  philoxRounds(c.data(), k[0], k[1]);
  return c;
}

uint64_t fnv1a64(std::string_view bytes, uint64_t hash) {
  for (char ch : bytes) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= kFnv1aPrime;
  }
  return hash;
}

uint64_t fnv1a64(uint64_t value, uint64_t hash) {
  for (int i = 0; i < 8; ++i) {
    hash ^= (value >> (8 * i)) & 0xffu;
    hash *= kFnv1aPrime;
  }
  return hash;
}

double normalFromBits(uint32_t a, uint32_t b) {
  // u1 in (0, 1] keeps log() finite; u2 in [0, 1) is the angle.
  double u1 = (static_cast<double>(a >> 8) + 1.0) * (1.0 / 16777216.0);
  double u2 = static_cast<double>(b >> 8) * (1.0 / 16777216.0);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

PhiloxStream::PhiloxStream(uint64_t key64, uint64_t nonce)
    : key{static_cast<uint32_t>(key64), static_cast<uint32_t>(key64 >> 32)},
      nonceLow(static_cast<uint32_t>(nonce)),
      nonceHigh(static_cast<uint32_t>(nonce >> 32)) {}

PhiloxCounter PhiloxStream::block(uint64_t blockIndex) const {
  return philox4x32_10({static_cast<uint32_t>(blockIndex),
                        static_cast<uint32_t>(blockIndex >> 32), nonceLow,
                        nonceHigh},
                       key);
}

uint32_t PhiloxStream::word(uint64_t index) const {
  return block(index / 4)[index % 4];
}

double PhiloxStream::normal(uint64_t index) const {
  PhiloxCounter words = block(index / 2);
  unsigned pair = static_cast<unsigned>(index % 2) * 2;
  return normalFromBits(words[pair], words[pair + 1]);
}

int64_t PhiloxStream::uniformInt(uint64_t index, int64_t bound) const {
  // Multiply-shift instead of modulo: no division, and the bias is below
  // bound / 2^32, negligible for class counts.
  unsigned __int128 scaled = static_cast<unsigned __int128>(word(index)) *
                             static_cast<uint64_t>(bound);
  return static_cast<int64_t>(scaled >> 32);
}

} // namespace autoshard::rt
