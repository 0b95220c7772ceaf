// Byte-level helpers shared by the trace writer and reader: little-endian integers, LEB128
// varints with zigzag for signed values, and a bounds-checked cursor that never reads past its
// input (every read reports failure instead).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "trace.h"

namespace dv::trace {

inline void put_u16(std::string& o, uint16_t v) { o.append(reinterpret_cast<const char*>(&v), 2); }
inline void put_u32(std::string& o, uint32_t v) { o.append(reinterpret_cast<const char*>(&v), 4); }
inline void put_u64(std::string& o, uint64_t v) { o.append(reinterpret_cast<const char*>(&v), 8); }
inline void put_var(std::string& o, uint64_t v) {
  while (v >= 0x80) {
    o.push_back(static_cast<char>(0x80 | (v & 0x7f)));
    v >>= 7;
  }
  o.push_back(static_cast<char>(v));
}
inline uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }
inline void put_svar(std::string& o, int64_t v) { put_var(o, zigzag(v)); }

struct Cursor {
  std::string_view s;
  size_t pos = 0;
  bool ok = true;
  bool need(size_t n) {
    if (!ok || s.size() - pos < n) return ok = false;
    return true;
  }
  uint8_t u8() { return need(1) ? static_cast<uint8_t>(s[pos++]) : 0; }
  uint16_t u16() { uint16_t v = 0; if (need(2)) { std::memcpy(&v, s.data() + pos, 2); pos += 2; } return v; }
  uint32_t u32() { uint32_t v = 0; if (need(4)) { std::memcpy(&v, s.data() + pos, 4); pos += 4; } return v; }
  uint64_t u64() { uint64_t v = 0; if (need(8)) { std::memcpy(&v, s.data() + pos, 8); pos += 8; } return v; }
  uint64_t var() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!need(1)) return 0;
      const uint8_t b = static_cast<uint8_t>(s[pos++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  int64_t svar() { return unzigzag(var()); }
  std::string_view bytes(size_t n) {
    if (!need(n)) return {};
    std::string_view r = s.substr(pos, n);
    pos += n;
    return r;
  }
  bool done() const { return pos == s.size(); }
};

// ChunkHeader <-> its kChunkHeaderBytes form (tag first, crc32 of everything before it last).
inline std::string encode_header(const ChunkHeader& h) {
  std::string o;
  o.reserve(kChunkHeaderBytes);
  put_u32(o, kChunkTag);
  put_u32(o, h.seq);
  put_u64(o, h.first_step);
  for (uint32_t v : {h.nsteps, h.first_compile, h.last_compile, h.nvalues, h.nevents, h.events_zsize, h.events_rsize,
                     h.steps_zsize, h.steps_rsize})
    put_u32(o, v);
  put_u16(o, h.min_depth);
  put_u16(o, h.max_depth);
  put_u32(o, h.nguards);
  put_u32(o, h.nbreaks);
  put_u32(o, h.ngraphs);
  put_u64(o, h.time_us);
  put_u32(o, h.events_crc);
  put_u32(o, crc32(o.data(), o.size()));
  return o;
}

// False with `why` when the bytes are not a valid header.
inline bool decode_header(std::string_view b, ChunkHeader& h, std::string& why) {
  if (b.size() < kChunkHeaderBytes) return why = "chunk header truncated", false;
  Cursor c{b.substr(0, kChunkHeaderBytes)};
  if (c.u32() != kChunkTag) return why = "bad chunk header tag", false;
  h.seq = c.u32();
  h.first_step = c.u64();
  uint32_t* fields[] = {&h.nsteps, &h.first_compile, &h.last_compile, &h.nvalues, &h.nevents, &h.events_zsize,
                        &h.events_rsize, &h.steps_zsize, &h.steps_rsize};
  for (uint32_t* f : fields) *f = c.u32();
  h.min_depth = c.u16();
  h.max_depth = c.u16();
  h.nguards = c.u32();
  h.nbreaks = c.u32();
  h.ngraphs = c.u32();
  h.time_us = c.u64();
  h.events_crc = c.u32();
  const size_t body = c.pos;
  const uint32_t crc = c.u32();
  if (!c.ok) return why = "chunk header truncated", false;
  if (crc != crc32(b.data(), body)) return why = "chunk header checksum mismatch", false;
  return true;
}

}  // namespace dv::trace
