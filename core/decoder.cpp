// co_code -> instructions, as dis.get_instructions does it (Lib/dis.py, 3.11): EXTENDED_ARG is
// listed and folded into the next oparg, CACHE units are skipped, relative jumps are resolved.
#include <algorithm>

#include "bytecode.h"
#include "opcodes.h"

namespace dv::bc {

Result<Decoded> decode(std::string_view code, std::string_view linetable,
                       std::string_view exceptiontable, int firstlineno) {
  if (code.size() % 2 != 0)
    return make_error("co_code", "odd length " + std::to_string(code.size()) +
                                     ": code is a sequence of 2-byte units",
                      static_cast<long>(code.size() - 1));
  const size_t units = code.size() / 2;
  Decoded d;
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
  for (size_t u = 0; u < units;) {
    const uint8_t op = static_cast<uint8_t>(code[2 * u]);
    const uint8_t raw = static_cast<uint8_t>(code[2 * u + 1]);
    const OpInfo& info = op_info(op);
    if (!info.name)
      return make_error("co_code", "unknown opcode " + std::to_string(op), static_cast<long>(2 * u));
    const uint8_t base = info.deopt;
    Instr ins;
    ins.offset = static_cast<uint32_t>(2 * u);
    ins.opcode = op;
    ins.size_units = static_cast<uint8_t>(1 + info.caches);
    while (line_i < d.lines.size() && d.lines[line_i].end <= u) ++line_i;
    if (line_i < d.lines.size() && d.lines[line_i].start <= u) ins.pos = d.lines[line_i].pos;
    if (has_arg(base)) {
      int64_t arg = raw | ext;
      ext = base == EXTENDED_ARG ? (arg << 8) : 0;
      if (ext >= (int64_t{1} << 31)) ext -= int64_t{1} << 32;  // C int wrap, as dis does
      ins.arg = static_cast<int32_t>(arg);
    } else {
      ext = 0;
    }
    if (u + ins.size_units > units)
      return make_error("co_code", std::string("instruction ") + std::string(op_name(op)) +
                                       " is cut off: its inline caches run past the end",
                        static_cast<long>(2 * u));
    instr_at[u] = static_cast<int32_t>(d.instrs.size());
    d.instrs.push_back(ins);
    u += ins.size_units;
  }
  for (Instr& ins : d.instrs) {
    const uint8_t base = op_info(ins.opcode).deopt;
    if (!has_flag(base, F_JREL) && !has_flag(base, F_JABS)) continue;
    int64_t target = has_flag(base, F_JABS) ? int64_t{ins.arg} * 2
                     : has_flag(base, F_BACKWARD) ? int64_t{ins.offset} + 2 - int64_t{ins.arg} * 2
                                                  : int64_t{ins.offset} + 2 + int64_t{ins.arg} * 2;
    if (target < 0 || target >= static_cast<int64_t>(code.size()) || instr_at[target / 2] < 0)
      return make_error("co_code", std::string(op_name(ins.opcode)) + " jumps to " +
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
  int32_t last_line = kNone;  // dis.findlinestarts, without building the list
  for (const LineEntry& e : d.lines) {
    if (e.start == e.end || e.pos.line == kNone || e.pos.line == last_line) continue;
    last_line = e.pos.line;
    if (instr_at[e.start] >= 0) d.instrs[instr_at[e.start]].starts_line = e.pos.line;
  }
  return d;
}

Result<Decoded> decode(const CodeInfo& co) {
  return decode(co.code, co.linetable, co.exceptiontable, co.firstlineno);
}

Result<bool> check_operands(const CodeInfo& co, const Decoded& d) {
  for (const Instr& ins : d.instrs) {
    const uint8_t base = op_info(ins.opcode).deopt;
    if (!has_arg(base)) continue;
    const long at = ins.offset;
    auto bad = [&](const char* table, size_t n) {
      return make_error("co_code", std::string(op_name(ins.opcode)) + " arg " +
                                       std::to_string(ins.arg) + " is out of range for " + table +
                                       " (" + std::to_string(n) + " entries)",
                        at);
    };
    const int64_t a = ins.arg;
    if (has_flag(base, F_CONST) && (a < 0 || a >= static_cast<int64_t>(co.const_reprs.size())))
      return bad("co_consts", co.const_reprs.size());
    if (has_flag(base, F_NAME)) {
      int64_t i = base == LOAD_GLOBAL ? a >> 1 : a;
      if (i < 0 || i >= static_cast<int64_t>(co.names.size())) return bad("co_names", co.names.size());
    }
    if ((has_flag(base, F_LOCAL) || has_flag(base, F_FREE)) &&
        (a < 0 || a >= static_cast<int64_t>(co.localsplusnames.size())))
      return bad("co_localsplusnames", co.localsplusnames.size());
    if (has_flag(base, F_COMPARE) && !compare_op_symbol(ins.arg)) return bad("cmp_op", compare_op_count());
    if (base == BINARY_OP && !binary_op_symbol(ins.arg)) return bad("BINARY_OP's table", binary_op_count());
  }
  return true;
}

}  // namespace dv::bc
