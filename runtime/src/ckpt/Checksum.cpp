// CRC-32 checksums of checkpoint files and blocks (zlib's crc32).
#include "ckpt/Checksum.h"

#if ASRT_HAVE_ZLIB
#include <zlib.h>
#endif

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cstdio>

namespace autoshard::rt {

#if ASRT_HAVE_ZLIB
uint32_t crc32Update(uint32_t crc, const void *data, size_t bytes) {
  const auto *p = static_cast<const Bytef *>(data);
  uLong value = crc;
  while (bytes > 0) {
    auto piece = static_cast<uInt>(std::min<size_t>(bytes, UINT_MAX));
    value = ::crc32(value, p, piece);
    p += piece;
    bytes -= piece;
  }
  return static_cast<uint32_t>(value);
}
#else
uint32_t crc32Update(uint32_t crc, const void *data, size_t bytes) {
  return crc32Reference(crc, data, bytes);
}
#endif

uint32_t crc32Reference(uint32_t crc, const void *data, size_t bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int bit = 0; bit < 8; ++bit)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (size_t i = 0; i < bytes; ++i)
    crc = table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

std::string formatCrc32(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

bool parseCrc32(std::string_view text, uint32_t &crc) {
  if (text.size() != 8)
    return false;
  auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), crc, 16);
  return ec == std::errc() && ptr == text.data() + text.size();
}

} // namespace autoshard::rt
