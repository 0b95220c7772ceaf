// The `dynview` executable: headless subcommands over core/ (no Python, no LibTorch).
//   dynview explain RUN.dyn [--json]            graphs, breaks and guards per compile; totals
//   dynview recompiles RUN.dyn [--json]         each recompile: failing guard, value seen, where it was made
//   dynview check RUN.dyn [--max-graph-breaks N] [--max-recompiles N] [--max-graphs N] [--json]
//   dynview stats RUN.dyn [--json]              steps, compiles, bytes per step, chunks, time to open
//   dynview export RUN.dyn --format chrome|json [--steps] [-o OUT]
//   dynview seek RUN.dyn [--random N] [--json]  time to reach N random steps (chunk decode + state)
//   dynview disasm CODE.json [--no-recursive]   print the dis.dis listing of a recorded code object
//                                               (of the version it records: 3.11, 3.12 or 3.13)
//   dynview opcodes [--version 3.12]            print the opcode table (default 3.11)
//   dynview import DIR_OR_LOG -o RUN.dyn        torch.compile's TORCH_TRACE logs -> .dyn (cli_import.cpp)
//   dynview diff BEFORE.dyn AFTER.dyn [--json] [--fail-on new-breaks,new-recompiles,more-graphs]
//   dynview RUN.dyn|DIR_OR_LOG [--screenshot OUT.png | --script FILE | ...]   the viewer window (window.h)
// Exit codes: 0 ok; 1 `check` over budget (or a failed --script command); 2 unreadable or malformed
// input; 3 no display for the viewer; 64 usage error.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/bytecode.h"
#include "core/reports.h"
#include "core/trace.h"
#include "core/code_json.h"
#include "core/opcodes.h"
#include "cli_import.h"
#include "window.h"

namespace {

std::chrono::steady_clock::time_point g_start;

int usage() {
  std::fprintf(stderr,
               "usage: dynview RUN.dyn [--screenshot OUT.png] [--step N] [--select compile:K|guard:I|node:NAME|break:I|recompile:I]\n"
               "                       [--script FILE] [--scale S] [--size WxH] [--bench-scrub N]   the viewer\n"
               "       dynview explain RUN.dyn [--json]\n"
               "       dynview recompiles RUN.dyn [--json]\n"
               "       dynview check RUN.dyn [--max-graph-breaks N] [--max-recompiles N] [--max-graphs N] [--json]\n"
               "       dynview stats RUN.dyn [--json]\n"
               "       dynview export RUN.dyn --format chrome|json [--steps] [-o OUT]\n"
               "       dynview import TORCH_TRACE_DIR_OR_LOG -o RUN.dyn [--json]\n"
               "       dynview diff BEFORE.dyn AFTER.dyn [--json] [--fail-on new-breaks,new-recompiles,more-graphs]\n"
               "       dynview disasm CODE.json [--no-recursive]\n"
               "       dynview opcodes [--version 3.11|3.12|3.13]\n"
               "exit codes: 0 ok, 1 check over budget (diff: a --fail-on condition), 2 unreadable input, 64 usage error\n");
  return 64;
}

struct TraceArgs {
  const char* path = nullptr;
  bool json = false, steps = false;
  std::string format, out;
  dv::reports::Budget budget;
};

bool parse_int(const char* s, int64_t& out) {
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (!s[0] || *end || v < 0) return false;
  out = v;
  return true;
}

// Parses the arguments shared by the trace subcommands; false on a usage error.
bool parse_trace_args(int argc, char** argv, TraceArgs& a, bool allow_budget, bool allow_export) {
  for (int i = 0; i < argc; ++i) {
    const std::string x = argv[i];
    auto value = [&](int64_t& dst) { return i + 1 < argc && parse_int(argv[++i], dst); };
    if (x == "--json") a.json = true;
    else if (allow_budget && x == "--max-graph-breaks") { if (!value(a.budget.max_graph_breaks)) return false; }
    else if (allow_budget && x == "--max-recompiles") { if (!value(a.budget.max_recompiles)) return false; }
    else if (allow_budget && x == "--max-graphs") { if (!value(a.budget.max_graphs)) return false; }
    else if (allow_export && x == "--format" && i + 1 < argc) a.format = argv[++i];
    else if (allow_export && x == "--steps") a.steps = true;
    else if (allow_export && (x == "-o" || x == "--output") && i + 1 < argc) a.out = argv[++i];
    else if (!x.empty() && x[0] == '-') return false;
    else if (!a.path) a.path = argv[i];
    else return false;
  }
  return a.path != nullptr;
}

std::unique_ptr<dv::trace::TraceReader> open_trace(const char* path, double* ms = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = dv::trace::TraceReader::open(path);
  if (ms) *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!r) {
    std::fprintf(stderr, "dynview: %s\n", r.error().message().c_str());
    return nullptr;
  }
  for (const auto& p : (*r)->problems())
    std::fprintf(stderr, "dynview: %s: %s (at byte %llu)\n", path, p.what.c_str(), static_cast<unsigned long long>(p.offset));
  return std::move(*r);
}

