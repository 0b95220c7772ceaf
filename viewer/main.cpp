// The `dynview` executable: headless subcommands over core/ (no Python, no LibTorch). The usage
// text of each is kHelp below (`dynview SUBCOMMAND --help`); RUN.dyn may be a directory of
// per-process traces (DYNVIEW_TRACE=dir/) for the reports.
//   dynview explain RUN.dyn [--json]            graphs, breaks and guards per compile; totals
//   dynview recompiles RUN.dyn [--json]         each recompile: failing guard, value seen, where it was made
//   dynview check RUN.dyn [--max-graph-breaks N] [--max-recompiles N] [--max-graphs N] ... [--json]
//   dynview stats RUN.dyn [--json]              steps, compiles, bytes per step, chunks, time to open
//   dynview export RUN.dyn --format chrome|json [--steps] [-o OUT]
//   dynview seek RUN.dyn [--random N] [--json]  time to reach N random steps (chunk decode + state)
//   dynview disasm CODE.json [--no-recursive]   print the dis.dis listing of a recorded code object
//                                               (of the version it records: 3.11, 3.12 or 3.13)
//   dynview opcodes [--version 3.12]            print the opcode table (default 3.11)
//   dynview break-ids [--json|--markdown]       the graph-break ids: id, title, default hint
//   dynview import DIR_OR_LOG -o RUN.dyn        torch.compile's TORCH_TRACE logs -> .dyn (cli_import.cpp)
//   dynview diff BEFORE.dyn AFTER.dyn [--json] [--fail-on new-breaks,new-recompiles,more-graphs]
//   dynview RUN.dyn|DIR_OR_LOG [--screenshot OUT.png | --script FILE | ...]   the viewer window (window.h)
// Exit codes: 0 ok; 1 `check` over budget (or a failed --script command; `diff`: a --fail-on condition);
// 2 unreadable, malformed, damaged or incomplete input; 3 no display for the viewer; 64 usage error.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <string_view>
#include <chrono>
#include <filesystem>
#include <vector>

#include "core/break_ids.h"
#include "core/bytecode.h"
#include "core/reports.h"
#include "core/trace.h"
#include "core/code_json.h"
#include "core/opcodes.h"
#include "cli_args.h"
#include "cli_import.h"
#include "window.h"

