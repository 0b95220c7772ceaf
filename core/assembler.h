// Assembler for CPython 3.11-3.13 code: instructions with symbolic jump targets, possibly nested
// exception ranges and positions -> co_code, co_linetable, co_exceptiontable, co_stacksize.
// Encodes the way each version's compiler does (3.11 Python/compile.c: assemble_jump_offsets,
// write_location_info_entry, assemble_exception_table, stackdepth; 3.12+ Python/assemble.c and
// flowgraph.c: jumps relative to the end of the inline caches, one line-table entry per run of
// instructions with the same location), so re-assembling a decoded code object gives back the same
// bytes. Used by codegen (tracer/) and by tests.
#pragma once
#include <string>
#include <vector>

#include "bytecode.h"

namespace dv::bc {

struct AsmInstr {
  uint8_t opcode = 0;  // base opcode in AsmInput::version's numbering; a jump may name either
                       // direction where the version has both, the assembler picks
  int32_t arg = 0;     // for jumps: index of the target instruction in AsmInput::instrs
  Position pos;        // pos.line == kNone: no location
};

// Instructions [start, end) are protected by the handler instruction `handler`. Ranges may nest:
// the innermost (shortest) range containing an instruction applies; on equal length, the later.
struct AsmExcRange {
  int32_t start = 0, end = 0, handler = 0;
  int32_t depth = 0;
  bool lasti = false;
};

struct AsmInput {
  Version version = Version::py311;
  std::vector<AsmInstr> instrs;
  std::vector<AsmExcRange> ranges;
  int32_t firstlineno = 1;
};

struct AsmOutput {
  std::string code, linetable, exceptiontable;
  int32_t stacksize = 0;
  std::vector<uint32_t> offsets;  // byte offset where each input instruction starts (its first
                                  // EXTENDED_ARG if it has any: jumps and handlers land there)
};

Result<AsmOutput> assemble(const AsmInput& in);

// Maximum stack depth of assembled code, by a fixed point over the control-flow graph including
// the edges to exception handlers (entered at depth + lasti + 1).
Result<int32_t> compute_stacksize(std::string_view code, const std::vector<ExcEntry>& exceptions,
                                  Version version = Version::py311);

// The assembler input that reproduces a decoded code object (EXTENDED_ARGs dropped, jumps and
// handlers made symbolic, one exception range per table entry), for the decoded code's version.
Result<AsmInput> to_asm_input(const Decoded& d, int firstlineno);

}  // namespace dv::bc
