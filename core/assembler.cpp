// Assembler and stack-depth analysis for CPython 3.11-3.13 code (see assembler.h for the contract).
#include "assembler.h"

#include <algorithm>
#include <unordered_map>

#include "opcodes.h"
#include "varint.h"

namespace dv::bc {
namespace {

int ext_count(uint32_t arg) {
  return arg > 0xFFFFFF ? 3 : arg > 0xFFFF ? 2 : arg > 0xFF ? 1 : 0;
}

// Python/compile.c write_location_info_entry, for `units` (<= 8) code units of one instruction.
void write_location(std::string& t, int32_t& cur_line, const Position& p, int units) {
  auto first = [&](int code) { t.push_back(static_cast<char>(0x80 | (code << 3) | (units - 1))); };
  if (p.line == kNone) {
    first(15);
    return;
  }
  const int32_t line = p.line;
  const int32_t end_line = p.end_line == kNone ? -1 : p.end_line;
  const int32_t col = p.col == kNone ? -1 : p.col;
  const int32_t end_col = p.end_col == kNone ? -1 : p.end_col;
  const int32_t delta = line - cur_line;
  if (col < 0 || end_col < 0) {
    if (end_line == line || end_line == -1) {
      first(13);
      write_le_svarint(t, delta);
      cur_line = line;
      return;
    }
  } else if (end_line == line) {
    if (delta == 0 && col < 80 && end_col - col < 16 && end_col >= col) {
      first(col >> 3);
      t.push_back(static_cast<char>(((col & 7) << 4) | (end_col - col)));
      return;
    }
    if (delta >= 0 && delta < 3 && col < 128 && end_col < 128) {
      first(10 + delta);
      t.push_back(static_cast<char>(col));
      t.push_back(static_cast<char>(end_col));
      cur_line = line;
      return;
    }
  }
  first(14);
  write_le_svarint(t, delta);
  write_le_varint(t, static_cast<uint32_t>((end_line == -1 ? line : end_line) - line));
  write_le_varint(t, static_cast<uint32_t>(col + 1));
  write_le_varint(t, static_cast<uint32_t>(end_col + 1));
  cur_line = line;
}

struct Handler {
  int32_t target = -1, depth = 0;
  bool lasti = false;
  bool operator==(const Handler&) const = default;
};

}  // namespace

Result<AsmOutput> assemble(const AsmInput& in) {
  const Version v = in.version;
  const OpTable& table = op_table(v);
  const uint8_t extended_arg = table.extended_arg;
  const size_t n = in.instrs.size();
  const auto err = [](std::string what, long at = -1) { return make_error("assembler", std::move(what), at); };
  std::vector<uint8_t> ops(n);
  for (size_t i = 0; i < n; ++i) {
    const AsmInstr& a = in.instrs[i];
    if (!is_valid_opcode(a.opcode, v) || a.opcode == extended_arg || name_of(a.opcode, v) == Name::CACHE)
      return err("instruction " + std::to_string(i) + ": opcode " + std::to_string(a.opcode) +
                 " cannot be assembled");
    if (is_jump(a.opcode, v) && (a.arg < 0 || static_cast<size_t>(a.arg) >= n))
      return err("instruction " + std::to_string(i) + ": jump target " + std::to_string(a.arg) +
                 " is not an instruction index");
    if (!is_jump(a.opcode, v) && a.arg < 0)
      return err("instruction " + std::to_string(i) + ": negative oparg " + std::to_string(a.arg));
    ops[i] = a.opcode;
  }
  // Handler of each instruction: the innermost range containing it.
  std::vector<Handler> handler(n);
  std::vector<int32_t> span(n, INT32_MAX);
  for (const AsmExcRange& r : in.ranges) {
    if (r.start < 0 || r.end < r.start || static_cast<size_t>(r.end) > n || r.handler < 0 ||
        static_cast<size_t>(r.handler) >= n || r.depth < 0)
      return err("exception range [" + std::to_string(r.start) + ", " + std::to_string(r.end) +
                 ") -> " + std::to_string(r.handler) + " is out of bounds");
    for (int32_t i = r.start; i < r.end; ++i) {
      if (r.end - r.start <= span[i]) {
        span[i] = r.end - r.start;
        handler[i] = Handler{r.handler, r.depth, r.lasti};
      }
    }
  }
  // Jump offsets to a fixed point (compile.c assemble_jump_offsets), sizes in code units.
  std::vector<uint32_t> args(n), size(n), start(n + 1);
  for (size_t i = 0; i < n; ++i) {
    // A jump's first size: 3.13's assembler starts from the oparg holding the target's index, the
    // older ones from 0. The fixed point reached (sizes only change when an oparg needs more or
    // fewer EXTENDED_ARGs) depends on it, so this matches their EXTENDED_ARGs exactly.
    args[i] = !is_jump(ops[i], v) || v == Version::py313 ? static_cast<uint32_t>(in.instrs[i].arg) : 0;
    size[i] = 1 + op_info(ops[i], v).caches + (has_arg(ops[i], v) ? ext_count(args[i]) : 0);
  }
  for (bool changed = true; changed;) {
    start[0] = 0;
    for (size_t i = 0; i < n; ++i) start[i + 1] = start[i] + size[i];
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (!is_jump(ops[i], v)) continue;
      const uint32_t next = start[i] + size[i];
      const uint32_t target = start[in.instrs[i].arg];
      const bool backward = target < next;
      uint8_t op = in.instrs[i].opcode;
      if (backward != has_flag(op, F_BACKWARD, v)) {
        auto other = jump_other_direction(op, v);
        if (!other)
          return err("instruction " + std::to_string(i) + ": " + std::string(op_name(op, v)) + " cannot jump " +
                     (backward ? "backward" : "forward"));
        op = *other;
      }
      ops[i] = op;
      args[i] = backward ? next - target : target - next;
      const uint32_t s = 1 + op_info(op, v).caches + ext_count(args[i]);
      if (s != size[i]) {
        size[i] = s;
        changed = true;
      }
    }
  }
  AsmOutput out;
  out.offsets.resize(n);
  out.code.reserve(start[n] * 2);
  for (size_t i = 0; i < n; ++i) {
    out.offsets[i] = start[i] * 2;
    const uint32_t a = args[i];
    if (has_arg(ops[i], v)) {
      for (int k = ext_count(a); k > 0; --k) {
        out.code.push_back(static_cast<char>(extended_arg));
        out.code.push_back(static_cast<char>((a >> (8 * k)) & 0xFF));
      }
      out.code.push_back(static_cast<char>(ops[i]));
      out.code.push_back(static_cast<char>(a & 0xFF));
    } else {
      if (a != 0)
        return err("instruction " + std::to_string(i) + ": " + std::string(op_name(ops[i], v)) + " takes no oparg");
      out.code.push_back(static_cast<char>(ops[i]));
      out.code.push_back(0);
    }
    out.code.append(2 * op_info(ops[i], v).caches, '\0');
  }
  // Line table: one entry per instruction (3.11) or per run of instructions with the same
  // location (3.12+), split into pieces of at most 8 code units.
  int32_t cur_line = in.firstlineno;
  auto emit_location = [&](const Position& pos, int units) {
    for (; units > 8; units -= 8) write_location(out.linetable, cur_line, pos, 8);
    if (units > 0) write_location(out.linetable, cur_line, pos, units);
  };
  if (v == Version::py311) {
    for (size_t i = 0; i < n; ++i) emit_location(in.instrs[i].pos, static_cast<int>(size[i]));
  } else {
    Position run_pos;
    int run_units = 0;
    for (size_t i = 0; i < n; ++i) {
      if (run_units > 0 && !(in.instrs[i].pos == run_pos)) {
        emit_location(run_pos, run_units);
        run_units = 0;
      }
      if (run_units == 0) run_pos = in.instrs[i].pos;
      run_units += static_cast<int>(size[i]);
    }
    emit_location(run_pos, run_units);
  }
  // Exception table: consecutive instructions with the same handler form one entry.
  std::vector<ExcEntry> entries;
  Handler cur;
  uint32_t cur_start = 0;
  auto emit = [&](uint32_t end) {
    ExcEntry e{cur_start * 2, end * 2, start[cur.target] * 2, static_cast<uint32_t>(cur.depth), cur.lasti};
    entries.push_back(e);
    write_be_varint(out.exceptiontable, cur_start, true);
    write_be_varint(out.exceptiontable, end - cur_start, false);
    write_be_varint(out.exceptiontable, start[cur.target], false);
    write_be_varint(out.exceptiontable, (e.depth << 1) | (e.lasti ? 1 : 0), false);
  };
  for (size_t i = 0; i < n; ++i) {
    if (handler[i] == cur) continue;
    if (cur.target >= 0) emit(start[i]);
    cur = handler[i];
    cur_start = start[i];
  }
  if (cur.target >= 0) emit(start[n]);

