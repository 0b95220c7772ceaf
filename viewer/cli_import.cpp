// The dynview executable's TORCH_TRACE subcommands (kept apart from main.cpp):
//   dynview import DIR_OR_LOG -o RUN.dyn [--json]   torch.compile's structured logs -> a .dyn trace
//   dynview diff BEFORE.dyn AFTER.dyn [--json] [--fail-on new-breaks,new-recompiles,more-graphs]
// and the import that `dynview DIR_OR_LOG` does before opening the viewer.
// Exit codes: 0 ok; 1 `diff --fail-on` found what it was told to fail on; 2 unreadable or malformed
// input (import: the intact records are still written, the message says where the log stopped);
// 64 usage error.
#include "cli_import.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "core/diff.h"
#include "core/torch_trace_import.h"
#include "core/trace.h"

namespace dv::cli {
namespace {

int import_usage() {
  std::fprintf(stderr,
               "usage: dynview import DIR_OR_LOG -o RUN.dyn [--json]\n"
               "       dynview diff BEFORE.dyn AFTER.dyn [--json] [--fail-on new-breaks,new-recompiles,more-graphs]\n");
  return 64;
}

// Imports and reports on stderr; 0 intact, 2 damaged (the prefix is written) or nothing usable.
int run_import(const std::string& src, const std::string& out, bool quiet, nlohmann::json* summary) {
  auto logs = torch_trace::find_logs(src);
  if (!logs) {
    std::fprintf(stderr, "dynview: %s\n", logs.error().message().c_str());
    return 2;
  }
  auto st = torch_trace::import(*logs, out);
  if (!st) {
    std::fprintf(stderr, "dynview: import failed: %s\n", st.error().message().c_str());
    return 2;
  }
  for (const std::string& w : st->warnings) std::fprintf(stderr, "dynview: warning: %s\n", w.c_str());
  for (const std::string& p : st->problems) std::fprintf(stderr, "dynview: %s; the records before it were imported\n", p.c_str());
  if (!quiet)
    std::fprintf(stderr, "dynview: imported %d compile(s), %d graph(s), %d graph break(s), %d recompile(s), %d guard(s) from %d process(es) into %s\n",
                 st->compiles, st->graphs, st->breaks, st->recompiles, st->guards, st->processes, out.c_str());
  if (summary)
    *summary = nlohmann::json{{"output", out},         {"processes", st->processes}, {"compiles", st->compiles},
                              {"graphs", st->graphs},  {"graph_breaks", st->breaks}, {"recompiles", st->recompiles},
                              {"guards", st->guards},  {"records", st->records},     {"kinds", st->kinds},
                              {"unknown", st->unknown}, {"problems", st->problems},  {"logs", st->logs},
                              {"warnings", st->warnings}};
  return st->problems.empty() ? 0 : 2;
}

}  // namespace

int cmd_import(int argc, char** argv) {
  std::string src, out;
  bool json = false;
  for (int i = 0; i < argc; ++i) {
    const std::string x = argv[i];
    if ((x == "-o" || x == "--output") && i + 1 < argc) out = argv[++i];
    else if (x == "--json") json = true;
    else if (!x.empty() && x[0] == '-') return import_usage();
    else if (src.empty()) src = x;
    else return import_usage();
  }
  if (src.empty() || out.empty()) return import_usage();
  nlohmann::json summary;
  const int rc = run_import(src, out, json, json ? &summary : nullptr);
  if (json && !summary.is_null()) std::printf("%s\n", summary.dump(2).c_str());
  return rc;
}

bool is_torch_trace_input(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  if (S_ISDIR(st.st_mode)) return true;
  return torch_trace::looks_like_torch_trace(path);
}

int import_for_viewer(const std::string& src, std::string& dyn_out) {
  const char* tmp = std::getenv("TMPDIR");
  dyn_out = std::string(tmp && *tmp ? tmp : "/tmp") + "/dynview-import-" + std::to_string(::getpid()) + ".dyn";
  const int rc = run_import(src, dyn_out, false, nullptr);
  struct stat st {};
  if (rc != 0 && ::stat(dyn_out.c_str(), &st) != 0) return rc;
  if (rc != 0) std::fprintf(stderr, "dynview: opening what was imported\n");
  return 0;
}

int cmd_diff(int argc, char** argv) {
  std::vector<std::string> paths;
  bool json = false;
  diff::FailOn fail;
  for (int i = 0; i < argc; ++i) {
    const std::string x = argv[i];
    if (x == "--json") json = true;
    else if (x == "--fail-on" && i + 1 < argc) {
      if (!diff::parse_fail_on(argv[++i], fail)) {
        std::fprintf(stderr, "dynview: --fail-on takes a comma-separated list of new-breaks, new-recompiles, more-graphs\n");
        return 64;
      }
    } else if (!x.empty() && x[0] == '-') return import_usage();
    else paths.push_back(x);
  }
  if (paths.size() != 2) return import_usage();
  std::unique_ptr<trace::TraceReader> r[2];
  for (int k = 0; k < 2; ++k) {
    auto o = trace::TraceReader::open(paths[k]);
    if (!o) {
      std::fprintf(stderr, "dynview: %s\n", o.error().message().c_str());
      return 2;
    }
    r[k] = std::move(*o);
    for (const auto& p : r[k]->problems())
      std::fprintf(stderr, "dynview: %s: %s (at byte %llu)\n", paths[k].c_str(), p.what.c_str(), static_cast<unsigned long long>(p.offset));
  }
  nlohmann::json j = diff::diff(*r[0], *r[1], fail);
  if (json) std::printf("%s\n", j.dump(2).c_str());
  else {
    const std::string t = diff::diff_text(j);
    std::fwrite(t.data(), 1, t.size(), stdout);
  }
  return j["ok"].get<bool>() ? 0 : 1;
}

}  // namespace dv::cli
