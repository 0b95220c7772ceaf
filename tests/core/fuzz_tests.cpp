// Bounded random-input fuzz of every decoding entry point (fixed seed: deterministic). Any input
// must give a value or an Error with a message -- never a crash, hang or out-of-bounds access
// (run under `make sanitize` for the memory checks).
#include <catch2/catch.hpp>
#include <random>

#include "core/assembler.h"
#include "core/code_json.h"
#include "core/opcodes.h"

using namespace dv::bc;

TEST_CASE("random bytes never crash the decoder", "[fuzz]") {
  std::mt19937 rng(20261122);
  auto rnd = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
    return s;
  };
  // A valid seed code object to mutate: def f(x): return x + 1
  const std::string seed_code("\x97\x00\x7c\x00\x64\x01\x7a\x00\x00\x00\x53\x00", 12);
  CodeInfo co;
  co.localsplusnames = {"x"};
  co.const_reprs = {"None", "1"};
  co.const_code = {-1, -1};
  co.names = {"a"};
  int ok = 0, errors = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string c = (iter % 2) ? rnd(rng() % 200) : seed_code;
    if (iter % 2 == 0)
      for (int k = 0, n = 1 + rng() % 4; k < n && !c.empty(); ++k) c[rng() % c.size()] = static_cast<char>(rng());
    std::string lt = rnd(rng() % 24), et = rnd(rng() % 12);
    if (iter % 3 == 0) lt.clear();
    if (iter % 5 != 0) et.clear();
    auto d = decode(c, lt, et, static_cast<int>(rng() % 100));
    if (!d.ok()) {
      CHECK_FALSE(d.error().message().empty());
      ++errors;
      continue;
    }
    ++ok;
    for (const Instr& in : d->instrs) {
      REQUIRE(in.offset < c.size());
      if (in.jump_target >= 0) REQUIRE(d->instrs.end() != std::find_if(d->instrs.begin(), d->instrs.end(),
                                                                        [&](const Instr& x) { return x.offset == static_cast<uint32_t>(in.jump_target); }));
    }
    co.code = c;
    co.linetable = lt;
    co.exceptiontable = et;
    auto ops = check_operands(co, *d);
    auto text = disassemble(co);
    CHECK(text.ok() == ops.ok());
    auto in = to_asm_input(*d, 1);
    if (in.ok()) {
      auto out = assemble(*in);
      if (!out.ok()) CHECK_FALSE(out.error().message().empty());
    }
  }
  CHECK(ok > 1000);
  CHECK(errors > 1000);
}

TEST_CASE("random tables and JSON never crash their readers", "[fuzz]") {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s(rng() % 40, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    auto l = decode_linetable(s, 1, rng() % 64);
    if (!l.ok()) CHECK(l.error().where == "co_linetable");
    auto e = decode_exception_table(s, rng() % 512);
    if (!e.ok()) CHECK(e.error().where == "co_exceptiontable");
  }
  const std::string good = R"({"name":"f","code":"97007c0064017a0000005300","const_reprs":["None","1"],"localsplusnames":["x"]})";
  for (int iter = 0; iter < 5000; ++iter) {
    std::string j = good;
    for (int k = 0, n = 1 + rng() % 3; k < n; ++k) j[rng() % j.size()] = static_cast<char>(32 + rng() % 95);
    auto r = code_from_json(j);
    if (r.ok()) {
      auto t = disassemble(*r);
      if (!t.ok()) CHECK_FALSE(t.error().message().empty());
    } else {
      CHECK_FALSE(r.error().message().empty());
    }
  }
}
