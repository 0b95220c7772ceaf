// The dis.dis text listing (Lib/dis.py 3.11: Instruction._disassemble, _disassemble_bytes,
// _disassemble_recursive), produced from a CodeInfo so it also works on recorded traces.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "bytecode.h"
#include "opcodes.h"

namespace dv::bc {
namespace {
void append_int(std::string& out, long v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}
}  // namespace


void append_argrepr(std::string& out, const CodeInfo& co, const Instr& ins) {
  const uint8_t base = op_info(ins.opcode).deopt;
  if (ins.arg == kNone) return;
  const int64_t a = ins.arg;
  auto at = [](const std::vector<std::string>& v, int64_t i) -> const std::string* {
    return (i >= 0 && i < static_cast<int64_t>(v.size())) ? &v[i] : nullptr;
  };
  const uint16_t f = op_info(base).flags;
  if (f & F_CONST) {
    if (base == LOAD_CONST)
      if (auto* r = at(co.const_reprs, a)) out += *r;
    return;
  }
  if (f & F_NAME) {
    const std::string* n = at(co.names, base == LOAD_GLOBAL ? a >> 1 : a);
    if (!n) return;
    if (base == LOAD_GLOBAL && (a & 1) && !n->empty()) out += "NULL + ";
    out += *n;
    return;
  }
  if (f & (F_JREL | F_JABS)) {
    out += "to ";
    append_int(out, ins.jump_target);
    return;
  }
  if (f & (F_LOCAL | F_FREE)) {
    if (auto* n = at(co.localsplusnames, a)) out += *n;
    return;
  }
  if (f & F_COMPARE) {
    out += compare_op_symbol(ins.arg).value_or("");
    return;
  }
  if (base == FORMAT_VALUE) {
    static const char* conv[] = {"", "str", "repr", "ascii"};
    out += conv[a & 3];
    if (a & 4) out += (a & 3) ? ", with format" : "with format";
    return;
  }
  if (base == MAKE_FUNCTION) {
    static const char* flags[] = {"defaults", "kwdefaults", "annotations", "closure"};
    bool first = true;
    for (int i = 0; i < 4; ++i) {
      if (!(a & (1 << i))) continue;
      if (!first) out += ", ";
      out += flags[i];
      first = false;
    }
    return;
  }
  if (base == BINARY_OP) out += binary_op_symbol(ins.arg).value_or("");
}

std::string argrepr(const CodeInfo& co, const Instr& ins) {
  std::string r;
  append_argrepr(r, co, ins);
  return r;
}

namespace {

char* fill(char* p, size_t n) {
  std::memset(p, ' ', n);
  return p + n;
}

// repr(v).rjust(width) written at p; returns the end. Widths are bounded (<= 11 digits).
char* write_rjust(char* p, long v, size_t width) {
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  const size_t n = static_cast<size_t>(r.ptr - tmp);
  if (n < width) p = fill(p, width - n);
  std::memcpy(p, tmp, n);
  return p + n;
}

Result<bool> disassemble_one(const CodeInfo& co, const DisOptions& opts, std::string& out) {
  auto d = decode(co);
  if (!d) return d.error();
  auto ok = check_operands(co, *d);
  if (!ok) return ok.error();

  int32_t maxline = kNone;
  bool show_lineno = false;
  for (const Instr& ins : d->instrs) {
    if (ins.starts_line == kNone) continue;
    show_lineno = true;
    maxline = std::max(maxline, ins.starts_line);
  }
  size_t lineno_width = 0;
  if (show_lineno) lineno_width = maxline >= 1000 ? std::to_string(maxline).size() : 3;
  const long maxoffset = static_cast<long>(co.code.size()) - 2;
  const size_t offset_width = maxoffset >= 10000 ? std::to_string(maxoffset).size() : 4;

  char buf[128];  // the fixed-width columns of one line, written in place
  for (const Instr& ins : d->instrs) {
    if (show_lineno && ins.starts_line != kNone && ins.offset > 0) out += '\n';
    char* p = buf;
    if (lineno_width) {
      if (ins.starts_line != kNone) p = write_rjust(p, ins.starts_line, lineno_width);
      else p = fill(p, lineno_width);
      *p++ = ' ';
    }
    std::memcpy(p, static_cast<int32_t>(ins.offset) == opts.lasti ? "-->" : "   ", 3);
    std::memcpy(p + 3, (ins.is_jump_target || ins.is_exc_target) ? " >> " : "    ", 4);
    p = write_rjust(p + 7, ins.offset, offset_width);
    *p++ = ' ';
    const std::string_view name = op_name(ins.opcode);
    std::memcpy(p, name.data(), name.size());
    p += name.size();
    if (name.size() < 20) p = fill(p, 20 - name.size());
    if (ins.arg == kNone) {
      while (p > buf && p[-1] == ' ') --p;  // str.rstrip()
      out.append(buf, p);
      out += '\n';
      continue;
    }
    *p++ = ' ';
    p = write_rjust(p, ins.arg, 5);
    out.append(buf, p);
    const size_t before = out.size();
    out += " (";
    append_argrepr(out, co, ins);
    if (out.size() == before + 2) out.resize(before);
    else out += ')';
    out += '\n';
  }
  if (!d->exceptions.empty()) {
    out += "ExceptionTable:\n";
    for (const ExcEntry& e : d->exceptions) {
      out += "  " + std::to_string(e.start) + " to " + std::to_string(static_cast<long>(e.end) - 2) +
             " -> " + std::to_string(e.target) + " [" + std::to_string(e.depth) + "]" +
             (e.lasti ? " lasti" : "") + "\n";
    }
  }
  if (opts.recursive) {
    for (size_t i = 0; i < co.const_code.size(); ++i) {
      int32_t k = co.const_code[i];
      if (k < 0 || k >= static_cast<int32_t>(co.nested.size()) || !co.nested[k]) continue;
      out += "\nDisassembly of " + co.nested[k]->repr + ":\n";
      auto r = disassemble_one(*co.nested[k], DisOptions{true, -1}, out);
      if (!r) return r.error();
    }
  }
  return true;
}

}  // namespace

Result<bool> disassemble_into(const CodeInfo& co, const DisOptions& opts, std::string& out) {
  out.reserve(out.size() + co.code.size() * 16);
  return disassemble_one(co, opts, out);
}

Result<std::string> disassemble(const CodeInfo& co, const DisOptions& opts) {
  std::string out;
  auto r = disassemble_into(co, opts, out);
  if (!r) return r.error();
  return out;
}

}  // namespace dv::bc