void emit(const nlohmann::json& j, bool as_json, const std::string& text) {
  if (as_json) std::printf("%s\n", j.dump(2).c_str());
  else std::fwrite(text.data(), 1, text.size(), stdout);
}

int cmd_report(const std::string& cmd, int argc, char** argv) {
  TraceArgs a;
  if (!parse_trace_args(argc, argv, a, cmd == "check", cmd == "export")) return usage();
  double ms = 0;
  auto r = open_trace(a.path, &ms);
  if (!r) return 2;
  namespace R = dv::reports;
  if (cmd == "explain") {
    auto j = R::explain(*r);
    emit(j, a.json, R::explain_text(j));
  } else if (cmd == "recompiles") {
    auto j = R::recompiles(*r);
    emit(j, a.json, R::recompiles_text(j));
  } else if (cmd == "check") {
    auto j = R::check(*r, a.budget);
    emit(j, a.json, R::check_text(j));
    return j["ok"].get<bool>() ? 0 : 1;
  } else if (cmd == "stats") {
    auto j = R::stats(*r, ms);
    emit(j, a.json, R::stats_text(j));
  } else if (cmd == "export") {
    nlohmann::json j;
    if (a.format == "chrome") {
      j = R::chrome(*r);
    } else if (a.format == "json") {
      auto d = R::dump(*r, a.steps);
      if (!d) {
        std::fprintf(stderr, "dynview: %s\n", d.error().message().c_str());
        return 2;
      }
      j = std::move(*d);
    } else {
      return usage();
    }
    const std::string text = j.dump() + "\n";
    if (a.out.empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      std::ofstream f(a.out, std::ios::binary);
      if (!(f << text)) {
        std::fprintf(stderr, "dynview: cannot write %s\n", a.out.c_str());
        return 2;
      }
    }
  }
  return 0;
}

int cmd_disasm(int argc, char** argv) {
  const char* path = nullptr;
  bool recursive = true;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-recursive")) recursive = false;
    else if (!path) path = argv[i];
    else return usage();
  }
  if (!path) return usage();
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "dynview: cannot open %s\n", path);
    return 2;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  auto co = dv::bc::code_from_json(ss.str());
  if (!co) {
    std::fprintf(stderr, "dynview: %s: %s\n", path, co.error().message().c_str());
    return 2;
  }
  auto text = dv::bc::disassemble(*co, dv::bc::DisOptions{recursive, -1});
  if (!text) {
    std::fprintf(stderr, "dynview: %s: %s\n", path, text.error().message().c_str());
    return 2;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

// Random access: for N random steps, decode the step's chunk and rebuild the frames after it, as a
// viewer jumping there would (no cache between jumps). Prints p50/p99/max in ms.
int cmd_seek(int argc, char** argv) {
  const char* path = nullptr;
  int64_t n = 1000;
  bool as_json = false;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--random") && i + 1 < argc) n = std::strtoll(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--json")) as_json = true;
    else if (!path && argv[i][0] != '-') path = argv[i];
    else return usage();
  }
  if (!path || n <= 0) return usage();
  auto r = open_trace(path);
  if (!r) return 2;
  if (r->total_steps() == 0) {
    std::fprintf(stderr, "dynview: %s has no steps\n", path);
    return 2;
  }
  std::vector<double> ms;
  uint64_t x = 88172645463325252ull, frames = 0;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift: deterministic random steps
    const uint64_t step = x % r->total_steps();
    const auto t0 = std::chrono::steady_clock::now();
    auto c = r->chunk(r->chunk_of(step));
    if (!c) {
      std::fprintf(stderr, "dynview: %s\n", c.error().message().c_str());
      return 2;
    }
    frames += c->state_after(static_cast<size_t>(step - c->first_step)).size();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) { return ms[std::min(ms.size() - 1, static_cast<size_t>(p * static_cast<double>(ms.size())))]; };
  nlohmann::json j{{"jumps", n}, {"p50_ms", pct(0.5)}, {"p99_ms", pct(0.99)}, {"max_ms", ms.back()}, {"frames_seen", frames}};
  if (as_json) std::printf("%s\n", j.dump(2).c_str());
  else std::printf("%lld jumps: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", static_cast<long long>(n), pct(0.5), pct(0.99), ms.back());
  return 0;
}

