// The version-parametrised bytecode layer: one Name per opcode for every version, each version's
// numbering and caches, and decode/assemble of hand-built 3.12 and 3.13 code. (The whole stdlib
// corpus of each version is checked against its own dis by tests/python/test_bytecode_corpus.py.)
#include <catch2/catch.hpp>
#include <string>

#include "core/assembler.h"
#include "core/bytecode.h"
#include "core/opcodes.h"

using namespace dv::bc;

namespace {
uint8_t op(Name n, Version v) {
  auto o = opcode_of(n, v);
  REQUIRE(o.has_value());
  return *o;
}
}  // namespace

TEST_CASE("names are shared by all versions; numbers are per version", "[versions]") {
  for (Version v : kAllVersions) {
    for (int o = 0; o < 256; ++o) {
      const OpInfo& i = op_info(static_cast<uint8_t>(o), v);
      if (!i.name) continue;
      CHECK(name_str(i.id) == i.name);
      CHECK(opcode_of(i.id, v) == static_cast<uint8_t>(o));
      CHECK(op_by_name(i.name, v) == static_cast<uint8_t>(o));
      CHECK(name_by_str(i.name) == i.id);
    }
  }
  // 3.11's numbering is the engine's enum Op, unchanged.
  CHECK(opcode_of(Name::LOAD_FAST, Version::py311) == LOAD_FAST);
  for (int o = 0; o < 256; ++o) {
    const OpInfo& a = op_info(static_cast<uint8_t>(o), Version::py311);
    const OpInfo& b = op_info(static_cast<uint8_t>(o));
    CHECK((a.name == b.name && a.caches == b.caches && a.flags == b.flags && a.deopt == b.deopt));
  }
  CHECK(op(Name::LOAD_FAST, Version::py312) == 124);
  CHECK(op(Name::LOAD_FAST, Version::py313) == 85);
  CHECK_FALSE(opcode_of(Name::PRECALL, Version::py312).has_value());
  CHECK_FALSE(opcode_of(Name::RETURN_CONST, Version::py311).has_value());
  CHECK_FALSE(opcode_of(Name::CALL_KW, Version::py312).has_value());
  CHECK(op_info(op(Name::LOAD_ATTR, Version::py312), Version::py312).caches == 9);
  CHECK(op_info(op(Name::JUMP_BACKWARD, Version::py313), Version::py313).caches == 1);
  CHECK(op_info(op(Name::POP_JUMP_IF_FALSE, Version::py312), Version::py312).caches == 0);
  CHECK(op_info(op(Name::POP_JUMP_IF_FALSE, Version::py313), Version::py313).caches == 1);
  CHECK(has_arg(op(Name::RESUME, Version::py313), Version::py313));  // below HAVE_ARGUMENT's rule
  CHECK(version_from_str("3.12") == Version::py312);
  CHECK(version_from_str("313") == Version::py313);
  CHECK_FALSE(version_from_str("3.10").has_value());
  CHECK(*intrinsic_name(1, 1, Version::py312) == "INTRINSIC_PRINT");
  CHECK_FALSE(intrinsic_name(1, 1, Version::py311).has_value());
}

TEST_CASE("3.12: jumps count from the end of the caches; LOAD_ATTR's method bit", "[versions]") {
  const Version v = Version::py312;
  // RESUME 0; LOAD_FAST 0; LOAD_ATTR (1<<1)|1 + 9 caches; FOR_ITER +1 (1 cache) -> END_FOR; JUMP_BACKWARD
  std::string code;
  auto put = [&](Name n, int arg) {
    code.push_back(static_cast<char>(op(n, v)));
    code.push_back(static_cast<char>(arg));
    code.append(2 * op_info(op(n, v), v).caches, '\0');
  };
  put(Name::RESUME, 0);
  put(Name::LOAD_FAST, 0);
  put(Name::LOAD_ATTR, 3);
  put(Name::FOR_ITER, 2);       // offset 24, caches to 28: target 28 + 2*2 = 32
  put(Name::STORE_FAST, 1);     // 28
  put(Name::JUMP_BACKWARD, 4);  // 30: target 32 - 8 = 24
  put(Name::END_FOR, 0);        // 32
  put(Name::RETURN_CONST, 0);   // 34
  auto d = decode(code, {}, {}, 1, v);
  REQUIRE(d);
  REQUIRE(d->instrs.size() == 8);
  CHECK(d->instrs[2].name == Name::LOAD_ATTR);
  CHECK(d->instrs[2].index == 1);
  CHECK(d->instrs[2].push_null);
  CHECK(d->instrs[3].jump_target == 32);
  CHECK(d->instrs[5].jump_target == 24);
  CodeInfo co;
  co.version = v;
  co.code = code;
  co.names = {"a", "items"};
  co.localsplusnames = {"x", "y"};
  co.const_reprs = {"None"};
  auto text = disassemble(co, DisOptions{false, -1});
  REQUIRE(text);
  CHECK(text->find("LOAD_ATTR                3 (NULL|self + items)") != std::string::npos);
  CHECK(text->find("FOR_ITER                 2 (to 32)") != std::string::npos);
  auto in = to_asm_input(*d, 1);
  REQUIRE(in);
  auto out = assemble(*in);
  REQUIRE(out);
  CHECK(out->code == code);
}

