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


namespace {

// 3.13 label of a jump target or exception boundary (labels: sorted offsets, label = index + 1).
long label_of(const std::vector<uint32_t>& labels, uint32_t offset) {
  auto it = std::lower_bound(labels.begin(), labels.end(), offset);
  return (it != labels.end() && *it == offset) ? static_cast<long>(it - labels.begin()) + 1 : 0;
}

void append_flags(std::string& out, int64_t a) {
  static const char* flags[] = {"defaults", "kwdefaults", "annotations", "closure"};
  bool first = true;
  for (int i = 0; i < 4; ++i) {
    if (!(a & (1 << i))) continue;
    if (!first) out += ", ";
    out += flags[i];
    first = false;
  }
}

void append_argrepr(std::string& out, const CodeInfo& co, const Instr& ins,
                    const std::vector<uint32_t>* labels) {
  const Version v = co.version;
  const uint8_t base = op_info(ins.opcode, v).deopt;
  if (ins.arg == kNone) return;
  const int64_t a = ins.arg;
  auto at = [](const std::vector<std::string>& vec, int64_t i) -> const std::string* {
    return (i >= 0 && i < static_cast<int64_t>(vec.size())) ? &vec[i] : nullptr;
  };
  const uint16_t f = op_info(base, v).flags;
  const Name name = ins.name;
  if (f & F_CONST) {
    if (name == Name::LOAD_CONST || v != Version::py311)  // 3.11: KW_NAMES shows nothing
      if (auto* r = at(co.const_reprs, a)) out += *r;
    return;
  }
  if (f & F_NAME) {
    const std::string* n = at(co.names, ins.index);
    if (!n) return;
    const bool flag = ins.push_null && !n->empty() &&
                      (name == Name::LOAD_GLOBAL || (v != Version::py311 && (name == Name::LOAD_ATTR ||
                                                                              name == Name::LOAD_SUPER_ATTR)));
    const char* what = name == Name::LOAD_GLOBAL ? "NULL" : "NULL|self";
    if (flag && v != Version::py313) {
      out += what;
      out += " + ";
    }
    out += *n;
    if (flag && v == Version::py313) {
      out += " + ";
      out += what;
    }
    return;
  }
  if (f & (F_JREL | F_JABS)) {
    if (v == Version::py313) {
      out += "to L";
      append_int(out, labels ? label_of(*labels, static_cast<uint32_t>(ins.jump_target)) : 0);
    } else {
      out += "to ";
      append_int(out, ins.jump_target);
    }
    return;
  }
  if (f & (F_LOCAL | F_FREE)) {
    if (ins.index2 != kNone) {  // LOAD_FAST_LOAD_FAST & co: "a, b"
      auto* n1 = at(co.localsplusnames, ins.index);
      auto* n2 = at(co.localsplusnames, ins.index2);
      if (n1 && n2) out += *n1 + ", " + *n2;
      return;
    }
    if (auto* n = at(co.localsplusnames, a)) out += *n;
    return;
  }
  if (f & F_COMPARE) {
    auto sym = compare_op_symbol(static_cast<int>(ins.index), v).value_or("");
    if (v == Version::py313 && ins.push_null) {
      out += "bool(";
      out += sym;
      out += ')';
    } else {
      out += sym;
    }
    return;
  }
  switch (name) {
    case Name::FORMAT_VALUE: {
      static const char* conv[] = {"", "str", "repr", "ascii"};
      out += conv[a & 3];
      if (a & 4) out += (a & 3) ? ", with format" : "with format";
      return;
    }
    case Name::CONVERT_VALUE: {
      static const char* conv[] = {"", "str", "repr", "ascii"};
      if (a >= 0 && a < 4) out += conv[a];
      return;
    }
    case Name::MAKE_FUNCTION:
    case Name::SET_FUNCTION_ATTRIBUTE:
      append_flags(out, a);
      return;
    case Name::BINARY_OP:
      out += binary_op_symbol(ins.arg, v).value_or("");
      return;
    case Name::CALL_INTRINSIC_1:
      out += intrinsic_name(1, ins.arg, v).value_or("");
      return;
    case Name::CALL_INTRINSIC_2:
      out += intrinsic_name(2, ins.arg, v).value_or("");
      return;
    default:
      return;
  }
}

}  // namespace

std::vector<uint32_t> labels_313(const Decoded& d, bool with_exceptions) {
  std::vector<uint32_t> l;
  for (const Instr& ins : d.instrs)
    if (ins.jump_target >= 0) l.push_back(static_cast<uint32_t>(ins.jump_target));
  if (with_exceptions)
    for (const ExcEntry& e : d.exceptions) {
      l.push_back(e.start);
      l.push_back(e.end);
      l.push_back(e.target);
    }
  std::sort(l.begin(), l.end());
  l.erase(std::unique(l.begin(), l.end()), l.end());
  return l;
}

std::string argrepr(const CodeInfo& co, const Instr& ins, const std::vector<uint32_t>& labels) {
  std::string r;
  append_argrepr(r, co, ins, &labels);
  return r;
}

