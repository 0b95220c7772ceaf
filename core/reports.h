// Reports over a .dyn trace, for the dynview executable's subcommands (explain, recompiles, check,
// stats, export) and anything else that reads traces. Each report is a JSON value whose schema is
// documented in core/TRACE.md ("Reports"), plus a text rendering of it. Reader only: no Python.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace.h"

namespace dv::reports {

// printf into a std::string (report text; lines are cut at 2 KB).
std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));

// Per compile: graphs with op counts, breaks (id, reason, hint, user line and stack), guards; totals.
nlohmann::json explain(const trace::TraceReader& r);
std::string explain_text(const nlohmann::json& j);

// Graph breaks counted by id, most frequent first: [{"break_id", "title" (core/break_ids.inc; "" for
// an id it does not know), "count"}], from explain's compiles or from counts summed by the caller.
nlohmann::json breaks_by_id(const nlohmann::json& compiles);
nlohmann::json breaks_by_id(const std::map<std::string, int64_t>& counts);

// Each recompile (and recompile-limit hit): the failing guards with the value they saw, and the
// step and user line that created each guard.
nlohmann::json recompiles(const trace::TraceReader& r);
std::string recompiles_text(const nlohmann::json& j);

// The counts every report and the viewer give (explain's totals, stats' counts, check's values):
// compiles, graphs, graph_breaks, guards, ops, steps, recompiles, recompile_limit_hits,
// eager_fallbacks, incomplete_compiles.
nlohmann::json counts(const trace::TraceReader& r);

struct Budget {
  int64_t max_graph_breaks = -1, max_recompiles = -1, max_graphs = -1;  // -1: no limit
  int64_t max_limit_hits = -1, max_eager_fallbacks = -1;
};
// Counts against the budget; "ok" says whether every count is within it. The counts are those of
// explain's totals, stats' counts and recompiles' recompile_count/limit_hits (one definition).
nlohmann::json check(const trace::TraceReader& r, const Budget& b);
std::string check_text(const nlohmann::json& j);

// Size and shape of the trace; open_ms is measured by the caller.
nlohmann::json stats(const trace::TraceReader& r, double open_ms);
std::string stats_text(const nlohmann::json& j);

// The trace's integrity, for `check` (which refuses a damaged trace) and the other reports:
// `complete` (a footer: the recording process closed it), and every problem, the reader's and
// those of chunks whose steps do not decode (each decoded once). Reads every chunk.
nlohmann::json integrity(const trace::TraceReader& r);
// What is wrong with chunk k beyond the reader's own problems: its stored header against the index,
// its step data not decoding ("chunk 1: step data is corrupt: ..."). Empty when whole. Decodes it.
std::vector<std::string> chunk_problems(const trace::TraceReader& r, size_t k);

// Compile-level timeline as Chrome trace-event JSON (Perfetto loads it).
nlohmann::json chrome(const trace::TraceReader& r);
// Everything recorded except steps (events, compiles), and the steps when with_steps.
Result<nlohmann::json> dump(const trace::TraceReader& r, bool with_steps);

}  // namespace dv::reports
