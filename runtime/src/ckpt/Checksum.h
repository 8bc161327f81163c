// CRC-32 checksums of checkpoint files and blocks (zlib's crc32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace autoshard::rt {

/// Continues the CRC-32 (the ISO-HDLC polynomial of zlib, gzip and PNG)
/// `crc` with `bytes` bytes of `data`; start from 0. Any length: zlib's
/// 32-bit length argument is fed in pieces.
uint32_t crc32Update(uint32_t crc, const void *data, size_t bytes);
/// The same CRC-32 computed here, a byte at a time through a table: what
/// crc32Update is in a runtime built without zlib (a GPU machine's), so
/// that checkpoints stay readable across builds. Slower than zlib's.
uint32_t crc32Reference(uint32_t crc, const void *data, size_t bytes);

inline uint32_t crc32Of(const void *data, size_t bytes) {
  return crc32Update(0, data, bytes);
}
inline uint32_t crc32Of(std::string_view text) {
  return crc32Update(0, text.data(), text.size());
}

/// Eight lowercase hex digits, as checkpoint manifests spell a CRC.
std::string formatCrc32(uint32_t crc);
/// Parses exactly eight hex digits; false otherwise.
bool parseCrc32(std::string_view text, uint32_t &crc);

} // namespace autoshard::rt
