// Argument parsing of the dynview executable (main.cpp), apart so that the fuzz target
// (tests/fuzz/cli_script_fuzz.cpp) can run it without the window: pure functions over argv that
// return "" or the usage error's text (which names the option or value at fault).
#pragma once
#include <cstdint>
#include <string>

#include "core/reports.h"
#include "window.h"

namespace dv::cli {

struct TraceArgs {
  const char* path = nullptr;
  bool json = false, steps = false, allow_incomplete = false, verify = true;
  std::string format, out;
  dv::reports::Budget budget;
};

bool parse_int(const char* s, int64_t& out);  // a whole decimal integer >= 0 that fits
// The trace subcommands' arguments (explain, recompiles, check, stats, export).
std::string parse_trace_args(const std::string& cmd, int argc, char** argv, TraceArgs& a);
// The viewer's arguments (dynview RUN.dyn ...): every value checked (--scale 0.5..4, --size, ...).
std::string parse_view_args(int argc, char** argv, dv::view::ViewerOptions& o);

}  // namespace dv::cli
