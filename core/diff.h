// `dynview diff`: what changed between two .dyn traces (recorded, imported from TORCH_TRACE, or
// one of each). Compiles are matched by code object (file, function, first line; file and function
// alone when the function moved). The JSON schema is documented in core/TRACE.md ("diff").
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "trace.h"

namespace dv::diff {

struct FailOn {
  bool new_breaks = false, new_recompiles = false, more_graphs = false;
};
// "new-breaks,new-recompiles,more-graphs" (any subset); false on an unknown name.
bool parse_fail_on(const std::string& list, FailOn& out);

// Per code object and in total: graphs, breaks (new / gone / moved), recompiles and their reasons,
// guards added/removed, op counts, compile time. "ok" is false when a FailOn condition holds.
nlohmann::json diff(const trace::TraceReader& before, const trace::TraceReader& after, const FailOn& fail);
std::string diff_text(const nlohmann::json& j);

}  // namespace dv::diff
