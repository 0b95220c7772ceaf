// co_linetable and co_exceptiontable decoding (CPython 3.11 formats; see varint.h).
#include <algorithm>

#include "bytecode.h"
#include "varint.h"

namespace dv::bc {

Result<std::vector<LineEntry>> decode_linetable(std::string_view t, int firstlineno,
                                                size_t code_units) {
  std::vector<LineEntry> out;
  out.reserve(t.size() / 2 + 1);  // entries are at least 1 byte, typically 2
  int32_t line = firstlineno;
  uint32_t unit = 0;
  size_t pos = 0;
  auto err = [&](const char* what, size_t at) {
    return make_error("co_linetable", what, static_cast<long>(at));
  };
  while (pos < t.size()) {
    size_t entry_at = pos;
    uint8_t first = static_cast<uint8_t>(t[pos++]);
    if (!(first & 0x80)) return err("entry does not start with the marker bit", entry_at);
    int code = (first >> 3) & 15;
    uint32_t len = (first & 7) + 1;
    LineEntry e;
    e.start = unit;
    e.end = unit + len;
    switch (code) {
      case 15:  // no location
        break;
      case 14: {  // long form
        auto dl = read_le_svarint(t, pos);
        auto de = read_le_varint(t, pos);
        auto c = read_le_varint(t, pos);
        auto ec = read_le_varint(t, pos);
        if (!dl || !de || !c || !ec) return err("truncated long-form entry", entry_at);
        line += *dl;
        e.pos.line = line;
        e.pos.end_line = line + static_cast<int32_t>(*de);
        e.pos.col = *c == 0 ? kNone : static_cast<int32_t>(*c) - 1;
        e.pos.end_col = *ec == 0 ? kNone : static_cast<int32_t>(*ec) - 1;
        break;
      }
      case 13: {  // no column
        auto dl = read_le_svarint(t, pos);
        if (!dl) return err("truncated no-column entry", entry_at);
        line += *dl;
        e.pos.line = e.pos.end_line = line;
        break;
      }
      case 10: case 11: case 12: {  // one-line form
        if (pos + 2 > t.size()) return err("truncated one-line entry", entry_at);
        line += code - 10;
        e.pos.line = e.pos.end_line = line;
        e.pos.col = static_cast<uint8_t>(t[pos++]);
        e.pos.end_col = static_cast<uint8_t>(t[pos++]);
        break;
      }
      default: {  // short form, codes 0-9
        if (pos >= t.size()) return err("truncated short entry", entry_at);
        uint8_t b = static_cast<uint8_t>(t[pos++]);
        if (b & 0x80) return err("short entry's column byte has the marker bit", pos - 1);
        e.pos.line = e.pos.end_line = line;
        e.pos.col = code * 8 + ((b >> 4) & 7);
        e.pos.end_col = e.pos.col + (b & 15);
        break;
      }
    }
    unit += len;
    if (unit > code_units) return err("entries cover more code units than co_code has", entry_at);
    out.push_back(e);
  }
  return out;
}

std::vector<Position> positions_per_unit(const std::vector<LineEntry>& entries, size_t code_units) {
  std::vector<Position> out(code_units);
  for (const LineEntry& e : entries)
    for (uint32_t u = e.start; u < e.end && u < code_units; ++u) out[u] = e.pos;
  return out;
}

std::vector<std::pair<uint32_t, int32_t>> line_starts(const std::vector<LineEntry>& entries) {
  std::vector<std::pair<uint32_t, int32_t>> out;
  int32_t last = kNone;
  for (const LineEntry& e : entries) {
    if (e.start == e.end || e.pos.line == kNone || e.pos.line == last) continue;
    last = e.pos.line;
    out.emplace_back(e.start * 2, e.pos.line);
  }
  return out;
}

Result<std::vector<ExcEntry>> decode_exception_table(std::string_view t, size_t code_bytes) {
  std::vector<ExcEntry> out;
  size_t pos = 0;
  while (pos < t.size()) {
    size_t at = pos;
    bool start_bit = false;
    auto s = read_be_varint(t, pos, &start_bit);
    auto n = read_be_varint(t, pos);
    auto tg = read_be_varint(t, pos);
    auto dl = read_be_varint(t, pos);
    if (!s || !n || !tg || !dl)
      return make_error("co_exceptiontable", "truncated entry", static_cast<long>(at));
    if (!start_bit)
      return make_error("co_exceptiontable", "entry does not start with the marker bit",
                        static_cast<long>(at));
    ExcEntry e{*s * 2, (*s + *n) * 2, *tg * 2, *dl >> 1, (*dl & 1) != 0};
    if (e.end > code_bytes || e.target >= code_bytes)
      return make_error("co_exceptiontable",
                        "entry " + std::to_string(out.size()) + " points past the end of co_code (" +
                            std::to_string(code_bytes) + " bytes)",
                        static_cast<long>(at));
    if (!out.empty() && e.start < out.back().end)
      return make_error("co_exceptiontable", "entries overlap or are not sorted",
                        static_cast<long>(at));
    out.push_back(e);
  }
  return out;
}

}  // namespace dv::bc
