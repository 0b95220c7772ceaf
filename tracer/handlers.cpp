// The opcode dispatch table: version-neutral opcode name -> handler (handlers_*.cpp, one file per family).
#include <array>

#include "handlers_common.h"

namespace dv {

Handler handler_for(bc::Name name) {
  static const std::array<Handler, bc::kNameCount + 1> table = [] {
    std::array<Handler, bc::kNameCount + 1> h{};
    using enum bc::Name;
    auto i = [](bc::Name n) { return static_cast<size_t>(n); };
    h[i(NOP)] = op_NOP; h[i(RESUME)] = op_NOP; h[i(PRECALL)] = op_PRECALL; h[i(CACHE)] = op_NOP; h[i(EXTENDED_ARG)] = op_NOP;
    h[i(LOAD_FAST)] = op_LOAD_FAST; h[i(STORE_FAST)] = op_STORE_FAST; h[i(DELETE_FAST)] = op_DELETE_FAST;
    h[i(LOAD_CONST)] = op_LOAD_CONST; h[i(LOAD_GLOBAL)] = op_LOAD_GLOBAL; h[i(LOAD_ATTR)] = op_LOAD_ATTR;
    h[i(LOAD_METHOD)] = op_LOAD_METHOD; h[i(STORE_ATTR)] = op_STORE_ATTR; h[i(DELETE_ATTR)] = op_DELETE_ATTR;
    h[i(STORE_GLOBAL)] = op_STORE_GLOBAL;
    h[i(POP_TOP)] = op_POP_TOP; h[i(PUSH_NULL)] = op_PUSH_NULL; h[i(COPY)] = op_COPY; h[i(SWAP)] = op_SWAP;
    h[i(KW_NAMES)] = op_KW_NAMES; h[i(CALL)] = op_CALL; h[i(CALL_FUNCTION_EX)] = op_CALL_FUNCTION_EX;
    h[i(BINARY_OP)] = op_BINARY_OP; h[i(COMPARE_OP)] = op_COMPARE_OP; h[i(IS_OP)] = op_IS_OP; h[i(CONTAINS_OP)] = op_CONTAINS_OP;
    h[i(UNARY_NEGATIVE)] = op_UNARY_NEGATIVE; h[i(UNARY_POSITIVE)] = op_UNARY_POSITIVE; h[i(UNARY_INVERT)] = op_UNARY_INVERT;
    h[i(UNARY_NOT)] = op_UNARY_NOT; h[i(BINARY_SUBSCR)] = op_BINARY_SUBSCR; h[i(STORE_SUBSCR)] = op_STORE_SUBSCR; h[i(DELETE_SUBSCR)] = op_DELETE_SUBSCR;
    h[i(BUILD_SLICE)] = op_BUILD_SLICE; h[i(BUILD_TUPLE)] = op_BUILD_TUPLE; h[i(BUILD_LIST)] = op_BUILD_LIST;
    h[i(BUILD_MAP)] = op_BUILD_MAP; h[i(BUILD_SET)] = op_BUILD_SET; h[i(SET_ADD)] = op_SET_ADD; h[i(SET_UPDATE)] = op_SET_UPDATE; h[i(BUILD_CONST_KEY_MAP)] = op_BUILD_CONST_KEY_MAP; h[i(LIST_APPEND)] = op_LIST_APPEND; h[i(MAP_ADD)] = op_MAP_ADD;
    h[i(LIST_EXTEND)] = op_LIST_EXTEND; h[i(LIST_TO_TUPLE)] = op_LIST_TO_TUPLE; h[i(DICT_UPDATE)] = op_DICT_UPDATE;
    h[i(DICT_MERGE)] = op_DICT_MERGE; h[i(UNPACK_SEQUENCE)] = op_UNPACK_SEQUENCE; h[i(UNPACK_EX)] = op_UNPACK_EX;
    h[i(MATCH_SEQUENCE)] = op_MATCH_SEQUENCE; h[i(MATCH_MAPPING)] = op_MATCH_MAPPING; h[i(GET_LEN)] = op_GET_LEN;
    h[i(MATCH_KEYS)] = op_MATCH_KEYS; h[i(MATCH_CLASS)] = op_MATCH_CLASS;
    h[i(FORMAT_VALUE)] = op_FORMAT_VALUE; h[i(BUILD_STRING)] = op_BUILD_STRING;
    h[i(JUMP_FORWARD)] = op_JUMP; h[i(JUMP_BACKWARD)] = op_JUMP; h[i(JUMP_BACKWARD_NO_INTERRUPT)] = op_JUMP;
    h[i(POP_JUMP_FORWARD_IF_TRUE)] = op_POP_JUMP_IF_TRUE; h[i(POP_JUMP_BACKWARD_IF_TRUE)] = op_POP_JUMP_IF_TRUE;
    h[i(POP_JUMP_FORWARD_IF_FALSE)] = op_POP_JUMP_IF_FALSE; h[i(POP_JUMP_BACKWARD_IF_FALSE)] = op_POP_JUMP_IF_FALSE;
    h[i(POP_JUMP_FORWARD_IF_NONE)] = op_POP_JUMP_IF_NONE; h[i(POP_JUMP_BACKWARD_IF_NONE)] = op_POP_JUMP_IF_NONE;
    h[i(POP_JUMP_FORWARD_IF_NOT_NONE)] = op_POP_JUMP_IF_NOT_NONE; h[i(POP_JUMP_BACKWARD_IF_NOT_NONE)] = op_POP_JUMP_IF_NOT_NONE;
    h[i(JUMP_IF_TRUE_OR_POP)] = op_JUMP_IF_TRUE_OR_POP; h[i(JUMP_IF_FALSE_OR_POP)] = op_JUMP_IF_FALSE_OR_POP;
    h[i(GET_ITER)] = op_GET_ITER; h[i(FOR_ITER)] = op_FOR_ITER; h[i(RETURN_VALUE)] = op_RETURN_VALUE;
    h[i(RAISE_VARARGS)] = op_RAISE_VARARGS; h[i(LOAD_ASSERTION_ERROR)] = op_LOAD_ASSERTION_ERROR;
    h[i(LOAD_BUILD_CLASS)] = op_LOAD_BUILD_CLASS;
    h[i(PUSH_EXC_INFO)] = op_PUSH_EXC_INFO; h[i(POP_EXCEPT)] = op_POP_EXCEPT; h[i(CHECK_EXC_MATCH)] = op_CHECK_EXC_MATCH; h[i(RERAISE)] = op_RERAISE; h[i(WITH_EXCEPT_START)] = op_WITH_EXCEPT_START; h[i(IMPORT_NAME)] = op_IMPORT_NAME; h[i(IMPORT_FROM)] = op_IMPORT_FROM;
    h[i(MAKE_CELL)] = op_MAKE_CELL; h[i(COPY_FREE_VARS)] = op_COPY_FREE_VARS; h[i(LOAD_CLOSURE)] = op_LOAD_CLOSURE;
    h[i(LOAD_DEREF)] = op_LOAD_DEREF; h[i(STORE_DEREF)] = op_STORE_DEREF; h[i(MAKE_FUNCTION)] = op_MAKE_FUNCTION;
    h[i(BEFORE_WITH)] = op_BEFORE_WITH;
    h[i(RETURN_GENERATOR)] = op_RETURN_GENERATOR; h[i(YIELD_VALUE)] = op_YIELD_VALUE;
    // 3.12 and 3.13 (LOAD_FAST_CHECK loads a local that may be unbound: the same check)
    h[i(LOAD_FAST_CHECK)] = op_LOAD_FAST; h[i(LOAD_FAST_AND_CLEAR)] = op_LOAD_FAST_AND_CLEAR;
    h[i(LOAD_FAST_LOAD_FAST)] = op_LOAD_FAST_LOAD_FAST; h[i(STORE_FAST_STORE_FAST)] = op_STORE_FAST_STORE_FAST;
    h[i(STORE_FAST_LOAD_FAST)] = op_STORE_FAST_LOAD_FAST; h[i(LOAD_SUPER_ATTR)] = op_LOAD_SUPER_ATTR;
    h[i(SET_FUNCTION_ATTRIBUTE)] = op_SET_FUNCTION_ATTRIBUTE; h[i(CALL_KW)] = op_CALL_KW;
    h[i(CALL_INTRINSIC_1)] = op_CALL_INTRINSIC_1; h[i(BINARY_SLICE)] = op_BINARY_SLICE; h[i(STORE_SLICE)] = op_STORE_SLICE;
    h[i(TO_BOOL)] = op_TO_BOOL; h[i(CONVERT_VALUE)] = op_CONVERT_VALUE; h[i(FORMAT_SIMPLE)] = op_FORMAT_SIMPLE;
    h[i(FORMAT_WITH_SPEC)] = op_FORMAT_WITH_SPEC; h[i(RETURN_CONST)] = op_RETURN_CONST;
    h[i(END_FOR)] = op_END_FOR; h[i(END_SEND)] = op_END_SEND;
    h[i(GET_YIELD_FROM_ITER)] = op_GET_YIELD_FROM_ITER; h[i(SEND)] = op_SEND;
    h[i(POP_JUMP_IF_TRUE)] = op_POP_JUMP_IF_TRUE; h[i(POP_JUMP_IF_FALSE)] = op_POP_JUMP_IF_FALSE;
    h[i(POP_JUMP_IF_NONE)] = op_POP_JUMP_IF_NONE; h[i(POP_JUMP_IF_NOT_NONE)] = op_POP_JUMP_IF_NOT_NONE;
    return h;
  }();
  return table[static_cast<size_t>(name)];
}

}  // namespace dv
