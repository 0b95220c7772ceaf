// The CPython 3.11 opcode table: names, numbers, inline caches, operand kinds, stack effects.
// All facts come from core/opcode_table_311.inc, generated from a real interpreter by
// core/tools/gen_opcode_table.py; everything else in dynview reads them through this header.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dv::bc {

enum Op : uint8_t {
#define DV_OP(name, num, ...) name = num,
#define DV_SPEC(name, num, base)
#define DV_BINOP(...)
#define DV_CMPOP(...)
#include "opcode_table_311.inc"
#undef DV_OP
#undef DV_SPEC
#undef DV_BINOP
#undef DV_CMPOP
};

constexpr int kHaveArgument = DV_HAVE_ARGUMENT;
constexpr uint32_t kPythonVersionHex = DV_PYTHON_VERSION_HEX;
constexpr const char* kOpcodeTableId = "cpython-3.11";

enum OpFlag : uint16_t {
  F_ARG = 1 << 0,       // takes an oparg (opcode >= HAVE_ARGUMENT)
  F_CONST = 1 << 1,     // oparg indexes co_consts
  F_NAME = 1 << 2,      // oparg indexes co_names (LOAD_GLOBAL: index << 1 | push_null)
  F_JREL = 1 << 3,      // relative jump
  F_JABS = 1 << 4,      // absolute jump (none on 3.11)
  F_LOCAL = 1 << 5,     // oparg indexes fast locals
  F_FREE = 1 << 6,      // oparg indexes localsplus (cells and free vars)
  F_COMPARE = 1 << 7,   // oparg indexes cmp_op
  F_BACKWARD = 1 << 8,  // jump goes backward (target = next - arg*2)
  F_COND = 1 << 9,      // conditional jump: falls through or jumps
  F_NOFALL = 1 << 10,   // control never reaches the next instruction
};

enum StackEffectKind : uint8_t {
  SE_INVALID,
  SE_LINEAR,           // c + k * arg
  SE_UNPACK_EX,        // c + (arg & 0xFF) + (arg >> 8)
  SE_LOAD_GLOBAL,      // c + (arg & 1)
  SE_MAKE_FUNCTION,    // c - popcount(arg & 0xF)
  SE_BUILD_SLICE,      // c - (arg == 3)
  SE_FORMAT_VALUE,     // c - ((arg & 4) != 0)
  SE_CALL_FUNCTION_EX, // c - (arg & 1)
};

struct StackEffect {
  StackEffectKind kind;
  int8_t c;
  int8_t k;
};

struct OpInfo {
  const char* name;     // nullptr for unused numbers
  uint8_t caches;       // inline CACHE code units after the instruction
  uint16_t flags;
  StackEffect effect;       // when not jumping (or falling through)
  StackEffect jump_effect;  // when jumping
  uint8_t deopt;        // base opcode (itself for base opcodes)
  bool specialized;     // adaptive form; never appears in co_code
  uint8_t name_len;     // strlen(name)
};

extern const std::array<OpInfo, 256> kOpTable;  // constant-initialised: no guard on access
inline const OpInfo& op_info(uint8_t op) { return kOpTable[op]; }
inline bool is_valid_opcode(uint8_t op) { return op_info(op).name && !op_info(op).specialized; }
inline bool has_arg(uint8_t op) { return op >= kHaveArgument; }
inline bool has_flag(uint8_t op, OpFlag f) { return (op_info(op).flags & f) != 0; }
inline bool is_jump(uint8_t op) { return has_flag(op, F_JREL) || has_flag(op, F_JABS); }
std::string_view op_name(uint8_t op);  // "<N>" for unused numbers
std::optional<uint8_t> op_by_name(std::string_view name);

// Stack effect like dis.stack_effect(op, arg, jump=...). nullopt for invalid opcodes.
std::optional<int> stack_effect(uint8_t op, int arg, bool jump);

// For a relative jump, the opcode with the same meaning in the other direction (nullopt if the
// family has only one direction, e.g. FOR_ITER or JUMP_BACKWARD_NO_INTERRUPT).
std::optional<uint8_t> jump_other_direction(uint8_t op);

// BINARY_OP's argument table ("+", "+=", ...) and COMPARE_OP's ("<", ...). nullopt if out of range.
std::optional<std::string_view> binary_op_symbol(int arg);
std::optional<std::string_view> binary_op_name(int arg);
std::optional<std::string_view> compare_op_symbol(int arg);
int binary_op_count();
int compare_op_count();

}  // namespace dv::bc
