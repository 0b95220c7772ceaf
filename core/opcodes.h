// The CPython opcode tables (3.11, 3.12, 3.13): names, numbers, inline caches, operand kinds, stack
// effects. All facts come from core/opcode_table_3XX.inc, each generated from its own interpreter by
// core/tools/gen_opcode_table.py; everything else in dynview reads them through this header.
// Two views: the 3.11 one (enum Op, op_info(op), ...: the engine's numbering today) and the
// version-parametrised one (op_info(op, v), ..., and the version-neutral Name enum shared by all).
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
#undef DV_HAVE_ARGUMENT
#undef DV_PYTHON_VERSION_HEX
#undef DV_EXTENDED_ARG_OP

// The CPython version whose bytecode a code object holds. Code recorded before versions existed
// (code JSON without "version", traces of format 3.0) is 3.11.
enum class Version : uint8_t { py311 = 0, py312 = 1, py313 = 2 };
constexpr int kVersionCount = 3;
constexpr Version kAllVersions[] = {Version::py311, Version::py312, Version::py313};
std::string_view version_str(Version v);                       // "3.12"
std::optional<Version> version_from_str(std::string_view s);   // "3.12" or "312"
std::optional<Version> version_from_minor(int major, int minor);

// Opcode names of every version, once (core/opcode_names.inc): handlers and tools written against
// a Name work on every version; each version maps it to its own number (or has no such opcode).
enum class Name : uint16_t {
#define DV_NAME(n) n,
#include "opcode_names.inc"
#undef DV_NAME
  kNone_,  // no opcode (unused numbers)
};
constexpr int kNameCount = static_cast<int>(Name::kNone_);
std::string_view name_str(Name n);
std::optional<Name> name_by_str(std::string_view s);

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
  Name id = Name::kNone_;  // version-neutral name
};

// One version's table: every opcode number, the number of each Name, the oparg tables.
struct NamedOp { const char* name; const char* symbol; };
struct OpTable {
  Version version;
  uint32_t python_version_hex;  // of the interpreter that generated it
  uint8_t have_argument, extended_arg;
  std::array<OpInfo, 256> ops;
  std::array<int16_t, kNameCount> number;  // Name -> opcode number, -1 if this version has none
  const NamedOp* binops; int n_binops;
  const char* const* cmpops; int n_cmpops;
  const char* const* intrinsic1; int n_intrinsic1;  // CALL_INTRINSIC_1 (none on 3.11)
  const char* const* intrinsic2; int n_intrinsic2;
};
const OpTable& op_table(Version v);

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

// ---- the same questions for any version ----
inline const OpInfo& op_info(uint8_t op, Version v) { return op_table(v).ops[op]; }
inline bool is_valid_opcode(uint8_t op, Version v) { return op_info(op, v).name && !op_info(op, v).specialized; }
inline bool has_flag(uint8_t op, OpFlag f, Version v) { return (op_info(op, v).flags & f) != 0; }
inline bool has_arg(uint8_t op, Version v) { return has_flag(op, F_ARG, v); }
inline bool is_jump(uint8_t op, Version v) { return has_flag(op, F_JREL, v) || has_flag(op, F_JABS, v); }
inline Name name_of(uint8_t op, Version v) { return op_info(op, v).id; }  // of the number itself
inline Name base_name_of(uint8_t op, Version v) { return op_info(op_info(op, v).deopt, v).id; }
std::optional<uint8_t> opcode_of(Name n, Version v);
std::string_view op_name(uint8_t op, Version v);
std::optional<uint8_t> op_by_name(std::string_view name, Version v);
std::optional<int> stack_effect(uint8_t op, int arg, bool jump, Version v);
std::optional<uint8_t> jump_other_direction(uint8_t op, Version v);
std::optional<std::string_view> binary_op_symbol(int arg, Version v);
std::optional<std::string_view> compare_op_symbol(int arg, Version v);  // index into cmp_op
std::optional<std::string_view> intrinsic_name(int which, int arg, Version v);  // which = 1 or 2

}  // namespace dv::bc