namespace {

std::chrono::steady_clock::time_point g_start;

int64_t json_int(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}
int64_t json_int(const nlohmann::json& j, const std::string& key) { return json_int(j, key.c_str()); }

constexpr const char* kVersion = "0.1.0";

// Per-subcommand help (printed by `dynview CMD --help` on stdout).
struct Help {
  const char* cmd;
  const char* text;
};
constexpr Help kHelp[] = {
    {"view", "usage: dynview RUN.dyn|DIR [--screenshot OUT.png] [--step N] [--select compile:K|guard:I|node:NAME|break:I|recompile:I]\n"
             "                       [--script FILE] [--scale S] [--size WxH] [--bench-scrub N]\n"
             "  the viewer window; --scale from 0.5 to 4; --size at least 200x150; --script runs commands headless\n"
             "  (dynview --help-script lists them)\n"},
    {"explain", "usage: dynview explain RUN.dyn|DIR [--json]\n"
                "  per compile: graphs with op counts, graph breaks (id, reason, hint, line), guards; totals\n"},
    {"recompiles", "usage: dynview recompiles RUN.dyn|DIR [--json]\n"
                   "  each recompile and recompile-limit hit: the failing guard, the value seen, the step and line that made it\n"},
    {"check", "usage: dynview check RUN.dyn|DIR [--max-graph-breaks N] [--max-recompiles N] [--max-graphs N]\n"
              "                     [--max-limit-hits N] [--max-eager-fallbacks N] [--allow-incomplete] [--json]\n"
              "  CI gate: exit 1 when a count is over its budget (N >= 0); exit 2 when the trace is damaged or\n"
              "  incomplete (no footer: the recording was killed or a write failed) unless --allow-incomplete,\n"
              "  which checks the readable part\n"},
    {"stats", "usage: dynview stats RUN.dyn|DIR [--json] [--no-verify]\n"
              "  steps, compiles, counts, bytes per step, chunks, time to open; every chunk's steps are decoded\n"
              "  to find corrupt data unless --no-verify\n"},
    {"export", "usage: dynview export RUN.dyn|DIR --format chrome|json [--steps] [-o OUT]\n"
               "  chrome: compile timeline for Perfetto; json: everything recorded (--steps: every step and value)\n"},
    {"seek", "usage: dynview seek RUN.dyn|DIR [--random N] [--json]\n  time to reach N (>= 1) random steps\n"},
    {"disasm", "usage: dynview disasm CODE.json [--no-recursive]\n  the dis.dis listing of a recorded code object\n"},
    {"opcodes", "usage: dynview opcodes [--version 3.11|3.12|3.13]\n  the opcode table of a CPython version (default 3.11)\n"},
    {"break-ids", "usage: dynview break-ids [--json | --markdown]\n"
                  "  the graph-break ids (DV0001, ...) with their title and default hint; --markdown: the table of\n"
                  "  docs/graph-breaks.md\n"},
    {"import", "usage: dynview import TORCH_TRACE_DIR_OR_LOG -o RUN.dyn [--json]\n"
               "  torch.compile's structured logs (TORCH_TRACE=DIR) -> a .dyn trace the reports and the viewer read\n"},
    {"diff", "usage: dynview diff BEFORE.dyn|DIR AFTER.dyn|DIR [--json] [--fail-on new-breaks,new-recompiles,more-graphs]\n"
             "  what changed between two runs (recorded or imported; directories: process by process, paired by rank\n"
             "  or name order); exit 1 when a --fail-on condition holds\n"},
};

const char* help_of(const std::string& cmd) {
  for (const Help& h : kHelp)
    if (cmd == h.cmd) return h.text;
  return nullptr;
}

void print_usage(FILE* f) {
  std::fprintf(f, "dynview %s: records and views TorchDynamo-style graph captures\n", kVersion);
  for (const Help& h : kHelp) {
    const char* nl = std::strchr(h.text, '\n');
    std::fprintf(f, "%.*s\n", static_cast<int>(nl - h.text), h.text);
  }
  std::fprintf(f,
               "       dynview --help | --version | --help-script | SUBCOMMAND --help\n"
               "exit codes: 0 ok, 1 check over budget (or a failed --script command), 2 unreadable, malformed or\n"
               "incomplete input, 3 no display for the viewer, 64 usage error\n");
}

int usage() {
  print_usage(stderr);
  return 64;
}

// A usage error that says what is wrong: "dynview check: --max-graphs must be >= 0".
int usage_error(const std::string& cmd, const std::string& what) {
  std::fprintf(stderr, "dynview%s%s: %s\n", cmd.empty() ? "" : " ", cmd.c_str(), what.c_str());
  std::fprintf(stderr, "run 'dynview %s--help' for usage\n", cmd.empty() ? "" : (cmd + " ").c_str());
  return 64;
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

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size() || (n == 2 && c < 0xc2)) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

// Valid UTF-8 whatever the trace holds (a string nlohmann cannot dump would abort).
std::string dump(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

void emit(const nlohmann::json& j, bool as_json, const std::string& text) {
  if (as_json) std::printf("%s\n", dump(j, 2).c_str());
  else std::fwrite(text.data(), 1, text.size(), stdout);
}

// RUN.dyn, or every *.dyn in a directory (DYNVIEW_TRACE=dir/: one trace per process), sorted.
bool trace_paths(const char* path, std::vector<std::string>& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    out.push_back(path);
    return true;
  }
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.path().extension() == ".dyn" && !fs::is_directory(e.path(), ec)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  if (out.empty()) std::fprintf(stderr, "dynview: %s: a directory with no .dyn traces in it\n", path);
  return !out.empty();
}

// Sums the counts of per-process reports (same keys) into one.
void add_counts(nlohmann::json& into, const nlohmann::json& from) {
  for (auto& [k, v] : from.items())
    if (v.is_number_integer()) into[k] = json_int(into, k) + v.get<int64_t>();
}

int cmd_report(const std::string& cmd, int argc, char** argv) {
  dv::cli::TraceArgs a;
  if (const std::string err = dv::cli::parse_trace_args(cmd, argc, argv, a); !err.empty()) return usage_error(cmd, err);
  std::vector<std::string> paths;
  if (!trace_paths(a.path, paths)) return 2;
  namespace R = dv::reports;
  const bool multi = paths.size() > 1 || std::string(a.path) != paths[0];
  nlohmann::json procs = nlohmann::json::array(), totals = nlohmann::json::object(), chrome_events = nlohmann::json::array();
  std::string text;
  bool damaged = false;
  for (const std::string& path : paths) {
    double ms = 0;
    auto r = open_trace(path.c_str(), &ms);
    if (!r) return 2;
    nlohmann::json j;
    std::string t;
    // check refuses a damaged or cut-off trace; explain and stats report corrupt step data too.
    if (cmd == "check" || cmd == "explain" || (cmd == "stats" && a.verify)) {
      const nlohmann::json integ = R::integrity(*r);
      const bool incomplete = !integ["complete"].get<bool>();
      for (size_t k = r->problems().size(); k < integ["problems"].size(); ++k)  // the reader's own were said at open
        std::fprintf(stderr, "dynview: %s: %s (at byte %llu)\n", path.c_str(), integ["problems"][k]["what"].get<std::string>().c_str(),
                     static_cast<unsigned long long>(integ["problems"][k]["offset"].get<uint64_t>()));
      if (cmd == "check" && (incomplete || !integ["problems"].empty())) {
        damaged = true;
        if (incomplete)
          std::fprintf(stderr, "dynview check: %s is incomplete: it has no footer (the recording process was killed, is still running, or a write failed); "
                               "the readable part ends at byte %llu\n", path.c_str(), static_cast<unsigned long long>(r->file_size()));
        if (!integ["problems"].empty())
          std::fprintf(stderr, "dynview check: %s is damaged: %s (at byte %llu)\n", path.c_str(), integ["problems"][0]["what"].get<std::string>().c_str(),
                       static_cast<unsigned long long>(integ["problems"][0]["offset"].get<uint64_t>()));
      }
      j["_integrity"] = integ;
    }
    nlohmann::json integ = j.contains("_integrity") ? j["_integrity"] : nlohmann::json();
    if (cmd == "explain") {
      j = R::explain(*r);
      j["problems"] = integ["problems"];
      t = R::explain_text(j);
      add_counts(totals, j["totals"]);
    } else if (cmd == "recompiles") {
      j = R::recompiles(*r);
      t = R::recompiles_text(j);
      add_counts(totals, nlohmann::json{{"count", j["count"]}, {"recompile_count", j["recompile_count"]}, {"limit_hits", j["limit_hits"]}});
    } else if (cmd == "check") {
      j = R::check(*r, dv::reports::Budget{});  // the budget is applied to the sum over processes below
      j["problems"] = integ["problems"];
      j["complete"] = integ["complete"];
      nlohmann::json vals;
      for (auto& [k, v] : j["checks"].items()) vals[k] = v["value"];
      vals["compiles"] = j["compiles"];
      add_counts(totals, vals);
    } else if (cmd == "stats") {
      j = R::stats(*r, ms);
      if (!integ.is_null()) j["problems"] = integ["problems"];
      j["verified"] = !integ.is_null();
      t = R::stats_text(j);
      add_counts(totals, j["counts"]);
    } else if (cmd == "export") {
      if (a.format == "chrome") {
        j = R::chrome(*r);
        for (auto& e : j["traceEvents"]) chrome_events.push_back(e);
      } else {
        auto d = R::dump(*r, a.steps);
        if (!d) {
          std::fprintf(stderr, "dynview: %s: %s\n", path.c_str(), d.error().message().c_str());
          return 2;
        }
        j = std::move(*d);
      }
    }
    if (multi) {
      const int64_t pid = json_int(r->meta(), "pid");
      text += "== " + path + " (pid " + std::to_string(pid) + ")\n" + t;
      procs.push_back(nlohmann::json{{"path", path}, {"pid", pid}, {"report", std::move(j)}});
    } else {
      text = t;
      procs.push_back(std::move(j));
    }
  }
  if (cmd == "check") {
    if (damaged && !a.allow_incomplete) {
      std::fprintf(stderr, "dynview check: refused: the trace is not whole; pass --allow-incomplete to check its readable part\n");
      return 2;
    }
    const dv::reports::Budget& b = a.budget;
    const std::pair<const char*, int64_t> items[] = {{"graph_breaks", b.max_graph_breaks}, {"recompiles", b.max_recompiles}, {"graphs", b.max_graphs},
                                                     {"recompile_limit_hits", b.max_limit_hits}, {"eager_fallbacks", b.max_eager_fallbacks}};
    nlohmann::json checks;
    bool ok = true;
    for (const auto& [k, max] : items) {
      const int64_t v = json_int(totals, k);
      checks[k] = nlohmann::json{{"value", v}, {"max", max < 0 ? nlohmann::json(nullptr) : nlohmann::json(max)}, {"ok", max < 0 || v <= max}};
      ok &= max < 0 || v <= max;
    }
    nlohmann::json problems = nlohmann::json::array();
    for (const auto& p : procs) {
      const nlohmann::json& rep = multi ? p["report"] : p;
      for (const auto& x : rep["problems"]) problems.push_back(x);
    }
    std::map<std::string, int64_t> by_id;  // graph breaks by id, summed over processes
    for (const auto& p : procs)
      for (const auto& b : (multi ? p["report"] : p).value("breaks_by_id", nlohmann::json::array())) by_id[b["break_id"].get<std::string>()] += b["count"].get<int64_t>();
    nlohmann::json j{{"ok", ok}, {"checks", checks}, {"compiles", json_int(totals, "compiles")}, {"breaks_by_id", R::breaks_by_id(by_id)},
                     {"problems", problems}, {"complete", !damaged}};
    if (multi) j["processes"] = procs;
    emit(j, a.json, (multi ? std::to_string(paths.size()) + " processes\n" : std::string()) + R::check_text(j));
    return ok ? 0 : 1;
  }
  if (cmd == "export") {
    nlohmann::json j = !multi ? procs[0]
                       : a.format == "chrome" ? nlohmann::json{{"traceEvents", chrome_events}, {"displayTimeUnit", "ms"}}
                                              : nlohmann::json{{"processes", procs}};
    const std::string out = dump(j) + "\n";
    if (a.out.empty()) {
      std::fwrite(out.data(), 1, out.size(), stdout);
    } else {
      std::ofstream f(a.out, std::ios::binary);
      if (!(f << out)) {
        std::fprintf(stderr, "dynview: cannot write %s\n", a.out.c_str());
        return 2;
      }
    }
    return 0;
  }
  if (!multi) {
    emit(procs[0], a.json, text);
  } else {
    nlohmann::json j{{"processes", procs}, {"totals", totals}};
    std::string sum = std::to_string(paths.size()) + " processes:";
    for (auto& [k, v] : totals.items()) sum += " " + k + " " + std::to_string(v.get<int64_t>()) + ",";
    sum.back() = '\n';
    emit(j, a.json, text + sum);
  }
  return 0;
}

// The graph-break table (core/break_ids.inc) as text, JSON or the Markdown of docs/graph-breaks.md.
int cmd_break_ids(int argc, char** argv) {
  std::string format = "text";
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json")) format = "json";
    else if (!std::strcmp(argv[i], "--markdown")) format = "markdown";
    else return usage_error("break-ids", std::string("unexpected argument '") + argv[i] + "'");
  }
  if (format == "markdown") {
    std::fputs(dv::breaks::markdown_table().c_str(), stdout);
  } else if (format == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& b : dv::breaks::table()) j.push_back({{"id", b.id}, {"title", b.title}, {"hint", b.hint}});
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& b : dv::breaks::table())
      std::printf("%.*s  %.*s\n        hint: %.*s\n", static_cast<int>(b.id.size()), b.id.data(), static_cast<int>(b.title.size()), b.title.data(),
                  static_cast<int>(b.hint.size()), b.hint.data());
  }
  return 0;
}

