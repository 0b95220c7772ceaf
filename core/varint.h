// Variable-length integers of CPython 3.11's code tables.
// Line table (Objects/locations.md): 6-bit chunks, least significant first, bit 6 = more.
// Exception table (Objects/exception_handling_notes.txt): 6-bit chunks, most significant first,
// bit 6 = more, bit 7 marks the first byte of an entry.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dv::bc {

// Little-endian 6-bit varint at table[pos]; advances pos. nullopt if truncated or too long.
inline std::optional<uint32_t> read_le_varint(std::string_view t, size_t& pos) {
  uint32_t v = 0;
  for (int shift = 0; shift < 36; shift += 6) {
    if (pos >= t.size()) return std::nullopt;
    uint8_t b = static_cast<uint8_t>(t[pos++]);
    v |= static_cast<uint32_t>(b & 63) << shift;
    if (!(b & 64)) return v;
  }
  return std::nullopt;
}
inline std::optional<int32_t> read_le_svarint(std::string_view t, size_t& pos) {
  auto u = read_le_varint(t, pos);
  if (!u) return std::nullopt;
  return (*u & 1) ? -static_cast<int32_t>(*u >> 1) : static_cast<int32_t>(*u >> 1);
}
inline void write_le_varint(std::string& out, uint32_t v) {
  while (v >= 64) {
    out.push_back(static_cast<char>(64 | (v & 63)));
    v >>= 6;
  }
  out.push_back(static_cast<char>(v));
}
inline void write_le_svarint(std::string& out, int32_t v) {
  write_le_varint(out, v < 0 ? ((static_cast<uint32_t>(-static_cast<int64_t>(v)) << 1) | 1)
                             : (static_cast<uint32_t>(v) << 1));
}

// Big-endian 6-bit varint of the exception table; `start` receives bit 7 of the first byte.
inline std::optional<uint32_t> read_be_varint(std::string_view t, size_t& pos, bool* start = nullptr) {
  if (pos >= t.size()) return std::nullopt;
  uint8_t b = static_cast<uint8_t>(t[pos++]);
  if (start) *start = (b & 128) != 0;
  uint32_t v = b & 63;
  int n = 0;
  while (b & 64) {
    if (pos >= t.size() || ++n > 5) return std::nullopt;
    b = static_cast<uint8_t>(t[pos++]);
    v = (v << 6) | (b & 63);
  }
  return v;
}
inline void write_be_varint(std::string& out, uint32_t v, bool start) {
  uint8_t msb = start ? 128 : 0;
  for (int shift = 24; shift >= 6; shift -= 6) {
    if (v >= (1u << shift)) {
      out.push_back(static_cast<char>(((v >> shift) & 63) | 64 | msb));
      msb = 0;
    }
  }
  out.push_back(static_cast<char>((v & 63) | msb));
}

}  // namespace dv::bc
