// Argument parsing of the dynview executable (see cli_args.h).
#include "cli_args.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dv::cli {

bool parse_int(const char* s, int64_t& out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (!s[0] || *end || v < 0 || errno == ERANGE) return false;
  out = v;
  return true;
}

// Parses the arguments of the trace subcommands; an empty string or the usage error's text.
std::string parse_trace_args(const std::string& cmd, int argc, char** argv, TraceArgs& a) {
  const bool budget = cmd == "check", exp = cmd == "export";
  for (int i = 0; i < argc; ++i) {
    const std::string x = argv[i];
    auto value = [&](int64_t& dst) -> std::string {
      if (i + 1 >= argc) return x + " needs a value (an integer >= 0)";
      if (!parse_int(argv[++i], dst)) return x + " must be an integer >= 0, not '" + argv[i] + "'";
      return "";
    };
    std::string err;
    if (x == "--json") a.json = true;
    else if (budget && x == "--max-graph-breaks") err = value(a.budget.max_graph_breaks);
    else if (budget && x == "--max-recompiles") err = value(a.budget.max_recompiles);
    else if (budget && x == "--max-graphs") err = value(a.budget.max_graphs);
    else if (budget && x == "--max-limit-hits") err = value(a.budget.max_limit_hits);
    else if (budget && x == "--max-eager-fallbacks") err = value(a.budget.max_eager_fallbacks);
    else if (budget && x == "--allow-incomplete") a.allow_incomplete = true;
    else if (cmd == "stats" && x == "--no-verify") a.verify = false;
    else if (exp && x == "--format") {
      if (i + 1 >= argc) return "--format needs a value (chrome|json)";
      a.format = argv[++i];
      if (a.format != "chrome" && a.format != "json") return "--format must be chrome or json, not '" + a.format + "'";
    } else if (exp && x == "--steps") a.steps = true;
    else if (exp && (x == "-o" || x == "--output")) {
      if (i + 1 >= argc) return x + " needs a file name";
      a.out = argv[++i];
    } else if (!x.empty() && x[0] == '-') return "unknown option " + x;
    else if (!a.path) a.path = argv[i];
    else return "unexpected argument '" + x + "' (one trace at a time)";
    if (!err.empty()) return err;
  }
  if (!a.path) return "a trace file (RUN.dyn) or a directory of traces is required";
  if (exp && a.format.empty()) return "--format is required (chrome|json)";
  return "";
}

std::string parse_view_args(int argc, char** argv, dv::view::ViewerOptions& o) {
  for (int i = 0; i < argc; ++i) {
    const std::string x = argv[i];
    const bool takes_value = x == "--screenshot" || x == "--script" || x == "--step" || x == "--select" || x == "--scale" ||
                             x == "--size" || x == "--bench-scrub";
    if (takes_value && i + 1 >= argc) return x + " needs a value";
    const char* v = takes_value ? argv[++i] : nullptr;
    int64_t n = 0;
    if (x == "--screenshot") o.screenshot = v;
    else if (x == "--script") o.script = v;
    else if (x == "--step") {
      if (!parse_int(v, n)) return std::string("--step must be an integer >= 0, not '") + v + "'";
      o.step = n;
    } else if (x == "--select") {
      std::string sel = v;
      const size_t colon = sel.find(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == sel.size())
        return "--select takes WHAT:ID (compile:K, guard:I, node:NAME, break:I, recompile:I), not '" + sel + "'";
      o.select.push_back(sel.substr(0, colon) + " " + sel.substr(colon + 1));
    } else if (x == "--scale") {
      char* end = nullptr;
      const float f = std::strtof(v, &end);
      if (!v[0] || *end || !std::isfinite(f) || f < 0.5f || f > 4.0f)
        return std::string("--scale must be a number from 0.5 to 4, not '") + v + "'";
      o.scale = f;
    } else if (x == "--size") {
      char tail = 0;
      if (std::sscanf(v, "%dx%d%c", &o.width, &o.height, &tail) != 2 || o.width < 200 || o.height < 150 || o.width > 16384 || o.height > 16384)
        return std::string("--size must be WxH from 200x150 to 16384x16384, not '") + v + "'";
    } else if (x == "--bench-scrub") {
      if (!parse_int(v, n) || n < 1 || n > 1000000) return std::string("--bench-scrub must be an integer from 1 to 1000000, not '") + v + "'";
      o.bench_frames = static_cast<int>(n);
    } else if (x[0] == '-') return "unknown option " + x;
    else if (o.path.empty()) o.path = x;
    else return "unexpected argument '" + x + "' (one trace at a time)";
  }
  if (o.path.empty()) return "a trace file (RUN.dyn) is required";
  return "";
}

}  // namespace dv::cli