int cmd_disasm(int argc, char** argv) {
  const char* path = nullptr;
  bool recursive = true;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-recursive")) recursive = false;
    else if (argv[i][0] == '-') return usage_error("disasm", std::string("unknown option ") + argv[i]);
    else if (!path) path = argv[i];
    else return usage_error("disasm", std::string("unexpected argument '") + argv[i] + "'");
  }
  if (!path) return usage_error("disasm", "a code object file (CODE.json) is required");
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
    if (!std::strcmp(argv[i], "--random")) {
      if (i + 1 >= argc || !dv::cli::parse_int(argv[++i], n) || n < 1 || n > 100000000)
        return usage_error("seek", "--random needs an integer from 1 to 100000000");
    } else if (!std::strcmp(argv[i], "--json")) as_json = true;
    else if (argv[i][0] == '-') return usage_error("seek", std::string("unknown option ") + argv[i]);
    else if (!path) path = argv[i];
    else return usage_error("seek", std::string("unexpected argument '") + argv[i] + "'");
  }
  if (!path) return usage_error("seek", "a trace file (RUN.dyn) is required");
  std::vector<std::string> paths;  // a directory: its processes' steps one after another
  if (!trace_paths(path, paths)) return 2;
  std::vector<std::unique_ptr<dv::trace::TraceReader>> rs;
  uint64_t total = 0;
  for (const std::string& p : paths) {
    rs.push_back(open_trace(p.c_str()));
    if (!rs.back()) return 2;
    total += rs.back()->total_steps();
  }
  if (total == 0) {
    std::fprintf(stderr, "dynview: %s has no steps\n", path);
    return 2;
  }
  std::vector<double> ms;
  uint64_t x = 88172645463325252ull, frames = 0;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift: deterministic random steps
    uint64_t step = x % total;
    size_t p = 0;
    while (step >= rs[p]->total_steps()) step -= rs[p++]->total_steps();
    const dv::trace::TraceReader* r = rs[p].get();
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
    if (!r) return usage_error("opcodes", std::string("unknown version '") + argv[1] + "' (3.11, 3.12 or 3.13)");
    v = *r;
  } else if (argc != 0) {
    return usage_error("opcodes", "takes only --version 3.11|3.12|3.13");
  }
  for (int op = 0; op < 256; ++op) {
    const auto& i = dv::bc::op_info(static_cast<uint8_t>(op), v);
    if (!i.name || i.specialized) continue;
    std::printf("%3d %-28s caches=%d\n", op, i.name, i.caches);
  }
  return 0;
}

}  // namespace