int cmd_opcodes(int argc, char** argv) {
  dv::bc::Version v = dv::bc::Version::py311;
  if (argc == 2 && !std::strcmp(argv[0], "--version")) {
    auto r = dv::bc::version_from_str(argv[1]);
    if (!r) return usage();
    v = *r;
  } else if (argc != 0) {
    return usage();
  }
  for (int op = 0; op < 256; ++op) {
    const auto& i = dv::bc::op_info(static_cast<uint8_t>(op), v);
    if (!i.name || i.specialized) continue;
    std::printf("%3d %-28s caches=%d\n", op, i.name, i.caches);
  }
  return 0;
}

}  // namespace

// dynview RUN.dyn [--screenshot OUT.png] [--step N] [--select WHAT:ID]... [--script FILE] [--scale S]
//                 [--size WxH] [--bench-scrub N]
int cmd_view(int argc, char** argv) {
  dv::view::ViewerOptions o;
  o.start = g_start;
  for (int i = 0; i < argc; ++i) {
    const std::string x = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    int64_t n = 0;
    if (x == "--screenshot" && (v = next())) o.screenshot = v;
    else if (x == "--script" && (v = next())) o.script = v;
    else if (x == "--step" && (v = next()) && parse_int(v, n)) o.step = n;
    else if (x == "--select" && (v = next())) {
      std::string s = v;
      const size_t colon = s.find(':');
      if (colon == std::string::npos) return usage();
      o.select.push_back(s.substr(0, colon) + " " + s.substr(colon + 1));
    } else if (x == "--scale" && (v = next())) o.scale = std::strtof(v, nullptr);
    else if (x == "--size" && (v = next())) {
      if (std::sscanf(v, "%dx%d", &o.width, &o.height) != 2 || o.width < 200 || o.height < 150) return usage();
    } else if (x == "--bench-scrub" && (v = next()) && parse_int(v, n)) o.bench_frames = static_cast<int>(n);
    else if (x[0] == '-') return usage();
    else if (o.path.empty()) o.path = x;
    else return usage();
  }
  if (o.path.empty()) return usage();
  struct stat st {};
  if (::stat(o.path.c_str(), &st) != 0) {
    // Not a file: a mistyped subcommand is a usage error, a missing trace an input error.
    const bool looks_like_trace = o.path.size() > 4 && o.path.compare(o.path.size() - 4, 4, ".dyn") == 0;
    std::fprintf(stderr, "dynview: %s: %s\n", o.path.c_str(), looks_like_trace ? "cannot open: no such file" : "no such subcommand or trace file");
    if (!looks_like_trace) usage();
    return looks_like_trace ? 2 : 64;
  }
  std::string imported;  // a TORCH_TRACE directory or log: import it first, then view the .dyn
  if (dv::cli::is_torch_trace_input(o.path)) {
    if (int rc = dv::cli::import_for_viewer(o.path, imported)) return rc;
    o.path = imported;
  }
  const int rc = dv::view::run_viewer(o);
  if (!imported.empty()) std::remove(imported.c_str());
  return rc;
}

int main(int argc, char** argv) {
  g_start = std::chrono::steady_clock::now();
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  if (cmd == "disasm") return cmd_disasm(argc - 2, argv + 2);
  if (cmd == "opcodes") return cmd_opcodes(argc - 2, argv + 2);
  if (cmd == "explain" || cmd == "recompiles" || cmd == "check" || cmd == "stats" || cmd == "export")
    return cmd_report(cmd, argc - 2, argv + 2);
  if (cmd == "seek") return cmd_seek(argc - 2, argv + 2);
  if (cmd == "import") return dv::cli::cmd_import(argc - 2, argv + 2);
  if (cmd == "diff") return dv::cli::cmd_diff(argc - 2, argv + 2);
  if (cmd == "--help" || cmd == "-h") {
    usage();
    return 0;
  }
  if (!cmd.empty() && cmd[0] != '-') return cmd_view(argc - 1, argv + 1);
  return usage();
}
