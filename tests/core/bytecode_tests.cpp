// Decoder, assembler, disassembler and CodeInfo JSON on hand-built code. Reference listings were
// printed by CPython 3.11's dis for the same bytes (see the comments), not by dynview.
#include <catch2/catch.hpp>

#include "core/assembler.h"
#include "core/code_json.h"
#include "core/opcodes.h"

using namespace dv::bc;

static std::string code(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

TEST_CASE("decode skips caches and folds EXTENDED_ARG like dis", "[decoder]") {
  // RESUME 0; LOAD_FAST 0; EXTENDED_ARG 1; LOAD_CONST 2 (=258); BINARY_OP 0 + cache; RETURN_VALUE
  std::string c = code({RESUME, 0, LOAD_FAST, 0, EXTENDED_ARG, 1, LOAD_CONST, 2, BINARY_OP, 0, 0, 0, RETURN_VALUE, 0});
  auto d = decode(c, "", "", 1);
  REQUIRE(d.ok());
  const auto& in = d->instrs;
  REQUIRE(in.size() == 6);
  CHECK(in[2].opcode == EXTENDED_ARG);
  CHECK(in[2].arg == 1);
  CHECK(in[3].arg == 258);
  CHECK(in[3].offset == 6);
  CHECK(in[4].size_units == 2);
  CHECK(in[5].offset == 12);
  CHECK(in[1].arg == 0);
  CHECK(in[5].arg == kNone);  // RETURN_VALUE takes no argument
}

TEST_CASE("jumps resolve in both directions", "[decoder]") {
  // 0 NOP; 2 POP_JUMP_FORWARD_IF_FALSE 1 -> 6; 4 NOP; 6 JUMP_BACKWARD 4 -> 0
  std::string c = code({NOP, 0, POP_JUMP_FORWARD_IF_FALSE, 1, NOP, 0, JUMP_BACKWARD, 4});
  auto d = decode(c, "", "", 1);
  REQUIRE(d.ok());
  CHECK(d->instrs[1].jump_target == 6);
  CHECK(d->instrs[3].jump_target == 0);
  CHECK(d->instrs[0].is_jump_target);
  CHECK(d->instrs[3].is_jump_target);
  CHECK_FALSE(d->instrs[2].is_jump_target);
}

TEST_CASE("malformed code is an error that says where", "[decoder]") {
  auto odd = decode(code({NOP, 0, NOP}), "", "", 1);
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().what.find("odd length") != std::string::npos);
  auto unknown = decode(code({NOP, 0, 255, 0}), "", "", 1);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().offset == 2);
  auto far = decode(code({JUMP_FORWARD, 9, NOP, 0}), "", "", 1);
  REQUIRE_FALSE(far.ok());
  CHECK(far.error().message().find("not an instruction") != std::string::npos);
  // A jump into the inline cache of BINARY_OP.
  auto into_cache = decode(code({JUMP_FORWARD, 1, BINARY_OP, 0, 0, 0}), "", "", 1);
  CHECK_FALSE(into_cache.ok());
  auto cut = decode(code({NOP, 0, LOAD_GLOBAL, 0, 0, 0}), "", "", 1);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().what.find("cut off") != std::string::npos);
}

TEST_CASE("check_operands names the table and the offset", "[decoder]") {
  CodeInfo co;
  co.code = code({RESUME, 0, LOAD_CONST, 3, RETURN_VALUE, 0});
  co.const_reprs = {"None"};
  auto d = decode(co);
  REQUIRE(d.ok());
  auto r = check_operands(co, *d);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().what.find("co_consts") != std::string::npos);
  CHECK(r.error().offset == 2);
  co.code = code({RESUME, 0, COMPARE_OP, 9, 0, 0, 0, 0, RETURN_VALUE, 0});
  CHECK(check_operands(co, *decode(co)).error().what.find("cmp_op") != std::string::npos);
  co.code = code({RESUME, 0, BINARY_OP, 40, 0, 0, RETURN_VALUE, 0});
  CHECK_FALSE(check_operands(co, *decode(co)).ok());
}

static AsmInput with_nops(std::vector<AsmInstr> head, int nops, std::vector<AsmInstr> tail) {
  AsmInput in;
  in.instrs = std::move(head);
  for (int i = 0; i < nops; ++i) in.instrs.push_back({NOP, 0, {}});
  for (auto& t : tail) in.instrs.push_back(t);
  return in;
}