constexpr const char* kScriptHelp =
    "dynview --script FILE: one command a line ('#' starts a comment); after each, one JSON line\n"
    "{\"command\", \"state\", \"error\"?} on stdout; exit 1 when a command failed, 64 for an unreadable script.\n"
    "  goto N | step N                  cursor to global step N\n"
    "  key K [TIMES]                    Left Right Shift+Left Shift+Right Alt+Left Alt+Right Home End\n"
    "                                   Ctrl+B F3 Shift+F3 (TIMES 1 to 1000000); 'key Ctrl+G N' goes to step N\n"
    "  click compile|guard|break|recompile I   select by index (from 0; out of range is an error)\n"
    "  click node NAME|I                node by name (in the selected compile) or index\n"
    "  click stack SLOT | local NAME    follow a value on the stack (0 = bottom) or a local\n"
    "  click timeline F                 fraction F (0..1) of the selected compile\n"
    "  back | forward                   history\n"
    "  bookmark | next-bookmark | prev-bookmark\n"
    "  search TEXT | search-next | search-prev\n"
    "  tab NAME                         the lower-right tab; fxtab nodes|code: the FX pane's tab\n"
    "  zoom F                           FX graph zoom factor (0 < F <= 64)\n"
    "  screenshot OUT.png               render and write a PNG\n"
    "  print | frame                    print the state only\n";

