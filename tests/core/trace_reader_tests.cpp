// .dyn writer/reader: round trip of steps, stacks, locals, values and events across chunks; a
// trace without footer (crashed writer) opens by scanning; every truncation, random byte flips
// and foreign files give a clear error or an intact prefix, never a crash.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <random>

#include "core/trace.h"

namespace fs = std::filesystem;
using namespace dv::trace;

namespace {

struct Written {
  std::vector<StepIn> steps;
  std::vector<std::vector<int32_t>> stacks;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> locals;
};

std::string tmp(const std::string& name) { return (fs::temp_directory_path() / ("dv_trace_" + std::to_string(getpid()) + "_" + name)).string(); }

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary) << b; }

// A trace of `n` steps in 3 compiles with calls 2 deep, new values, locals; `close` writes the footer.
Written write_trace(const std::string& path, int n, bool close, uint32_t chunk_steps = 16) {
  WriterOptions o;
  o.chunk_steps = chunk_steps;
  auto w = TraceWriter::create(path, {{"test", true}}, o);
  REQUIRE(w);
  Written out;
  std::mt19937 rng(7);
  int32_t next = 1;
  std::vector<std::vector<int32_t>> frames;
  uint32_t compile = 0;
  for (int i = 0; i < n; ++i) {
    if (i % 60 == 0) {
      if (i) (*w)->event({{"t", "compile_end"}, {"c", compile}}), ++compile;
      (*w)->event({{"t", "compile_start"}, {"c", compile}, {"id", std::to_string(compile) + "/0"}});
      frames.clear();
      next = 1;
    }
    bool start = frames.empty();
    if (!start && i % 9 == 0 && frames.size() < 3) start = true;
    else if (!start && i % 13 == 0 && frames.size() > 1) frames.pop_back();
    if (start) frames.emplace_back();
    auto& st = frames.back();
    if (rng() % 3 == 0 && !st.empty()) st.pop_back();
    else {
      const int32_t id = (rng() % 4 == 0 && next > 2) ? 1 + static_cast<int32_t>(rng() % (next - 1)) : next++;
      if (id == next - 1) (*w)->value({compile, id, static_cast<uint64_t>(i), "tensor", "f32[" + std::to_string(id) + "]", "Tensor", id == 1 ? "L['x']" : "", "f32", id});
      st.push_back(id);
    }
    std::vector<std::pair<int32_t, int32_t>> loc;
    if (i % 4 == 0 && !st.empty()) loc.push_back({static_cast<int32_t>(i % 3), st.back()});
    out.stacks.push_back(st);
    out.locals.push_back(loc);
    StepIn s{compile, static_cast<uint16_t>(frames.size() - 1), start, 10 + static_cast<int32_t>(frames.size()),
             static_cast<uint32_t>((i * 2) % 100), static_cast<uint8_t>(100 + i % 20), i % 5 == 0 ? INT32_MIN : i % 7, 3 + i % 11,
             nullptr, 0, nullptr, 0};
    out.steps.push_back(s);
    s.stack = out.stacks.back().data();
    s.nstack = out.stacks.back().size();
    s.locals = out.locals.back().data();
    s.nlocals = out.locals.back().size();
    (*w)->step(s);
    if (i % 25 == 24) (*w)->event({{"t", "guard"}, {"c", compile}, {"text", "g" + std::to_string(i)}, {"step", i}});
  }
  if (close) REQUIRE((*w)->close());
  else {
    REQUIRE((*w)->flush());
    const std::string bytes = slurp(path);  // what a killed writer leaves: no footer
    (*w)->close();
    spit(path, bytes);
  }
  return out;
}

// Every chunk decodes and agrees with what was written.
void check_steps(const TraceReader& r, const Written& w, uint64_t upto) {
  uint64_t seen = 0;
  for (size_t k = 0; k < r.chunks().size(); ++k) {
    auto c = r.chunk(k);
    REQUIRE(c);
    for (size_t i = 0; i < c->size(); ++i) {
      const uint64_t g = c->first_step + i;
      REQUIRE(g < w.steps.size());
      const StepIn& s = w.steps[g];
      CHECK(c->compile[i] == s.compile);
      CHECK(c->depth[i] == s.depth);
      CHECK(static_cast<bool>(c->frame_start[i]) == s.frame_start);
      CHECK(c->code[i] == s.code);
      CHECK(c->offset[i] == s.offset);
      CHECK(c->opcode[i] == s.opcode);
      CHECK(c->arg[i] == s.arg);
      CHECK(c->line[i] == s.line);
      if (i % 7 == 0 || i + 1 == c->size()) {
        auto frames = c->state_after(i);
        REQUIRE(frames.size() == static_cast<size_t>(s.depth) + 1);
        CHECK(frames.back().stack == w.stacks[g]);
        for (int32_t id : frames.back().stack) CHECK(c->values.count({s.compile, id}) == 1);  // described in-chunk
      }
      ++seen;
    }
  }
  CHECK(seen == upto);
}

}  // namespace

