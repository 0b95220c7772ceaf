// The generated opcode table: consistency and facts of CPython 3.11.
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "core/opcodes.h"

using namespace dv::bc;

TEST_CASE("opcode names are unique and round-trip", "[opcodes]") {
  std::set<std::string> names;
  int valid = 0;
  for (int op = 0; op < 256; ++op) {
    const OpInfo& i = op_info(static_cast<uint8_t>(op));
    if (!i.name) continue;
    CHECK(names.insert(i.name).second);
    CHECK(op_by_name(i.name) == static_cast<uint8_t>(op));
    CHECK(op_name(static_cast<uint8_t>(op)) == i.name);
    valid += !i.specialized;
  }
  CHECK(valid > 100);
  CHECK(op_name(255) == "<255>");
  CHECK_FALSE(op_by_name("NOT_AN_OPCODE").has_value());
}

TEST_CASE("flags agree with each other", "[opcodes]") {
  for (int op = 0; op < 256; ++op) {
    const auto o = static_cast<uint8_t>(op);
    const OpInfo& i = op_info(o);
    if (!i.name || i.specialized) continue;
    CHECK(has_flag(o, F_ARG) == (op >= kHaveArgument));
    if (has_flag(o, F_BACKWARD)) CHECK(std::string(i.name).find("JUMP_BACKWARD") != std::string::npos);
    if (has_flag(o, F_JREL)) CHECK(is_jump(o));
    if (auto other = jump_other_direction(o)) {
      CHECK(jump_other_direction(*other) == o);
      CHECK(has_flag(o, F_BACKWARD) != has_flag(*other, F_BACKWARD));
      CHECK(has_flag(o, F_COND) == has_flag(*other, F_COND));
    }
  }
  CHECK(jump_other_direction(POP_JUMP_FORWARD_IF_FALSE) == POP_JUMP_BACKWARD_IF_FALSE);
  CHECK_FALSE(jump_other_direction(FOR_ITER).has_value());
  CHECK(has_flag(RETURN_VALUE, F_NOFALL));
  CHECK_FALSE(has_flag(POP_JUMP_FORWARD_IF_TRUE, F_NOFALL));
}

TEST_CASE("inline cache sizes of CPython 3.11", "[opcodes]") {
  CHECK(op_info(LOAD_GLOBAL).caches == 5);
  CHECK(op_info(LOAD_ATTR).caches == 4);
  CHECK(op_info(CALL).caches == 4);
  CHECK(op_info(BINARY_OP).caches == 1);
  CHECK(op_info(LOAD_METHOD).caches == 10);
  CHECK(op_info(PRECALL).caches == 1);
  CHECK(op_info(NOP).caches == 0);
  for (int op = 0; op < 256; ++op) {
    const OpInfo& i = op_info(static_cast<uint8_t>(op));
    if (i.name && i.specialized) {
      CHECK(i.caches == op_info(i.deopt).caches);
      CHECK_FALSE(op_info(i.deopt).specialized);
    }
  }
}

TEST_CASE("stack effects of CPython 3.11", "[opcodes]") {
  CHECK(stack_effect(BUILD_TUPLE, 3, false) == -2);
  CHECK(stack_effect(BUILD_TUPLE, 0, false) == 1);
  CHECK(stack_effect(UNPACK_EX, 0x0102, false) == 3);
  CHECK(stack_effect(LOAD_GLOBAL, 1, false) == 2);
  CHECK(stack_effect(LOAD_GLOBAL, 2, false) == 1);
  CHECK(stack_effect(MAKE_FUNCTION, 0x0f, false) == -4);
  CHECK(stack_effect(BUILD_SLICE, 3, false) == -2);
  CHECK(stack_effect(BUILD_SLICE, 2, false) == -1);
  CHECK(stack_effect(FORMAT_VALUE, 4, false) == -1);
  CHECK(stack_effect(FORMAT_VALUE, 2, false) == 0);
  CHECK(stack_effect(CALL_FUNCTION_EX, 1, false) == -3);
  CHECK(stack_effect(FOR_ITER, 0, true) == -1);
  CHECK(stack_effect(FOR_ITER, 0, false) == 1);
  CHECK(stack_effect(PRECALL, 2, false) == -2);
  CHECK_FALSE(stack_effect(255, 0, false).has_value());
}

TEST_CASE("BINARY_OP and COMPARE_OP argument tables", "[opcodes]") {
  CHECK(binary_op_symbol(0) == "+");
  CHECK(binary_op_symbol(13) == "+=");
  CHECK(binary_op_name(4) == "NB_MATRIX_MULTIPLY");
  CHECK(compare_op_symbol(2) == "==");
  CHECK_FALSE(binary_op_symbol(26).has_value());
  CHECK_FALSE(binary_op_symbol(-1).has_value());
  CHECK_FALSE(compare_op_symbol(6).has_value());
}