// dynview RUN.dyn [--screenshot OUT.png] [--step N] [--select WHAT:ID]... [--script FILE] [--scale S]
//                 [--size WxH] [--bench-scrub N]
int cmd_view(int argc, char** argv) {
  dv::view::ViewerOptions o;
  o.start = g_start;
  if (const std::string err = dv::cli::parse_view_args(argc, argv, o); !err.empty()) return usage_error("", err);
  struct stat st {};
  if (::stat(o.path.c_str(), &st) != 0) {
    // Not a file: a mistyped subcommand is a usage error, a missing trace an input error.
    const bool looks_like_trace = o.path.size() > 4 && o.path.compare(o.path.size() - 4, 4, ".dyn") == 0;
    if (!looks_like_trace) return usage_error("", "no such subcommand or trace file '" + o.path + "'");
    std::fprintf(stderr, "dynview: %s: cannot open: no such file\n", o.path.c_str());
    return 2;
  }
  // DYNVIEW_TRACE=dir/ (a directory with .dyn traces, one per process) opens as one trace, process ->
  // code object -> compile; any other directory is a TORCH_TRACE log directory (imported below).
  bool dyn_dir = false;
  if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(o.path, ec)) dyn_dir |= e.path().extension() == ".dyn";
  }
  if (!o.script.empty()) {  // a script that is not text is refused before anything runs
    std::ifstream in(o.script, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "dynview: --script %s: cannot read it\n", o.script.c_str());
      return 64;
    }
    std::string line;
    for (int no = 1; std::getline(in, line); ++no)
      if (!valid_utf8(line)) {
        std::fprintf(stderr, "dynview: --script %s: line %d is not valid UTF-8 text\n", o.script.c_str(), no);
        return 64;
      }
  }
  std::string imported;  // a TORCH_TRACE directory or log: import it first, then view the .dyn
  if (!dyn_dir && dv::cli::is_torch_trace_input(o.path)) {
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
  if (cmd == "--help" || cmd == "-h") {
    print_usage(stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("dynview %s (trace format %u.%u)\n", kVersion, dv::trace::kMajor, dv::trace::kMinor);
    return 0;
  }
  if (cmd == "--help-script") {
    std::fputs(kScriptHelp, stdout);
    return 0;
  }
  if (const char* h = help_of(cmd); h && cmd != "view") {
    for (int i = 2; i < argc; ++i)
      if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
        std::fputs(h, stdout);
        return 0;
      }
  }
  if (cmd == "disasm") return cmd_disasm(argc - 2, argv + 2);
  if (cmd == "opcodes") return cmd_opcodes(argc - 2, argv + 2);
  if (cmd == "break-ids") return cmd_break_ids(argc - 2, argv + 2);
  if (cmd == "explain" || cmd == "recompiles" || cmd == "check" || cmd == "stats" || cmd == "export")
    return cmd_report(cmd, argc - 2, argv + 2);
  if (cmd == "seek") return cmd_seek(argc - 2, argv + 2);
  if (cmd == "import") return dv::cli::cmd_import(argc - 2, argv + 2);
  if (cmd == "diff") return dv::cli::cmd_diff(argc - 2, argv + 2);
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(help_of("view"), stdout);
      return 0;
    }
  if (!cmd.empty() && cmd[0] != '-') return cmd_view(argc - 1, argv + 1);
  return usage_error("", "unknown option " + cmd);
}
