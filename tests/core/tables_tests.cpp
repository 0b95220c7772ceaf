// Varints, line table and exception table: encodings from Objects/locations.md and
// Objects/exception_handling_notes.txt, checked on bytes computed by hand from those specs.
#include <catch2/catch.hpp>

#include "core/bytecode.h"
#include "core/varint.h"

using namespace dv::bc;

TEST_CASE("little-endian 6-bit varints round-trip", "[varint]") {
  for (uint32_t v : {0u, 1u, 63u, 64u, 4095u, 4096u, 1u << 24, (1u << 30) - 1}) {
    std::string s;
    write_le_varint(s, v);
    size_t pos = 0;
    CHECK(read_le_varint(s, pos) == v);
    CHECK(pos == s.size());
  }
  std::string s;
  write_le_varint(s, 64);
  CHECK(s == std::string("\x40\x01", 2));
  for (int32_t v : {0, 1, -1, 63, -64, 1000, -100000}) {
    std::string t;
    write_le_svarint(t, v);
    size_t pos = 0;
    CHECK(read_le_svarint(t, pos) == v);
  }
  size_t pos = 0;
  CHECK_FALSE(read_le_varint(std::string("\x40", 1), pos).has_value());  // continuation, then nothing
}

TEST_CASE("big-endian exception-table varints", "[varint]") {
  std::string s;
  write_be_varint(s, 64, true);
  CHECK(s == std::string("\xc1\x00", 2));  // start bit on the first byte only
  for (uint32_t v : {0u, 5u, 63u, 64u, 4095u, 4096u, 1u << 20, (1u << 30) - 1}) {
    std::string t;
    write_be_varint(t, v, true);
    CHECK((static_cast<uint8_t>(t[0]) & 0x80) != 0);
    for (size_t i = 1; i < t.size(); ++i) CHECK((static_cast<uint8_t>(t[i]) & 0x80) == 0);
    size_t pos = 0;
    bool start = false;
    CHECK(read_be_varint(t, pos, &start) == v);
    CHECK(start);
  }
  size_t pos = 0;
  CHECK_FALSE(read_be_varint(std::string("\xc1", 1), pos).has_value());
}

static std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

TEST_CASE("line table entry forms decode", "[linetable]") {
  // short form code 1 (col 8..), 2 units; one-line form code 11 (+1 line); no-column (code 13,
  // delta -2); long form (code 14); no location (code 15).
  std::string t = bytes({0x80 | (1 << 3) | 1, (3 << 4) | 4,      // short: col 8+3=11, end 15
                         0x80 | (11 << 3) | 0, 4, 9,              // one-line: line+1, cols 4..9
                         0x80 | (13 << 3) | 0, 5,                 // no column: svarint 5 -> -2
                         0x80 | (14 << 3) | 0, 6, 2, 0, 11,       // long: +3 lines, end +2, col None, end col 10
                         0x80 | (15 << 3) | 2});                  // no location, 3 units
  auto r = decode_linetable(t, 10, 8);
  REQUIRE(r.ok());
  const auto& e = *r;
  REQUIRE(e.size() == 5);
  CHECK(e[0].start == 0);
  CHECK(e[0].end == 2);
  CHECK(e[0].pos == Position{10, 10, 11, 15});
  CHECK(e[1].pos == Position{11, 11, 4, 9});
  CHECK(e[2].pos == Position{9, 9, kNone, kNone});
  CHECK(e[3].pos == Position{12, 14, kNone, 10});
  CHECK(e[4].pos == Position{});
  CHECK(e[4].end == 8);
  auto per_unit = positions_per_unit(e, 8);
  CHECK(per_unit[1] == Position{10, 10, 11, 15});
  CHECK(per_unit[7] == Position{});
  auto starts = line_starts(e);
  REQUIRE(starts.size() == 4);
  CHECK(starts[0] == std::pair<uint32_t, int32_t>{0, 10});
  CHECK(starts[3] == std::pair<uint32_t, int32_t>{8, 12});
}

TEST_CASE("malformed line tables are errors with offsets", "[linetable]") {
  auto no_marker = decode_linetable(bytes({0x01}), 1, 4);
  REQUIRE_FALSE(no_marker.ok());
  CHECK(no_marker.error().where == "co_linetable");
  CHECK(no_marker.error().offset == 0);
  auto truncated = decode_linetable(bytes({0x80 | (14 << 3), 2}), 1, 4);
  REQUIRE_FALSE(truncated.ok());
  CHECK(truncated.error().what.find("truncated") != std::string::npos);
  auto too_long = decode_linetable(bytes({0x80 | (15 << 3) | 7}), 1, 4);
  REQUIRE_FALSE(too_long.ok());
  CHECK(too_long.error().message().find("more code units") != std::string::npos);
}

TEST_CASE("exception table decodes and rejects bad entries", "[exctable]") {
  std::string t;
  for (uint32_t v : {1u, 3u, 10u, (2u << 1) | 1u}) write_be_varint(t, v, t.empty());
  std::string second;
  write_be_varint(second, 100, true);
  write_be_varint(second, 70, false);
  write_be_varint(second, 5, false);
  write_be_varint(second, 0, false);
  auto r = decode_exception_table(t + second, 400);
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  CHECK((*r)[0] == ExcEntry{2, 8, 20, 2, true});
  CHECK((*r)[1] == ExcEntry{200, 340, 10, 0, false});
  CHECK_FALSE(decode_exception_table(t.substr(0, 2), 400).ok());
  std::string unmarked = t;
  unmarked[0] = static_cast<char>(unmarked[0] & 0x7F);
  CHECK(decode_exception_table(unmarked, 400).error().what.find("marker") != std::string::npos);
  CHECK(decode_exception_table(t, 10).error().what.find("past the end") != std::string::npos);
  CHECK(decode_exception_table(second + t, 400).error().what.find("overlap") != std::string::npos);
}