TEST_CASE("assembler inserts EXTENDED_ARG until offsets are stable", "[assembler]") {
  // 0 RESUME; 1 LOAD_CONST; 2 POP_JUMP_FORWARD_IF_FALSE -> 304 over 300 NOPs; 303 NOP;
  // 304 JUMP_FORWARD -> 0 (must become JUMP_BACKWARD); 305 RETURN_VALUE (unreachable)
  AsmInput in = with_nops({{RESUME, 0, {}}, {LOAD_CONST, 0, {}}, {POP_JUMP_FORWARD_IF_FALSE, 304, {}}}, 300,
                          {{NOP, 0, {}}, {JUMP_FORWARD, 0, {}}, {RETURN_VALUE, 0, {}}});
  auto out = assemble(in);
  REQUIRE(out.ok());
  auto d = decode(out->code, out->linetable, out->exceptiontable, 1);
  REQUIRE(d.ok());
  CHECK(d->instrs[2].opcode == EXTENDED_ARG);
  CHECK(d->instrs[3].opcode == POP_JUMP_FORWARD_IF_FALSE);
  CHECK(d->instrs[3].jump_target == static_cast<int32_t>(out->offsets[304]));
  const Instr& back = d->instrs[d->instrs.size() - 2];
  CHECK(back.opcode == JUMP_BACKWARD);
  CHECK(back.jump_target == 0);
  CHECK(d->instrs[d->instrs.size() - 3].opcode == EXTENDED_ARG);
  // Round trip through to_asm_input gives the same bytes.
  auto again = to_asm_input(*d, 1);
  REQUIRE(again.ok());
  auto out2 = assemble(*again);
  REQUIRE(out2.ok());
  CHECK(out2->code == out->code);
  CHECK(out2->linetable == out->linetable);
}

TEST_CASE("one-direction jumps refuse the other direction", "[assembler]") {
  AsmInput in;
  in.instrs = {{RESUME, 0, {}}, {NOP, 0, {}}, {FOR_ITER, 1, {}}, {RETURN_VALUE, 0, {}}};
  auto out = assemble(in);
  REQUIRE_FALSE(out.ok());
  CHECK(out.error().what.find("cannot jump backward") != std::string::npos);
}

TEST_CASE("nested exception ranges: the innermost wins", "[assembler]") {
  // 0 LOAD_CONST; 1..6 NOP; 7 RETURN_VALUE; 8 RETURN_VALUE (inner handler); 9 RETURN_VALUE (outer)
  AsmInput in;
  in.instrs.push_back({LOAD_CONST, 0, {}});
  for (int i = 0; i < 6; ++i) in.instrs.push_back({NOP, 0, {}});
  for (int i = 0; i < 3; ++i) in.instrs.push_back({RETURN_VALUE, 0, {}});
  in.ranges = {{1, 7, 9, 1, false}, {3, 5, 8, 2, true}};
  auto out = assemble(in);
  REQUIRE(out.ok());
  auto e = decode_exception_table(out->exceptiontable, out->code.size());
  REQUIRE(e.ok());
  REQUIRE(e->size() == 3);
  CHECK((*e)[0] == ExcEntry{2, 6, 18, 1, false});
  CHECK((*e)[1] == ExcEntry{6, 10, 16, 2, true});
  CHECK((*e)[2] == ExcEntry{10, 14, 18, 1, false});
  CHECK(out->stacksize == 4);  // inner handler entered at 2 + lasti + 1
}

