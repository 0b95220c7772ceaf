// CPython 3.11-3.13 bytecode model: code-object description, line table, exception table, decoder.
// Pure C++: used by the tracer (reading frames), codegen (via assembler.h) and the viewer (reading
// code objects recorded in a trace). Semantics follow Lib/dis.py, Objects/locations.md and
// Objects/exception_handling_notes.txt of each version; the version is a run-time parameter
// (Version, from opcodes.h) that defaults to 3.11, the version the engine runs on today.
#pragma once
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opcodes.h"
#include "result.h"

namespace dv::bc {

constexpr int32_t kNone = INT32_MIN;  // "no value" for optional position fields and args

// Source span of one code unit, as code.co_positions() yields it. kNone = None.
struct Position {
  int32_t line = kNone, end_line = kNone, col = kNone, end_col = kNone;
  bool operator==(const Position&) const = default;
};

// One entry of co_linetable: code units [start, end) share a position.
struct LineEntry {
  uint32_t start = 0, end = 0;  // in code units (2 bytes each)
  Position pos;
};

// One entry of co_exceptiontable, in byte offsets as dis._parse_exception_table gives them.
struct ExcEntry {
  uint32_t start = 0, end = 0, target = 0;  // [start, end) protected; handler at target
  uint32_t depth = 0;
  bool lasti = false;
  bool operator==(const ExcEntry&) const = default;
};

Result<std::vector<LineEntry>> decode_linetable(std::string_view table, int firstlineno,
                                                size_t code_units);
// Position of every code unit (like co_positions()).
std::vector<Position> positions_per_unit(const std::vector<LineEntry>& entries, size_t code_units);
// (offset, line) pairs where a new line starts, like dis.findlinestarts.
std::vector<std::pair<uint32_t, int32_t>> line_starts(const std::vector<LineEntry>& entries);

Result<std::vector<ExcEntry>> decode_exception_table(std::string_view table, size_t code_bytes);

// One instruction as dis.get_instructions yields it (EXTENDED_ARG included as its own entry;
// its arg is folded into the following instruction's arg). CACHE units are skipped.
struct Instr {
  uint32_t offset = 0;        // byte offset
  uint8_t opcode = 0;
  int32_t arg = kNone;        // folded oparg, kNone when the opcode takes none
  int32_t jump_target = -1;   // byte offset for jumps, else -1
  int32_t starts_line = kNone;
  bool is_jump_target = false;  // target of a jump instruction
  bool is_exc_target = false;   // target of an exception-table entry
  uint8_t size_units = 1;       // 1 + inline caches
  Position pos;                 // position of the instruction's first code unit
  // Version-neutral view of the same instruction (same on every version):
  Name name = Name::kNone_;     // base (deoptimised) opcode name
  int32_t index = kNone;        // operand as an index: co_names for LOAD_GLOBAL/LOAD_ATTR/
                                // LOAD_SUPER_ATTR without their flag bits, cmp_op for COMPARE_OP,
                                // the first local of LOAD_FAST_LOAD_FAST & co; else the oparg
  int32_t index2 = kNone;       // second local of the *_FAST_*_FAST super-instructions
  bool push_null = false;       // LOAD_GLOBAL pushes NULL; LOAD_ATTR/LOAD_SUPER_ATTR (3.12+): method
                                // form (NULL|self); COMPARE_OP (3.13): result converted to bool
  bool line_start = false;      // 3.13 dis "starts_line": a co_lines entry starts here (its line
                                // may be None); on 3.11/3.12 the same as starts_line != kNone
  int32_t line_number = kNone;  // line of the last line start (3.13 dis "line_number")
};

struct Decoded {
  Version version = Version::py311;
  std::vector<Instr> instrs;
  std::vector<LineEntry> lines;
  std::vector<ExcEntry> exceptions;
};

// The facts of a code object that dynview needs, without Python: filled from a live code object
// by python/src/, or read back from a trace.
struct CodeInfo {
  Version version = Version::py311;  // whose bytecode `code` is
  std::string name, qualname, filename;
  int32_t firstlineno = 1;
  int32_t argcount = 0, posonlyargcount = 0, kwonlyargcount = 0, flags = 0, stacksize = 0;
  std::string code;            // co_code (deoptimised bytes)
  std::string linetable;       // co_linetable
  std::string exceptiontable;  // co_exceptiontable
  std::vector<std::string> names;            // co_names
  std::vector<std::string> localsplusnames;  // co_varnames + cellvars + freevars, by oparg
  std::vector<uint8_t> localspluskinds;
  std::vector<std::string> const_reprs;      // repr() of each co_consts item
  std::vector<int32_t> const_code;           // index into `nested` for code consts, else -1
  std::vector<std::shared_ptr<CodeInfo>> nested;  // code objects among the consts
  std::string repr;            // repr(code): "<code object f at 0x..., file "x.py", line 3>"
};

// Decode co_code with its tables. Checks everything an index could trip on: odd or truncated
// code, unknown opcodes, jump targets outside the code or inside an instruction, out-of-range
// table entries. Operand indexes into names/consts/locals are checked by `check_operands`.
Result<Decoded> decode(std::string_view code, std::string_view linetable,
                       std::string_view exceptiontable, int firstlineno,
                       Version version = Version::py311);
Result<Decoded> decode(const CodeInfo& co);
// The call made by d.instrs[i], the same on every version: 3.11's KW_NAMES + PRECALL + CALL,
// 3.12's KW_NAMES + CALL, 3.13's CALL_KW after the LOAD_CONST of its names tuple. nullopt if
// instrs[i] is not CALL or CALL_KW (3.11: the CALL, not the PRECALL, is the call).
struct CallForm {
  int32_t nargs = 0;              // arguments on the stack after callable and self/NULL, keywords included
  int32_t kwnames = kNone;        // co_consts index of the keyword names tuple (kNone: no keywords,
                                  // or CALL_KW's names not loaded by the instruction just before)
  bool kwnames_on_stack = false;  // 3.13 CALL_KW: the names tuple is on the stack above the args
};
std::optional<CallForm> call_form(const Decoded& d, size_t i);

// Operand indexes (consts, names, locals, BINARY_OP/COMPARE_OP tables) are within range.
Result<bool> check_operands(const CodeInfo& co, const Decoded& d);

// argrepr exactly as dis of co.version prints it ("NULL + print", "to 24", "+=", "print + NULL",
// "to L3", ...). On 3.13 jump targets are labels, which need the whole code: see argrepr_313.
std::string argrepr(const CodeInfo& co, const Instr& ins);
// 3.13 labels: the sorted offsets that get a label (jump targets; with_exceptions: also exception
// entries' start, end and handler, as the listing numbers them); label = index + 1.
std::vector<uint32_t> labels_313(const Decoded& d, bool with_exceptions);
// argrepr with the labels given (dis.get_instructions uses labels_313(d, false)).
std::string argrepr(const CodeInfo& co, const Instr& ins, const std::vector<uint32_t>& labels);

struct DisOptions {
  bool recursive = true;  // also disassemble nested code objects, as dis.dis does
  int32_t lasti = -1;     // offset marked with "-->"
};
// The listing dis.dis(code) of co.version prints, byte for byte (3.13: labels, no offsets).
Result<std::string> disassemble(const CodeInfo& co, const DisOptions& opts = {});
// The same, appended to `out` (lets a caller reuse one buffer across many code objects).
Result<bool> disassemble_into(const CodeInfo& co, const DisOptions& opts, std::string& out);

}  // namespace dv::bc
