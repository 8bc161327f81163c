// CRC-32 checksums of checkpoint files and blocks (zlib's crc32).
#include "ckpt/Checksum.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>

namespace autoshard::rt {

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