TEST_CASE("line entries: long instructions split, negative deltas, no location", "[assembler]") {
  AsmInput in;
  in.firstlineno = 10;
  in.instrs = {{RESUME, 0, {10, 10, 0, 0}},
               {LOAD_FAST, 0, {20, 20, 4, 5}},
               {LOAD_METHOD, 0, {20, 20, 4, 12}},   // 11 code units: two entries
               {PRECALL, 0, {5, 5, 0, 3}},          // line goes down by 15
               {CALL, 0, {}},                       // no location
               {RETURN_VALUE, 0, {7, 9, 1, 200}}};  // multi-line, wide: long form
  auto out = assemble(in);
  REQUIRE(out.ok());
  auto lines = decode_linetable(out->linetable, 10, out->code.size() / 2);
  REQUIRE(lines.ok());
  CHECK(lines->size() == 7);
  auto per_unit = positions_per_unit(*lines, out->code.size() / 2);
  for (int u = 2; u < 13; ++u) CHECK(per_unit[u] == Position{20, 20, 4, 12});
  CHECK(per_unit[13] == Position{5, 5, 0, 3});
  CHECK(per_unit[15] == Position{});
  CHECK(per_unit.back() == Position{7, 9, 1, 200});
}

TEST_CASE("stack size follows handler edges at depth + lasti + 1", "[assembler]") {
  AsmInput in;
  in.instrs = {{NOP, 0, {}}, {LOAD_CONST, 0, {}}, {RETURN_VALUE, 0, {}},
               {PUSH_EXC_INFO, 0, {}}, {POP_TOP, 0, {}}, {POP_EXCEPT, 0, {}}, {LOAD_CONST, 0, {}},
               {RETURN_VALUE, 0, {}}};
  in.ranges = {{0, 2, 3, 0, true}};
  auto out = assemble(in);
  REQUIRE(out.ok());
  CHECK(out->stacksize == 3);  // handler entered at 0 + 1 (lasti) + 1; PUSH_EXC_INFO adds one
}

TEST_CASE("assembler rejects invalid input", "[assembler]") {
  AsmInput bad_target;
  bad_target.instrs = {{JUMP_FORWARD, 5, {}}};
  CHECK_FALSE(assemble(bad_target).ok());
  AsmInput ext;
  ext.instrs = {{EXTENDED_ARG, 1, {}}};
  CHECK_FALSE(assemble(ext).ok());
  AsmInput neg;
  neg.instrs = {{LOAD_CONST, -1, {}}};
  CHECK_FALSE(assemble(neg).ok());
  AsmInput range;
  range.instrs = {{NOP, 0, {}}};
  range.ranges = {{0, 4, 0, 0, false}};
  CHECK_FALSE(assemble(range).ok());
}

// def f(x): return x + 1     (CPython 3.11, defined at line 1 of a file)
static CodeInfo add_one() {
  CodeInfo co;
  co.name = co.qualname = "f";
  co.filename = "t.py";
  co.firstlineno = 1;
  co.code = code({RESUME, 0, LOAD_FAST, 0, LOAD_CONST, 1, BINARY_OP, 0, 0, 0, RETURN_VALUE, 0});
  co.linetable = code({0x80, 0x00, 0xd8, 0x09, 0x0a, 0x88, 0x51, 0x89, 0x15, 0x80, 0x2c});  // from CPython
  co.localsplusnames = {"x"};
  co.localspluskinds = {0x26};
  co.const_reprs = {"None", "1"};
  co.const_code = {-1, -1};
  return co;
}

TEST_CASE("listing equals dis.dis", "[disasm]") {
  // dis.dis(f) for f defined in a file t.py as above
  const std::string want =
      "  1           0 RESUME                   0\n"
      "\n"
      "  2           2 LOAD_FAST                0 (x)\n"
      "              4 LOAD_CONST               1 (1)\n"
      "              6 BINARY_OP                0 (+)\n"
      "             10 RETURN_VALUE\n";
  auto text = disassemble(add_one());
  REQUIRE(text.ok());
  CHECK(*text == want);
}

TEST_CASE("CodeInfo JSON round-trips and reports malformed input", "[json]") {
  CodeInfo co = add_one();
  auto back = code_from_json(code_to_json(co));
  REQUIRE(back.ok());
  CHECK(back->code == co.code);
  CHECK(back->linetable == co.linetable);
  CHECK(back->const_reprs == co.const_reprs);
  CHECK(*disassemble(*back) == *disassemble(co));
  CHECK(code_from_json("{not json").error().what == "not valid JSON");
  CHECK_FALSE(code_from_json("{}").ok());
  CHECK(code_from_json(R"({"name":"f","code":"zz"})").error().what.find("not hex") != std::string::npos);
  CHECK_FALSE(code_from_json(R"({"name":"f","const_reprs":["1"],"const_code":[3]})").ok());
}
