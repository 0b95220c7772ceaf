// CodeInfo <-> JSON, the interchange form of a recorded code object (read by `dynview disasm`
// and, later, embedded in traces). Byte fields are lower-case hex strings; "version" ("3.11",
// "3.12", "3.13"; absent = 3.11) says whose bytecode it is.
#pragma once
#include <string>

#include "bytecode.h"

namespace dv::bc {

std::string code_to_json(const CodeInfo& co, int indent = -1);
Result<CodeInfo> code_from_json(std::string_view text);

}  // namespace dv::bc
