// Shared by the opcode handler files (handlers_*.cpp): stack helpers and the handler declarations.
#pragma once
#include "core/opcodes.h"
#include "pycache.h"
#include "translator.h"

namespace dv {

using Status = Translator::Status;
using bc::Instr;

inline VPtr pop(Frame& f) {
  VPtr v = std::move(f.stack.back());
  f.stack.pop_back();
  return v;
}
inline VPtr& top(Frame& f, size_t k = 1) { return f.stack[f.stack.size() - k]; }
inline PyCodeObject* code_of(const Frame& f) { return reinterpret_cast<PyCodeObject*>(f.facts->code.get()); }
inline std::string name_at(const Frame& f, int i) { return str_of(PyTuple_GET_ITEM(code_of(f)->co_names, i)); }
inline std::string local_name(const Frame& f, int i) {
  return str_of(PyTuple_GET_ITEM(code_of(f)->co_localsplusnames, i));
}
inline void jump_to(Frame& f, const Instr& in) { f.ip = f.facts->index_of.at(static_cast<uint32_t>(in.jump_target)); }
// The bytecode version of the frame's code (calling conventions differ: see op_CALL).
inline bc::Version version_of(const Frame& f) { return f.facts->decoded.version; }
inline bool null_after_callable(const Frame& f) { return version_of(f) >= bc::Version::py313; }
// A (callable, self) pair as a method load leaves it: 3.11/3.12 [NULL, callable], 3.13 [callable, NULL].
inline void push_with_null(Translator& t, Frame& f, VPtr callable) {
  if (!null_after_callable(f)) f.stack.push_back(t.make(VK::Null));
  f.stack.push_back(std::move(callable));
  if (null_after_callable(f)) f.stack.push_back(t.make(VK::Null));
}

#define NEED(n) \
  if (f.stack.size() < (n)) return t.brk(f, "DV0019", "stack underflow (dynview bug)");

Status op_NOP(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_FAST(Translator& t, Frame& f, const Instr& in);
Status op_STORE_FAST(Translator& t, Frame& f, const Instr& in);
Status op_DELETE_FAST(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_CONST(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_GLOBAL(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_ATTR(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_METHOD(Translator& t, Frame& f, const Instr& in);
Status op_STORE_ATTR(Translator& t, Frame& f, const Instr& in);
Status op_DELETE_ATTR(Translator& t, Frame& f, const Instr& in);
Status op_STORE_GLOBAL(Translator& t, Frame& f, const Instr& in);
Status op_MAKE_CELL(Translator& t, Frame& f, const Instr& in);
Status op_COPY_FREE_VARS(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_CLOSURE(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_DEREF(Translator& t, Frame& f, const Instr& in);
Status op_STORE_DEREF(Translator& t, Frame& f, const Instr& in);
Status op_MAKE_FUNCTION(Translator& t, Frame& f, const Instr& in);
Status op_POP_TOP(Translator& t, Frame& f, const Instr& in);
Status op_PUSH_NULL(Translator& t, Frame& f, const Instr& in);
Status op_COPY(Translator& t, Frame& f, const Instr& in);
Status op_SWAP(Translator& t, Frame& f, const Instr& in);
Status op_KW_NAMES(Translator& t, Frame& f, const Instr& in);
Status op_PRECALL(Translator& t, Frame& f, const Instr& in);
Status op_CALL(Translator& t, Frame& f, const Instr& in);
Status op_CALL_FUNCTION_EX(Translator& t, Frame& f, const Instr& in);
Status op_BINARY_OP(Translator& t, Frame& f, const Instr& in);
Status op_COMPARE_OP(Translator& t, Frame& f, const Instr& in);
Status op_IS_OP(Translator& t, Frame& f, const Instr& in);
Status op_CONTAINS_OP(Translator& t, Frame& f, const Instr& in);
Status op_UNARY_NEGATIVE(Translator& t, Frame& f, const Instr& in);
Status op_UNARY_POSITIVE(Translator& t, Frame& f, const Instr& in);
Status op_UNARY_INVERT(Translator& t, Frame& f, const Instr& in);
Status op_UNARY_NOT(Translator& t, Frame& f, const Instr& in);
Status op_BINARY_SUBSCR(Translator& t, Frame& f, const Instr& in);
Status op_STORE_SUBSCR(Translator& t, Frame& f, const Instr& in);
Status op_IMPORT_FROM(Translator& t, Frame& f, const Instr& in);
Status op_DELETE_SUBSCR(Translator& t, Frame& f, const Instr& in);
Status op_BUILD_SET(Translator& t, Frame& f, const Instr& in);
Status op_SET_ADD(Translator& t, Frame& f, const Instr& in);
Status op_SET_UPDATE(Translator& t, Frame& f, const Instr& in);
Status op_BUILD_SLICE(Translator& t, Frame& f, const Instr& in);
Status op_BUILD_TUPLE(Translator& t, Frame& f, const Instr& in);
Status op_BUILD_LIST(Translator& t, Frame& f, const Instr& in);
Status op_BUILD_MAP(Translator& t, Frame& f, const Instr& in);
Status op_BUILD_CONST_KEY_MAP(Translator& t, Frame& f, const Instr& in);
Status op_LIST_APPEND(Translator& t, Frame& f, const Instr& in);
Status op_MAP_ADD(Translator& t, Frame& f, const Instr& in);
Status op_LIST_EXTEND(Translator& t, Frame& f, const Instr& in);
Status op_LIST_TO_TUPLE(Translator& t, Frame& f, const Instr& in);
Status op_MATCH_SEQUENCE(Translator& t, Frame& f, const Instr& in);
Status op_MATCH_MAPPING(Translator& t, Frame& f, const Instr& in);
Status op_GET_LEN(Translator& t, Frame& f, const Instr& in);
Status op_MATCH_KEYS(Translator& t, Frame& f, const Instr& in);
Status op_MATCH_CLASS(Translator& t, Frame& f, const Instr& in);
Status op_DICT_UPDATE(Translator& t, Frame& f, const Instr& in);
Status op_DICT_MERGE(Translator& t, Frame& f, const Instr& in);
Status op_UNPACK_SEQUENCE(Translator& t, Frame& f, const Instr& in);
Status op_UNPACK_EX(Translator& t, Frame& f, const Instr& in);
Status op_FORMAT_VALUE(Translator& t, Frame& f, const Instr& in);
Status op_BUILD_STRING(Translator& t, Frame& f, const Instr& in);
Status op_JUMP(Translator& t, Frame& f, const Instr& in);
Status op_POP_JUMP_IF_TRUE(Translator& t, Frame& f, const Instr& in);
Status op_POP_JUMP_IF_FALSE(Translator& t, Frame& f, const Instr& in);
Status op_POP_JUMP_IF_NONE(Translator& t, Frame& f, const Instr& in);
Status op_POP_JUMP_IF_NOT_NONE(Translator& t, Frame& f, const Instr& in);
Status op_JUMP_IF_TRUE_OR_POP(Translator& t, Frame& f, const Instr& in);
Status op_JUMP_IF_FALSE_OR_POP(Translator& t, Frame& f, const Instr& in);
Status op_GET_ITER(Translator& t, Frame& f, const Instr& in);
Status op_FOR_ITER(Translator& t, Frame& f, const Instr& in);
Status op_RETURN_VALUE(Translator& t, Frame& f, const Instr& in);
Status op_RAISE_VARARGS(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_ASSERTION_ERROR(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_BUILD_CLASS(Translator& t, Frame& f, const Instr& in);
Status op_PUSH_EXC_INFO(Translator& t, Frame& f, const Instr& in);
Status op_POP_EXCEPT(Translator& t, Frame& f, const Instr& in);
Status op_CHECK_EXC_MATCH(Translator& t, Frame& f, const Instr& in);
Status op_RERAISE(Translator& t, Frame& f, const Instr& in);
Status op_WITH_EXCEPT_START(Translator& t, Frame& f, const Instr& in);
Translator::Status call_grad_exit(Translator& t, Frame& f, const VPtr& exit, VPtr& out);
Status op_IMPORT_NAME(Translator& t, Frame& f, const Instr& in);
Status op_RETURN_GENERATOR(Translator& t, Frame& f, const Instr& in);
Status op_YIELD_VALUE(Translator& t, Frame& f, const Instr& in);
Status op_BEFORE_WITH(Translator& t, Frame& f, const Instr& in);
// CPython 3.12 and 3.13
Status op_LOAD_FAST_AND_CLEAR(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_FAST_LOAD_FAST(Translator& t, Frame& f, const Instr& in);
Status op_STORE_FAST_STORE_FAST(Translator& t, Frame& f, const Instr& in);
Status op_STORE_FAST_LOAD_FAST(Translator& t, Frame& f, const Instr& in);
Status op_LOAD_SUPER_ATTR(Translator& t, Frame& f, const Instr& in);
Status op_SET_FUNCTION_ATTRIBUTE(Translator& t, Frame& f, const Instr& in);
Status op_CALL_KW(Translator& t, Frame& f, const Instr& in);
Status op_CALL_INTRINSIC_1(Translator& t, Frame& f, const Instr& in);
Status op_BINARY_SLICE(Translator& t, Frame& f, const Instr& in);
Status op_STORE_SLICE(Translator& t, Frame& f, const Instr& in);
Status op_TO_BOOL(Translator& t, Frame& f, const Instr& in);
Status op_CONVERT_VALUE(Translator& t, Frame& f, const Instr& in);
Status op_FORMAT_SIMPLE(Translator& t, Frame& f, const Instr& in);
Status op_FORMAT_WITH_SPEC(Translator& t, Frame& f, const Instr& in);
Status op_RETURN_CONST(Translator& t, Frame& f, const Instr& in);
Status op_END_FOR(Translator& t, Frame& f, const Instr& in);
Status op_END_SEND(Translator& t, Frame& f, const Instr& in);
Status op_GET_YIELD_FROM_ITER(Translator& t, Frame& f, const Instr& in);
Status op_SEND(Translator& t, Frame& f, const Instr& in);

}  // namespace dv