std::string argrepr(const CodeInfo& co, const Instr& ins) {
  std::string r;
  if (co.version == Version::py313 && ins.jump_target >= 0) {
    auto d = decode(co);
    if (!d) return r;
    const auto labels = labels_313(*d, false);
    append_argrepr(r, co, ins, &labels);
    return r;
  }
  append_argrepr(r, co, ins, nullptr);
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

// 3.13's Formatter: line column (with "--" for a line start without a line), label column, no
// offsets, exception table in labels.
void listing_313(const CodeInfo& co, const Decoded& d, const DisOptions& opts, std::string& out) {
  int32_t maxline = -1;
  bool none_start = false;
  for (const Instr& ins : d.instrs) {
    if (!ins.line_start) continue;
    if (ins.starts_line == kNone) none_start = true;
    else if (ins.starts_line != 0) maxline = std::max(maxline, ins.starts_line);
  }
  size_t lineno_width = 0;
  if (maxline != -1) {
    lineno_width = std::max<size_t>(3, std::to_string(maxline).size());
    if (lineno_width < 4 && none_start) lineno_width = 4;
  }
  const std::vector<uint32_t> labels = labels_313(d, true);
  const size_t label_width = 4 + std::to_string(labels.size()).size();
  std::string line;
  for (const Instr& ins : d.instrs) {
    if (lineno_width && ins.line_start && ins.offset > 0) out += '\n';
    line.clear();
    if (lineno_width) {
      if (!ins.line_start) line.append(lineno_width, ' ');
      else if (ins.starts_line == kNone) {
        line.append(lineno_width > 4 ? lineno_width - 4 : 0, ' ');
        line += "  --";
      } else {
        std::string n = std::to_string(ins.starts_line);
        if (n.size() < lineno_width) line.append(lineno_width - n.size(), ' ');
        line += n;
      }
      line += ' ';
    }
    const long lbl = label_of(labels, ins.offset);
    if (lbl) {
      std::string l(1, 'L');  // (not "L" + ...: GCC 12 -Wrestrict false positive)
      l += std::to_string(lbl);
      l += ':';
      if (l.size() < label_width) line.append(label_width - l.size(), ' ');
      line += l;
    } else {
      line.append(label_width, ' ');
    }
    line += ' ';
    const uint32_t end = ins.offset + 2 * (op_info(op_info(ins.opcode, co.version).deopt, co.version).caches);
    const bool current = opts.lasti >= 0 && ins.offset <= static_cast<uint32_t>(opts.lasti) &&
                         static_cast<uint32_t>(opts.lasti) <= end;
    line += current ? "-->" : "   ";
    line += ' ';
    const std::string_view name = op_name(ins.opcode, co.version);
    line += name;
    if (name.size() < 20) line.append(20 - name.size(), ' ');
    if (ins.arg != kNone) {
      line += ' ';
      const std::string a = std::to_string(ins.arg);
      const size_t w = 5 - std::min<size_t>(5, name.size() > 20 ? name.size() - 20 : 0);
      if (a.size() < w) line.append(w - a.size(), ' ');
      line += a;
      const size_t before = line.size();
      line += " (";
      append_argrepr(line, co, ins, &labels);
      if (line.size() == before + 2) line.resize(before);
      else line += ')';
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  if (!d.exceptions.empty()) {
    out += "ExceptionTable:\n";
    for (const ExcEntry& e : d.exceptions) {
      out += "  L" + std::to_string(label_of(labels, e.start)) + " to L" + std::to_string(label_of(labels, e.end)) +
             " -> L" + std::to_string(label_of(labels, e.target)) + " [" + std::to_string(e.depth) + "]" +
             (e.lasti ? " lasti" : "") + "\n";
    }
  }
}

void listing_311(const CodeInfo& co, const Decoded& decoded, const DisOptions& opts, std::string& out);

Result<bool> disassemble_one(const CodeInfo& co, const DisOptions& opts, std::string& out) {
  auto d = decode(co);
  if (!d) return d.error();
  auto ok = check_operands(co, *d);
  if (!ok) return ok.error();
  if (co.version == Version::py313) {
    listing_313(co, *d, opts, out);
  } else {
    listing_311(co, *d, opts, out);
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

// 3.11's and 3.12's listing: offsets, " >> " on jump and handler targets, "to <offset>".
void listing_311(const CodeInfo& co, const Decoded& decoded, const DisOptions& opts, std::string& out) {
  const Decoded* d = &decoded;

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
    bool current = static_cast<int32_t>(ins.offset) == opts.lasti;
    if (co.version != Version::py311 && opts.lasti >= 0)  // 3.12: the caches count as the instruction
      current = static_cast<int32_t>(ins.offset) <= opts.lasti &&
                opts.lasti <= static_cast<int32_t>(ins.offset + 2 * (ins.size_units - 1));
    std::memcpy(p, current ? "-->" : "   ", 3);
    std::memcpy(p + 3, (ins.is_jump_target || ins.is_exc_target) ? " >> " : "    ", 4);
    p = write_rjust(p + 7, ins.offset, offset_width);
    *p++ = ' ';
    const std::string_view name = op_name(ins.opcode, co.version);
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
    append_argrepr(out, co, ins, nullptr);
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