TEST_CASE("trace round trip across chunks, with and without footer", "[trace]") {
  for (bool close : {true, false}) {
    const std::string p = tmp(close ? "rt.dyn" : "crash.dyn");
    Written w = write_trace(p, 400, close);
    auto r = TraceReader::open(p);
    REQUIRE(r);
    CHECK((*r)->has_footer() == close);
    CHECK((*r)->problems().empty());
    CHECK((*r)->total_steps() == 400);
    CHECK((*r)->chunks().size() >= 400 / 16);
    CHECK((*r)->meta()["test"] == true);
    check_steps(**r, w, 400);
    size_t starts = 0, guards = 0;
    for (const auto& e : (*r)->events()) starts += e["t"] == "compile_start", guards += e["t"] == "guard";
    CHECK(starts == 7);
    CHECK(guards == 16);
    CHECK((*r)->chunk_of(0) == 0);
    const auto& last = (*r)->chunks()[(*r)->chunk_of(399)].h;
    CHECK((last.first_step <= 399 && 399 < last.first_step + last.nsteps));
    CHECK((*r)->chunk_of(400) == (*r)->chunks().size());
    fs::remove(p);
  }
}

TEST_CASE("trace truncated at every byte offset: an error or an intact prefix", "[trace]") {
  const std::string p = tmp("full.dyn"), q = tmp("cut.dyn");
  Written w = write_trace(p, 150, true, 32);
  const std::string bytes = slurp(p);
  size_t errors = 0, prefixes = 0;
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    spit(q, bytes.substr(0, cut));
    auto r = TraceReader::open(q);
    if (!r) {
      CHECK(!r.error().message().empty());
      ++errors;
      continue;
    }
    ++prefixes;
    CHECK(!(*r)->has_footer());
    check_steps(**r, w, (*r)->total_steps());
    // A cut inside a chunk is reported; a cut exactly between chunks is a clean prefix.
    bool boundary = false;
    for (const auto& c : (*r)->chunks()) boundary |= c.offset + 8 + kChunkHeaderBytes + c.h.events_zsize + c.h.steps_zsize == cut;
    if (!boundary && cut > 100) CHECK(!(*r)->problems().empty());
  }
  CHECK(errors > 0);
  CHECK(prefixes > bytes.size() / 2);
  fs::remove(p);
  fs::remove(q);
}

TEST_CASE("trace with random byte flips never crashes the reader", "[trace]") {
  const std::string p = tmp("flip_src.dyn"), q = tmp("flip.dyn");
  write_trace(p, 200, true, 32);
  const std::string bytes = slurp(p);
  std::mt19937 rng(42);
  int opened = 0, chunk_errors = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    std::string b = bytes;
    for (int k = 0; k < 1 + trial % 3; ++k) b[rng() % b.size()] ^= static_cast<char>(1 + rng() % 255);
    spit(q, b);
    auto r = TraceReader::open(q);
    if (!r) {
      CHECK(!r.error().message().empty());
      continue;
    }
    ++opened;
    for (size_t k = 0; k < (*r)->chunks().size(); ++k) {
      auto c = (*r)->chunk(k);
      if (!c) {
        ++chunk_errors;
        CHECK(!c.error().message().empty());
      } else if (c->size()) {
        c->state_after(c->size() - 1);
      }
    }
  }
  CHECK(opened > 0);
  (void)chunk_errors;
  fs::remove(p);
  fs::remove(q);
}

TEST_CASE("foreign and unreadable files get a message saying what is wrong", "[trace]") {
  const std::string p = tmp("bad.dyn");
  auto msg = [&](const std::string& content) {
    spit(p, content);
    auto r = TraceReader::open(p);
    REQUIRE(!r);
    return r.error().message();
  };
  CHECK_THAT(msg(""), Catch::Contains("empty file"));
  CHECK_THAT(msg("{\"traceEvents\": []}"), Catch::Contains("JSON text"));
  CHECK_THAT(msg(std::string("\x28\xb5\x2f\xfd", 4) + std::string(40, '\0')), Catch::Contains("zstd stream"));
  CHECK_THAT(msg(slurp("/bin/true")), Catch::Contains("ELF"));
  CHECK_THAT(msg("just some text that is long enough\n"), Catch::Contains("text file"));
  // a trace of a newer major version
  write_trace(p, 20, true);
  std::string b = slurp(p);
  b[16] = static_cast<char>(kMajor + 1);
  spit(p, b);
  auto r = TraceReader::open(p);
  REQUIRE(!r);
  CHECK_THAT(r.error().message(), Catch::Contains("version " + std::to_string(kMajor + 1) + "." + std::to_string(kMinor)) &&
                                        Catch::Contains("reader's " + std::to_string(kMajor) + "." + std::to_string(kMinor)) && Catch::Contains("newer"));
  // wrong magic
  b = slurp(p);
  b[9] = 'X';
  spit(p, b);
  CHECK(!TraceReader::open(p));
  // a directory
  auto d = TraceReader::open(fs::temp_directory_path().string());
  REQUIRE(!d);
  CHECK_THAT(d.error().message(), Catch::Contains("directory"));
  auto missing = TraceReader::open(tmp("missing.dyn"));
  REQUIRE(!missing);
  CHECK_THAT(missing.error().message(), Catch::Contains("cannot open"));
  fs::remove(p);
}

