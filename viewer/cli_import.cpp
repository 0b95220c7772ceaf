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
#include <algorithm>
#include <cstring>
#include <filesystem>
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
  // Each side: a trace, or a DYNVIEW_TRACE=dir/ directory (its processes, paired with the other
  // side's by rank when every process has one, else in name order).
  std::vector<std::unique_ptr<trace::TraceReader>> r[2];
  std::vector<std::string> files[2];
  bool multi = false;
  for (int k = 0; k < 2; ++k) {
    std::error_code ec;
    if (std::filesystem::is_directory(paths[k], ec)) {
      multi = true;
      for (const auto& e : std::filesystem::directory_iterator(paths[k], ec))
        if (e.path().extension() == ".dyn") files[k].push_back(e.path().string());
      std::sort(files[k].begin(), files[k].end());
      if (files[k].empty()) {
        std::fprintf(stderr, "dynview: %s: a directory with no .dyn traces in it\n", paths[k].c_str());
        return 2;
      }
    } else {
      files[k].push_back(paths[k]);
    }
    for (const std::string& f : files[k]) {
      auto o = trace::TraceReader::open(f);
      if (!o) {
        std::fprintf(stderr, "dynview: %s\n", o.error().message().c_str());
        return 2;
      }
      for (const auto& p : (*o)->problems())
        std::fprintf(stderr, "dynview: %s: %s (at byte %llu)\n", f.c_str(), p.what.c_str(), static_cast<unsigned long long>(p.offset));
      r[k].push_back(std::move(*o));
    }
  }
  if (!multi) {
    nlohmann::json j = diff::diff(*r[0][0], *r[1][0], fail);
    if (json) std::printf("%s\n", j.dump(2).c_str());
    else {
      const std::string t = diff::diff_text(j);
      std::fwrite(t.data(), 1, t.size(), stdout);
    }
    return j["ok"].get<bool>() ? 0 : 1;
  }
  auto rank = [](const trace::TraceReader& x) {
    auto it = x.meta().find("rank");
    return it != x.meta().end() && it->is_number_integer() ? it->get<int64_t>() : int64_t{-1};
  };
  bool by_rank = true;
  for (int k = 0; k < 2; ++k)
    for (const auto& x : r[k]) by_rank &= rank(*x) >= 0;
  std::vector<std::pair<int, int>> pairs;  // (before index, after index); -1: only on one side
  std::vector<bool> used(r[1].size());
  for (size_t i = 0; i < r[0].size(); ++i) {
    int match = -1;
    for (size_t m = 0; m < r[1].size() && match < 0; ++m)
      if (!used[m] && (by_rank ? rank(*r[0][i]) == rank(*r[1][m]) : m == i)) match = static_cast<int>(m);
    if (match >= 0) used[static_cast<size_t>(match)] = true;
    pairs.emplace_back(static_cast<int>(i), match);
  }
  for (size_t m = 0; m < r[1].size(); ++m)
    if (!used[m]) pairs.emplace_back(-1, static_cast<int>(m));
  nlohmann::json procs = nlohmann::json::array();
  std::string text;
  bool ok = true;
  for (const auto& [b, a] : pairs) {
    const std::string bn = b >= 0 ? files[0][static_cast<size_t>(b)] : "", an = a >= 0 ? files[1][static_cast<size_t>(a)] : "";
    nlohmann::json p{{"before", b >= 0 ? nlohmann::json(bn) : nlohmann::json(nullptr)}, {"after", a >= 0 ? nlohmann::json(an) : nlohmann::json(nullptr)}};
    if (b >= 0 && a >= 0) {
      p["diff"] = diff::diff(*r[0][static_cast<size_t>(b)], *r[1][static_cast<size_t>(a)], fail);
      ok &= p["diff"]["ok"].get<bool>();
      text += "== " + bn + " -> " + an + "\n" + diff::diff_text(p["diff"]);
    } else {
      text += "== " + (b >= 0 ? bn + ": only before" : an + ": only after") + "\n";
    }
    procs.push_back(std::move(p));
  }
  nlohmann::json j{{"processes", procs}, {"ok", ok}, {"paired_by", by_rank ? "rank" : "name order"}};
  if (json) std::printf("%s\n", j.dump(2).c_str());
  else std::fwrite(text.data(), 1, text.size(), stdout);
  return ok ? 0 : 1;
}

}  // namespace dv::cli
