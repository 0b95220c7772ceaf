// Opcode table lookups, built at compile time from core/opcode_table_3XX.inc (one OpTable per version).
#include "opcodes.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <string>

namespace dv::bc {
namespace {

#define DV_TABLE_FILE "opcode_table_311.inc"
#define DV_TABLE_NS t311
#define DV_TABLE_VERSION Version::py311
#include "opcode_build.inc"
#undef DV_TABLE_FILE
#undef DV_TABLE_NS
#undef DV_TABLE_VERSION
#define DV_TABLE_FILE "opcode_table_312.inc"
#define DV_TABLE_NS t312
#define DV_TABLE_VERSION Version::py312
#include "opcode_build.inc"
#undef DV_TABLE_FILE
#undef DV_TABLE_NS
#undef DV_TABLE_VERSION
#define DV_TABLE_FILE "opcode_table_313.inc"
#define DV_TABLE_NS t313
#define DV_TABLE_VERSION Version::py313
#include "opcode_build.inc"
#undef DV_TABLE_FILE
#undef DV_TABLE_NS
#undef DV_TABLE_VERSION

constexpr OpTable kTables[kVersionCount] = {t311::build(), t312::build(), t313::build()};

constexpr const char* kNames[] = {
#define DV_NAME(n) #n,
#include "opcode_names.inc"
#undef DV_NAME
};
static_assert(std::size(kNames) == kNameCount);



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

constexpr const NamedOp* kBinOps = t311::binops;
constexpr int kNBinOps = static_cast<int>(std::size(t311::binops));
constexpr const char* const* kCmpOps = t311::cmpops;
constexpr int kNCmpOps = static_cast<int>(std::size(t311::cmpops));

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

constinit const std::array<OpInfo, 256> kOpTable = kTables[0].ops;

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

int binary_op_count() { return kNBinOps; }
int compare_op_count() { return kNCmpOps; }

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

// ---- any version ----

const OpTable& op_table(Version v) { return kTables[static_cast<int>(v)]; }

std::string_view version_str(Version v) {
  switch (v) {
    case Version::py311: return "3.11";
    case Version::py312: return "3.12";
    case Version::py313: return "3.13";
  }
  return "?";
}

std::optional<Version> version_from_minor(int major, int minor) {
  if (major != 3) return std::nullopt;
  switch (minor) {
    case 11: return Version::py311;
    case 12: return Version::py312;
    case 13: return Version::py313;
    default: return std::nullopt;
  }
}

std::optional<Version> version_from_str(std::string_view s) {
  for (Version v : kAllVersions) {
    std::string_view d = version_str(v);
    if (s == d || (s.size() == 3 && s[0] == d[0] && s.substr(1) == d.substr(2))) return v;
  }
  return std::nullopt;
}

std::string_view name_str(Name n) {
  const int i = static_cast<int>(n);
  return i >= 0 && i < kNameCount ? std::string_view(kNames[i]) : std::string_view();
}

std::optional<Name> name_by_str(std::string_view s) {
  auto it = std::lower_bound(std::begin(kNames), std::end(kNames), s,
                             [](const char* a, std::string_view b) { return std::string_view(a) < b; });
  if (it == std::end(kNames) || s != *it) return std::nullopt;
  return static_cast<Name>(it - std::begin(kNames));
}

std::optional<uint8_t> opcode_of(Name n, Version v) {
  const int i = static_cast<int>(n);
  if (i < 0 || i >= kNameCount) return std::nullopt;
  const int16_t op = op_table(v).number[i];
  if (op < 0) return std::nullopt;
  return static_cast<uint8_t>(op);
}

std::string_view op_name(uint8_t op, Version v) {
  const OpInfo& i = op_info(op, v);
  return i.name ? std::string_view(i.name, i.name_len) : std::string_view(unnamed()[op]);
}

std::optional<uint8_t> op_by_name(std::string_view name, Version v) {
  auto n = name_by_str(name);
  return n ? opcode_of(*n, v) : std::nullopt;
}

std::optional<int> stack_effect(uint8_t op, int arg, bool jump, Version v) {
  const OpInfo& i = op_info(op, v);
  if (!i.name || i.specialized) return std::nullopt;
  return eval(jump ? i.jump_effect : i.effect, has_arg(op, v) ? arg : 0);
}

std::optional<uint8_t> jump_other_direction(uint8_t op, Version v) {
  if (v == Version::py311) return jump_other_direction(op);
  switch (name_of(op, v)) {  // 3.12+: only the unconditional jump has both directions
    case Name::JUMP_FORWARD: return opcode_of(Name::JUMP_BACKWARD, v);
    case Name::JUMP_BACKWARD: return opcode_of(Name::JUMP_FORWARD, v);
    default: return std::nullopt;
  }
}

std::optional<std::string_view> binary_op_symbol(int arg, Version v) {
  const OpTable& t = op_table(v);
  if (arg < 0 || arg >= t.n_binops) return std::nullopt;
  return t.binops[arg].symbol;
}

std::optional<std::string_view> compare_op_symbol(int arg, Version v) {
  const OpTable& t = op_table(v);
  if (arg < 0 || arg >= t.n_cmpops) return std::nullopt;
  return t.cmpops[arg];
}

std::optional<std::string_view> intrinsic_name(int which, int arg, Version v) {
  const OpTable& t = op_table(v);
  const int n = which == 1 ? t.n_intrinsic1 : t.n_intrinsic2;
  if (arg < 0 || arg >= n) return std::nullopt;
  return (which == 1 ? t.intrinsic1 : t.intrinsic2)[arg];
}

}  // namespace dv::bc