// Header bytes: skippable frame (8) | magic (8) | major u16 | minor u16 | meta_len u32 | meta | crc32.
static void reheader(std::string& b, uint16_t major, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());
  const size_t at = b.find(from);
  REQUIRE(at != std::string::npos);
  b.replace(at, from.size(), to);
  b[16] = static_cast<char>(major & 0xFF);
  b[17] = static_cast<char>(major >> 8);
  uint32_t hsize = 0;
  std::memcpy(&hsize, b.data() + 4, 4);
  const uint32_t crc = crc32(b.data() + 8, hsize - 4);
  std::memcpy(b.data() + 8 + hsize - 4, &crc, 4);
}

TEST_CASE("step offsets are predicted with the recording version's inline caches (format 4); 3.x with 3.11's", "[trace]") {
  using dv::bc::Name;
  using dv::bc::Version;
  // LOAD_ATTR has 4 inline caches on 3.11 and 9 on 3.12: straight-line 3.12 code after one is
  // predicted exactly only with 3.12's table.
  const std::string p = tmp("v312.dyn");
  auto w = TraceWriter::create(p, {{"opcode_table", "cpython-3.12"}});
  REQUIRE(w);
  const uint8_t load_attr = *dv::bc::opcode_of(Name::LOAD_ATTR, Version::py312), nop = *dv::bc::opcode_of(Name::NOP, Version::py312);
  std::vector<uint32_t> offs;
  uint32_t off = 0;
  (*w)->event({{"t", "compile_start"}, {"c", 0}, {"id", "0/0"}});
  for (int i = 0; i < 10; ++i) {
    const uint8_t op = i % 2 ? nop : load_attr;
    (*w)->step(StepIn{0, 0, i == 0, 1, off, op, i % 2 ? INT32_MIN : 0, 1, nullptr, 0, nullptr, 0});
    offs.push_back(off);
    off += 2 + 2 * dv::bc::op_info(op, Version::py312).caches;
  }
  REQUIRE((*w)->close());
  auto offsets = [&](const std::string& path) {
    auto r = TraceReader::open(path);
    REQUIRE(r);
    auto c = (*r)->chunk(0);
    REQUIRE(c);
    return std::make_pair((*r)->steps_version(), c->offset);
  };
  CHECK(offsets(p) == std::make_pair(Version::py312, offs));
  const std::string good = slurp(p);
  // The same bytes under a header naming 3.11 (what every 3.x reader assumed): each step after a
  // LOAD_ATTR lands 10 bytes early, and the error accumulates.
  std::string b = good;
  reheader(b, kMajor, "cpython-3.12", "cpython-3.11");
  spit(p, b);
  auto [v11, o11] = offsets(p);
  CHECK(v11 == Version::py311);
  CHECK(o11[0] == offs[0]);
  CHECK(o11[1] == offs[1] - 10);
  CHECK(o11[3] == offs[3] - 20);
  // A 3.x file reads with 3.11's caches whatever its opcode_table says.
  b = good;
  reheader(b, 3, "cpython-3.12", "cpython-3.12");
  spit(p, b);
  CHECK(offsets(p) == std::make_pair(Version::py311, o11));
  // A table this reader does not know is refused, by name; the writer refuses it too.
  b = good;
  reheader(b, kMajor, "cpython-3.12", "cpython-3.1x");
  spit(p, b);
  auto bad = TraceReader::open(p);
  REQUIRE(!bad);
  CHECK_THAT(bad.error().message(), Catch::Contains("opcode table \"cpython-3.1x\"") && Catch::Contains("does not know"));
  auto badw = TraceWriter::create(tmp("v399.dyn"), {{"opcode_table", "cpython-3.99"}});
  REQUIRE(!badw);
  CHECK_THAT(badw.error().message(), Catch::Contains("cpython-3.99"));
  fs::remove(p);
  fs::remove(tmp("v399.dyn"));
}
