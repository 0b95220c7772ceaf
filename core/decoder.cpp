// co_code -> instructions, as dis.get_instructions does it (Lib/dis.py of 3.11, 3.12, 3.13):
// EXTENDED_ARG is listed and folded into the next oparg, CACHE units are skipped, relative jumps
// are resolved (3.12+: relative to the end of the jump's inline caches), and each instruction gets
// its version-neutral name and operands.
#include <algorithm>

#include "bytecode.h"
#include "opcodes.h"

namespace dv::bc {
namespace {

// The normalised operand of one instruction (see Instr::index).
void normalise(Instr& ins, Version v) {
  const int32_t a = ins.arg;
  switch (ins.name) {
    case Name::LOAD_GLOBAL:
      ins.index = a >> 1;
      ins.push_null = a & 1;
      return;
    case Name::LOAD_ATTR:
      if (v == Version::py311) break;
      ins.index = a >> 1;
      ins.push_null = a & 1;
      return;
    case Name::LOAD_SUPER_ATTR:
      ins.index = a >> 2;
      ins.push_null = a & 1;
      return;
    case Name::COMPARE_OP:
      if (v == Version::py311) break;
      ins.index = v == Version::py312 ? a >> 4 : a >> 5;
      ins.push_null = v == Version::py313 && (a & 16);
      return;
    case Name::LOAD_FAST_LOAD_FAST:
    case Name::STORE_FAST_LOAD_FAST:
    case Name::STORE_FAST_STORE_FAST:
      ins.index = a >> 4;
      ins.index2 = a & 15;
      return;
    default:
      break;
  }
  ins.index = a;
}

}  // namespace

Result<Decoded> decode(std::string_view code, std::string_view linetable,
                       std::string_view exceptiontable, int firstlineno, Version version) {
  if (code.size() % 2 != 0)
    return make_error("co_code", "odd length " + std::to_string(code.size()) +
                                     ": code is a sequence of 2-byte units",
                      static_cast<long>(code.size() - 1));
  const OpTable& table = op_table(version);
  const size_t units = code.size() / 2;
  Decoded d;
  d.version = version;
  auto lines = decode_linetable(linetable, firstlineno, units);
  if (!lines) return lines.error();
  d.lines = std::move(lines.value());
  auto exc = decode_exception_table(exceptiontable, code.size());
  if (!exc) return exc.error();
  d.exceptions = std::move(exc.value());

  size_t line_i = 0;  // line entry covering the current unit (entries are in unit order)
  std::vector<int32_t> instr_at(units, -1);  // unit -> index of the instruction starting there
  d.instrs.reserve(units);
  int64_t ext = 0;
  const uint8_t extended_arg = table.extended_arg;
  for (size_t u = 0; u < units;) {
    const uint8_t op = static_cast<uint8_t>(code[2 * u]);
    const uint8_t raw = static_cast<uint8_t>(code[2 * u + 1]);
    const OpInfo& info = table.ops[op];
    if (!info.name)
      return make_error("co_code", "unknown opcode " + std::to_string(op), static_cast<long>(2 * u));
    const uint8_t base = info.deopt;
    const OpInfo& binfo = table.ops[base];
    Instr ins;
    ins.offset = static_cast<uint32_t>(2 * u);
    ins.opcode = op;
    ins.name = binfo.id;
    ins.size_units = static_cast<uint8_t>(1 + info.caches);
    while (line_i < d.lines.size() && d.lines[line_i].end <= u) ++line_i;
    if (line_i < d.lines.size() && d.lines[line_i].start <= u) ins.pos = d.lines[line_i].pos;
    if (binfo.flags & F_ARG) {
      int64_t arg = raw | ext;
      ext = base == extended_arg ? (arg << 8) : 0;
      if (ext >= (int64_t{1} << 31)) ext -= int64_t{1} << 32;  // C int wrap, as dis does
      ins.arg = static_cast<int32_t>(arg);
      normalise(ins, version);
    } else {
      ext = 0;
    }
    if (u + ins.size_units > units)
      return make_error("co_code", std::string("instruction ") + std::string(op_name(op, version)) +
                                       " is cut off: its inline caches run past the end",
                        static_cast<long>(2 * u));
    instr_at[u] = static_cast<int32_t>(d.instrs.size());
    d.instrs.push_back(ins);
    u += ins.size_units;
  }
  const bool after_caches = version != Version::py311;  // 3.12+: relative to the end of the caches
  for (Instr& ins : d.instrs) {
    const OpInfo& b = table.ops[table.ops[ins.opcode].deopt];
    if (!(b.flags & (F_JREL | F_JABS))) continue;
    const int64_t next = int64_t{ins.offset} + 2 + (after_caches ? 2 * int64_t{b.caches} : 0);
    int64_t target = (b.flags & F_JABS) ? int64_t{ins.arg} * 2
                     : (b.flags & F_BACKWARD) ? next - int64_t{ins.arg} * 2
                                               : next + int64_t{ins.arg} * 2;
    if (target < 0 || target >= static_cast<int64_t>(code.size()) || instr_at[target / 2] < 0)
      return make_error("co_code", std::string(op_name(ins.opcode, version)) + " jumps to " +
                                       std::to_string(target) + ", which is not an instruction",
                        ins.offset);
    ins.jump_target = static_cast<int32_t>(target);
    d.instrs[instr_at[target / 2]].is_jump_target = true;
  }
  for (const ExcEntry& e : d.exceptions) {
    if (instr_at[e.target / 2] < 0)
      return make_error("co_exceptiontable",
                        "handler " + std::to_string(e.target) + " is not an instruction");
    if (e.end > e.start) d.instrs[instr_at[e.target / 2]].is_exc_target = true;
  }
  if (version != Version::py313) {
    int32_t last_line = kNone;  // dis.findlinestarts, without building the list
    for (const LineEntry& e : d.lines) {
      if (e.start == e.end || e.pos.line == kNone || e.pos.line == last_line) continue;
      last_line = e.pos.line;
      if (instr_at[e.start] >= 0) {
        d.instrs[instr_at[e.start]].starts_line = e.pos.line;
        d.instrs[instr_at[e.start]].line_start = true;
      }
    }
  } else {
    // 3.13 findlinestarts: every change of co_lines' line, None included, starts a line.
    bool first = true;
    int32_t last_line = kNone;
    for (const LineEntry& e : d.lines) {
      if (e.start == e.end || (!first && e.pos.line == last_line)) continue;
      first = false;
      last_line = e.pos.line;
      if (instr_at[e.start] >= 0) {
        d.instrs[instr_at[e.start]].starts_line = e.pos.line;
        d.instrs[instr_at[e.start]].line_start = true;
      }
    }
  }
  int32_t cur = kNone;  // dis's line_number: carried from the last line start
  for (Instr& ins : d.instrs) {
    if (ins.line_start) cur = ins.starts_line;
    ins.line_number = cur;
  }
  return d;
}

Result<Decoded> decode(const CodeInfo& co) {
  return decode(co.code, co.linetable, co.exceptiontable, co.firstlineno, co.version);
}

std::optional<CallForm> call_form(const Decoded& d, size_t i) {
  if (i >= d.instrs.size()) return std::nullopt;
  const Instr& call = d.instrs[i];
  if (call.name != Name::CALL && call.name != Name::CALL_KW) return std::nullopt;
  CallForm f;
  f.nargs = call.arg;
  f.kwnames_on_stack = call.name == Name::CALL_KW;
  // The instruction before, skipping this call's EXTENDED_ARGs and (3.11) its PRECALL.
  size_t j = i;
  while (j > 0 && (d.instrs[j - 1].name == Name::EXTENDED_ARG || d.instrs[j - 1].name == Name::PRECALL)) --j;
  while (j > 0 && d.instrs[j - 1].name == Name::EXTENDED_ARG) --j;
  if (j == 0) return f;
  size_t k = j - 1;  // the previous real instruction (its own EXTENDED_ARGs come before it)
  const Instr& prev = d.instrs[k];
  if (call.name == Name::CALL && prev.name == Name::KW_NAMES) f.kwnames = prev.arg;
  if (call.name == Name::CALL_KW && prev.name == Name::LOAD_CONST) f.kwnames = prev.arg;
  return f;
}

Result<bool> check_operands(const CodeInfo& co, const Decoded& d) {
  const Version v = d.version;
  for (const Instr& ins : d.instrs) {
    const uint8_t base = op_info(ins.opcode, v).deopt;
    if (!has_arg(base, v)) continue;
    const long at = ins.offset;
    auto bad = [&](const char* table, size_t n) {
      return make_error("co_code", std::string(op_name(ins.opcode, v)) + " arg " +
                                       std::to_string(ins.arg) + " is out of range for " + table +
                                       " (" + std::to_string(n) + " entries)",
                        at);
    };
    auto out = [](int64_t i, size_t n) { return i < 0 || i >= static_cast<int64_t>(n); };
    const int64_t a = ins.arg;
    const int64_t i = ins.index;
    if (has_flag(base, F_CONST, v) && out(a, co.const_reprs.size()))
      return bad("co_consts", co.const_reprs.size());
    if (has_flag(base, F_NAME, v) && out(i, co.names.size())) return bad("co_names", co.names.size());
    if (has_flag(base, F_LOCAL, v) || has_flag(base, F_FREE, v)) {
      if (out(i, co.localsplusnames.size()) || (ins.index2 != kNone && out(ins.index2, co.localsplusnames.size())))
        return bad("co_localsplusnames", co.localsplusnames.size());
    }
    if (has_flag(base, F_COMPARE, v) && !compare_op_symbol(static_cast<int>(i), v))
      return bad("cmp_op", op_table(v).n_cmpops);
    switch (ins.name) {
      case Name::BINARY_OP:
        if (!binary_op_symbol(ins.arg, v)) return bad("BINARY_OP's table", op_table(v).n_binops);
        break;
      case Name::CALL_INTRINSIC_1:
        if (!intrinsic_name(1, ins.arg, v)) return bad("CALL_INTRINSIC_1's table", op_table(v).n_intrinsic1);
        break;
      case Name::CALL_INTRINSIC_2:
        if (!intrinsic_name(2, ins.arg, v)) return bad("CALL_INTRINSIC_2's table", op_table(v).n_intrinsic2);
        break;
      case Name::CONVERT_VALUE:
        if (a < 0 || a > 3) return bad("CONVERT_VALUE's conversions", 4);
        break;
      default:
        break;
    }
  }
  return true;
}

}  // namespace dv::bc
