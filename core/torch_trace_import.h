// TORCH_TRACE import: torch.compile's structured logs (one JSON-lines log per rank/process, the
// format tlparse reads) -> a .dyn trace with compiles, breaks, guards, graphs, recompiles, dynamic
// shape symbols, bytecode and artifacts (no steps: the log has none). Read by the dynview
// executable (`dynview import`, `dynview DIR_OR_LOG`). No Python. Record mapping: core/TRACE.md.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "result.h"

namespace dv::torch_trace {

struct ImportStats {
  int processes = 0, compiles = 0, graphs = 0, breaks = 0, recompiles = 0, guards = 0;
  int64_t records = 0;                         // envelopes read (all logs)
  std::map<std::string, int64_t> kinds;        // record kind -> count (known and unknown)
  std::map<std::string, int64_t> unknown;      // kinds the importer does not interpret (kept as events)
  std::vector<std::string> problems;           // "LOG: line N (byte B): what"; empty when every log was intact
  std::vector<std::string> warnings;           // records of a known kind skipped for an unexpected shape
  std::vector<std::string> logs;               // the logs read, in process order
};

// The logs of a TORCH_TRACE directory (every regular file, sorted by name) or the one log named.
Result<std::vector<std::string>> find_logs(const std::string& dir_or_log);

// Does the file start like a TORCH_TRACE log (a glog-style line "V1123 ... path:line] {")?
bool looks_like_torch_trace(const std::string& path);

// Imports the logs into a new .dyn at out. Damaged logs import their intact prefix and add a
// problem; an Error only when nothing usable was read or the output cannot be written.
Result<ImportStats> import(const std::vector<std::string>& logs, const std::string& out);

// md5 of the payload text as torch writes it in "has_payload" (hex), to tell a whole payload from a cut one.
std::string md5_hex(std::string_view data);

}  // namespace dv::torch_trace