  auto depth = compute_stacksize(out.code, entries, v);
  if (!depth) return depth.error();
  out.stacksize = *depth;
  return out;
}

Result<int32_t> compute_stacksize(std::string_view code, const std::vector<ExcEntry>& exceptions,
                                  Version v) {
  auto d = decode(code, {}, {}, 1, v);
  if (!d) return d.error();
  const auto& ins = d->instrs;
  const size_t n = ins.size();
  std::unordered_map<uint32_t, size_t> at;
  at.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) at[ins[i].offset] = i;
  // Handler entry (index into `exceptions`) protecting each instruction, by one sweep.
  std::vector<int32_t> exc_of(n, -1);
  for (size_t k = 0, i = 0; k < exceptions.size(); ++k) {
    while (i < n && ins[i].offset < exceptions[k].start) ++i;
    for (size_t j = i; j < n && ins[j].offset < exceptions[k].end; ++j) exc_of[j] = static_cast<int32_t>(k);
  }
  std::vector<int32_t> depth(n, -1);
  std::vector<size_t> work;
  int32_t maxdepth = 0;
  auto push = [&](size_t i, int32_t dep) -> Result<bool> {
    maxdepth = std::max(maxdepth, dep);
    if (dep < 0)
      return make_error("co_code", "stack underflow reaching instruction", static_cast<long>(ins[i].offset));
    if (depth[i] < 0) {
      depth[i] = dep;
      work.push_back(i);
    } else if (depth[i] != dep) {
      return make_error("co_code", "instruction reached with stack depths " + std::to_string(depth[i]) +
                                       " and " + std::to_string(dep),
                        static_cast<long>(ins[i].offset));
    }
    return true;
  };
  if (n == 0) return 0;
  if (auto r = push(0, 0); !r) return r.error();
  while (!work.empty()) {
    size_t i = work.back();
    work.pop_back();
    for (; i < n; ++i) {
      const Instr& x = ins[i];
      const int32_t dep = depth[i];
      if (exc_of[i] >= 0) {
        const ExcEntry& ex = exceptions[exc_of[i]];
        auto h = at.find(ex.target);
        if (h == at.end()) return make_error("co_exceptiontable", "handler is not an instruction");
        if (auto r = push(h->second, static_cast<int32_t>(ex.depth) + (ex.lasti ? 1 : 0) + 1); !r)
          return r.error();
      }
      const uint8_t op = op_info(x.opcode, v).deopt;
      auto eff = stack_effect(op, x.arg == kNone ? 0 : x.arg, false, v);
      if (!eff) return make_error("co_code", "opcode without a stack effect", static_cast<long>(x.offset));
      // RETURN_GENERATOR returns the new generator; when resumed, execution continues with the
      // sent value pushed (the compiler inserts it and its POP_TOP after its own depth analysis).
      const int32_t next_dep = dep + (x.name == Name::RETURN_GENERATOR && v != Version::py313 ? 1 : *eff);
      maxdepth = std::max(maxdepth, next_dep);
      // 3.13's compiler counts the depth before it folds LOAD_CONST + RETURN_VALUE into RETURN_CONST.
      if (v == Version::py313 && x.name == Name::RETURN_CONST) maxdepth = std::max(maxdepth, dep + 1);
      if (is_jump(op, v)) {
        auto je = stack_effect(op, x.arg, true, v);
        auto t = at.find(static_cast<uint32_t>(x.jump_target));
        if (!je || t == at.end()) return make_error("co_code", "bad jump", static_cast<long>(x.offset));
        if (auto r = push(t->second, dep + *je); !r) return r.error();
      }
      if (has_flag(op, F_NOFALL, v) || i + 1 >= n) break;
      if (next_dep < 0) return make_error("co_code", "stack underflow", static_cast<long>(x.offset));
      if (depth[i + 1] >= 0) {
        if (auto r = push(i + 1, next_dep); !r) return r.error();
        break;
      }
      depth[i + 1] = next_dep;
    }
  }
  return maxdepth;
}