TEST_CASE("3.13: labels, super-instructions, COMPARE_OP's bool bit", "[versions]") {
  const Version v = Version::py313;
  std::string code;
  auto put = [&](Name n, int arg) {
    code.push_back(static_cast<char>(op(n, v)));
    code.push_back(static_cast<char>(arg));
    code.append(2 * op_info(op(n, v), v).caches, '\0');
  };
  put(Name::RESUME, 0);                 // 0
  put(Name::LOAD_FAST_LOAD_FAST, 0x01); // 2
  put(Name::COMPARE_OP, (2 << 5) | 16); // 4, 1 cache
  put(Name::POP_JUMP_IF_FALSE, 1);      // 8, 1 cache: target 12 + 2 = 14
  put(Name::RETURN_CONST, 0);           // 12
  put(Name::RETURN_CONST, 1);           // 14
  auto d = decode(code, {}, {}, 1, v);
  REQUIRE(d);
  CHECK(d->instrs[1].index == 0);
  CHECK(d->instrs[1].index2 == 1);
  CHECK(d->instrs[2].index == 2);
  CHECK(d->instrs[2].push_null);
  CHECK(d->instrs[3].jump_target == 14);
  CodeInfo co;
  co.version = v;
  co.code = code;
  co.localsplusnames = {"a", "b"};
  co.const_reprs = {"True", "False"};
  auto text = disassemble(co, DisOptions{false, -1});
  REQUIRE(text);
  CHECK(text->find("LOAD_FAST_LOAD_FAST      1 (a, b)") != std::string::npos);
  CHECK(text->find("COMPARE_OP              80 (bool(==))") != std::string::npos);
  CHECK(text->find("POP_JUMP_IF_FALSE        1 (to L1)") != std::string::npos);
  CHECK(text->find("L1:     RETURN_CONST             1 (False)") != std::string::npos);
  auto in = to_asm_input(*d, 1);
  REQUIRE(in);
  auto out = assemble(*in);
  REQUIRE(out);
  CHECK(out->code == code);
  CHECK(out->stacksize == 2);
}

TEST_CASE("call forms are the same on every version", "[versions]") {
  auto build = [](Version v, std::initializer_list<std::pair<Name, int>> seq) {
    std::string code;
    for (auto [n, arg] : seq) {
      code.push_back(static_cast<char>(op(n, v)));
      code.push_back(static_cast<char>(arg));
      code.append(2 * op_info(op(n, v), v).caches, '\0');
    }
    auto d = decode(code, {}, {}, 1, v);
    REQUIRE(d);
    return std::move(d).value();
  };
  // f(a, k=b): 3 arguments, keyword names in co_consts[2]
  auto d311 = build(Version::py311, {{Name::LOAD_FAST, 0}, {Name::KW_NAMES, 2}, {Name::PRECALL, 2}, {Name::CALL, 2}});
  auto d312 = build(Version::py312, {{Name::LOAD_FAST, 0}, {Name::KW_NAMES, 2}, {Name::CALL, 2}});
  auto d313 = build(Version::py313, {{Name::LOAD_FAST, 0}, {Name::LOAD_CONST, 2}, {Name::CALL_KW, 2}});
  for (const Decoded* d : {&d311, &d312, &d313}) {
    auto f = call_form(*d, d->instrs.size() - 1);
    REQUIRE(f);
    CHECK(f->nargs == 2);
    CHECK(f->kwnames == 2);
    CHECK(f->kwnames_on_stack == (d->version == Version::py313));
  }
  CHECK_FALSE(call_form(d311, 2).has_value());  // the PRECALL
  auto plain = build(Version::py312, {{Name::LOAD_FAST, 0}, {Name::CALL, 1}});
  CHECK(call_form(plain, 1)->kwnames == kNone);
}
