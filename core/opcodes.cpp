// Opcode table lookups, built once from core/opcode_table_311.inc.
#include "opcodes.h"

#include <array>
#include <bit>
#include <cstdio>
#include <string>

namespace dv::bc {
namespace {

constexpr std::array<OpInfo, 256> build_table() {
  std::array<OpInfo, 256> ops{};
#define DV_OP(nm, num, caches, flags, k0, c0, s0, k1, c1, s1) \
  ops[num] = OpInfo{#nm, caches, static_cast<uint16_t>(flags), {k0, c0, s0}, {k1, c1, s1}, num, false, 0};
#define DV_SPEC(nm, num, base) ops[num] = OpInfo{#nm, 0, 0, {SE_INVALID, 0, 0}, {SE_INVALID, 0, 0}, base, true, 0};
#define DV_BINOP(...)
#define DV_CMPOP(...)
#include "opcode_table_311.inc"
#undef DV_OP
#undef DV_SPEC
#undef DV_BINOP
#undef DV_CMPOP
  for (auto& o : ops) {  // specialised forms share their base's caches and flags
    if (o.name) o.name_len = static_cast<uint8_t>(std::char_traits<char>::length(o.name));
    if (o.specialized) {
      o.caches = ops[o.deopt].caches;
      o.flags = ops[o.deopt].flags;
    }
  }
  return ops;
}

constexpr std::array<OpInfo, 256> kOps = build_table();

const std::array<std::string, 256>& unnamed() {
  static const std::array<std::string, 256> names = [] {
    std::array<std::string, 256> n;
    for (int i = 0; i < 256; ++i) {
      char b[8];
      std::snprintf(b, sizeof b, "<%d>", i);
      n[i] = b;
    }
    return n;
  }();
  return names;
}

struct NamedOp { const char* name; const char* symbol; };
constexpr NamedOp kBinOps[] = {
#define DV_OP(...)
#define DV_SPEC(...)
#define DV_BINOP(i, nm, sym) {#nm, sym},
#define DV_CMPOP(...)
#include "opcode_table_311.inc"
#undef DV_OP
#undef DV_SPEC
#undef DV_BINOP
#undef DV_CMPOP
};
constexpr const char* kCmpOps[] = {
#define DV_OP(...)
#define DV_SPEC(...)
#define DV_BINOP(...)
#define DV_CMPOP(i, sym) sym,
#include "opcode_table_311.inc"
#undef DV_OP
#undef DV_SPEC
#undef DV_BINOP
#undef DV_CMPOP
};

std::optional<int> eval(StackEffect e, int arg) {
  switch (e.kind) {
    case SE_INVALID: return std::nullopt;
    case SE_LINEAR: return e.c + e.k * arg;
    case SE_UNPACK_EX: return e.c + (arg & 0xFF) + (arg >> 8);
    case SE_LOAD_GLOBAL: return e.c + (arg & 1);
    case SE_MAKE_FUNCTION: return e.c - std::popcount(static_cast<unsigned>(arg & 0xF));
    case SE_BUILD_SLICE: return e.c - (arg == 3 ? 1 : 0);
    case SE_FORMAT_VALUE: return e.c - ((arg & 4) ? 1 : 0);
    case SE_CALL_FUNCTION_EX: return e.c - (arg & 1);
  }
  return std::nullopt;
}

}  // namespace

constinit const std::array<OpInfo, 256> kOpTable = kOps;

std::string_view op_name(uint8_t op) {
  const OpInfo& i = op_info(op);
  return i.name ? std::string_view(i.name, i.name_len) : std::string_view(unnamed()[op]);
}

std::optional<uint8_t> op_by_name(std::string_view name) {
  for (int i = 0; i < 256; ++i)
    if (op_info(i).name && name == op_info(i).name) return static_cast<uint8_t>(i);
  return std::nullopt;
}

std::optional<int> stack_effect(uint8_t op, int arg, bool jump) {
  const OpInfo& i = op_info(op);
  if (!i.name || i.specialized) return std::nullopt;
  return eval(jump ? i.jump_effect : i.effect, has_arg(op) ? arg : 0);
}

std::optional<uint8_t> jump_other_direction(uint8_t op) {
  switch (op) {
    case JUMP_FORWARD: return JUMP_BACKWARD;
    case JUMP_BACKWARD: return JUMP_FORWARD;
    case POP_JUMP_FORWARD_IF_FALSE: return POP_JUMP_BACKWARD_IF_FALSE;
    case POP_JUMP_BACKWARD_IF_FALSE: return POP_JUMP_FORWARD_IF_FALSE;
    case POP_JUMP_FORWARD_IF_TRUE: return POP_JUMP_BACKWARD_IF_TRUE;
    case POP_JUMP_BACKWARD_IF_TRUE: return POP_JUMP_FORWARD_IF_TRUE;
    case POP_JUMP_FORWARD_IF_NONE: return POP_JUMP_BACKWARD_IF_NONE;
    case POP_JUMP_BACKWARD_IF_NONE: return POP_JUMP_FORWARD_IF_NONE;
    case POP_JUMP_FORWARD_IF_NOT_NONE: return POP_JUMP_BACKWARD_IF_NOT_NONE;
    case POP_JUMP_BACKWARD_IF_NOT_NONE: return POP_JUMP_FORWARD_IF_NOT_NONE;
    default: return std::nullopt;
  }
}

int binary_op_count() { return static_cast<int>(std::size(kBinOps)); }
int compare_op_count() { return static_cast<int>(std::size(kCmpOps)); }

std::optional<std::string_view> binary_op_symbol(int arg) {
  if (arg < 0 || arg >= binary_op_count()) return std::nullopt;
  return kBinOps[arg].symbol;
}
std::optional<std::string_view> binary_op_name(int arg) {
  if (arg < 0 || arg >= binary_op_count()) return std::nullopt;
  return kBinOps[arg].name;
}
std::optional<std::string_view> compare_op_symbol(int arg) {
  if (arg < 0 || arg >= compare_op_count()) return std::nullopt;
  return kCmpOps[arg];
}

}  // namespace dv::bc