Result<AsmInput> to_asm_input(const Decoded& d, int firstlineno) {
  AsmInput in;
  in.version = d.version;
  in.firstlineno = firstlineno;
  std::unordered_map<uint32_t, int32_t> index_at;  // byte offset (incl. EXTENDED_ARG prefix) -> index
  index_at.reserve(d.instrs.size() * 2);
  std::vector<uint32_t> prefix_offsets;
  Position prefix_pos;
  bool in_prefix = false;
  std::vector<const Instr*> real;
  for (const Instr& x : d.instrs) {
    if (op_info(x.opcode, d.version).deopt == op_table(d.version).extended_arg) {
      if (!in_prefix) prefix_pos = x.pos;
      in_prefix = true;
      prefix_offsets.push_back(x.offset);
      continue;
    }
    const int32_t idx = static_cast<int32_t>(in.instrs.size());
    for (uint32_t o : prefix_offsets) index_at[o] = idx;
    index_at[x.offset] = idx;
    AsmInstr a;
    a.opcode = op_info(x.opcode, d.version).deopt;
    a.arg = x.arg == kNone ? 0 : x.arg;
    a.pos = in_prefix ? prefix_pos : x.pos;
    in.instrs.push_back(a);
    real.push_back(&x);
    prefix_offsets.clear();
    in_prefix = false;
  }
  if (in_prefix) return make_error("co_code", "code ends with EXTENDED_ARG", static_cast<long>(prefix_offsets[0]));
  const uint32_t code_end = d.instrs.empty() ? 0 : d.instrs.back().offset + 2 * d.instrs.back().size_units;
  auto lookup = [&](uint32_t off) -> int32_t {
    if (off == code_end) return static_cast<int32_t>(in.instrs.size());
    auto it = index_at.find(off);
    return it == index_at.end() ? -1 : it->second;
  };
  for (size_t i = 0; i < real.size(); ++i) {
    if (real[i]->jump_target >= 0) {
      int32_t t = lookup(static_cast<uint32_t>(real[i]->jump_target));
      if (t < 0 || t >= static_cast<int32_t>(in.instrs.size()))
        return make_error("co_code", "jump target is not an instruction", static_cast<long>(real[i]->offset));
      in.instrs[i].arg = t;
    }
  }
  for (const ExcEntry& e : d.exceptions) {
    int32_t s = lookup(e.start), en = lookup(e.end), h = lookup(e.target);
    if (s < 0 || en < 0 || h < 0 || h >= static_cast<int32_t>(in.instrs.size()))
      return make_error("co_exceptiontable", "entry boundary is not an instruction boundary",
                        static_cast<long>(e.start));
    in.ranges.push_back(AsmExcRange{s, en, h, static_cast<int32_t>(e.depth), e.lasti});
  }
  return in;
}

}  // namespace dv::bc
