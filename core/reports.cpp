// Reports over a .dyn trace (see reports.h; schemas in core/TRACE.md).
#include "reports.h"

#include "break_ids.h"
#include "json_get.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <set>

namespace dv::reports {

std::string fmt(const char* f, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}
using nlohmann::json;

namespace {


// Compiles with what happened in each, from the trace's events.
json compiles_of(const trace::TraceReader& r) {
  json out = json::array();
  std::set<int64_t> ended;
  for (const json& ev : r.events()) {
    const std::string t = json_get<std::string>(ev, "t", "");
    if (t == "compile_start") {
      out.push_back(json{{"index", json_get<int64_t>(ev, "c", 0)}, {"compile_id", "[" + json_get<std::string>(ev, "id", "?") + "]"},
                         {"qualname", json_get<std::string>(ev, "qualname", "")}, {"filename", json_get<std::string>(ev, "filename", "")},
                         {"firstlineno", json_get<int64_t>(ev, "firstlineno", 0)}, {"reason", json_get<std::string>(ev, "reason", "")},
                         {"first_step", json_get<int64_t>(ev, "step", 0)}, {"start_us", json_get<int64_t>(ev, "us", 0)},
                         {"outcome", "incomplete"}, {"steps", 0}, {"seconds", 0.0}, {"end_us", json_get<int64_t>(ev, "us", 0)},
                         {"graphs", json::array()}, {"breaks", json::array()}, {"guards", json::array()}});
      continue;
    }
    const int64_t c = json_get<int64_t>(ev, "c", -1);
    if (t == "compile_end") ended.insert(c);
    json* comp = nullptr;
    for (auto& x : out)
      if (x["index"] == c) comp = &x;
    if (!comp) continue;
    if (t == "compile_end") {
      (*comp)["outcome"] = json_get<std::string>(ev, "outcome", "");
      (*comp)["steps"] = json_get<int64_t>(ev, "steps", 0);
      (*comp)["seconds"] = json_get<double>(ev, "seconds", 0.0);
      (*comp)["end_us"] = json_get<int64_t>(ev, "us", 0);
    } else if (t == "graph") {
      std::map<std::string, int> counts;
      if (ev.contains("nodes") && ev["nodes"].is_array())
        for (const json& n : ev["nodes"]) {
          const std::string op = json_get<std::string>(n, "op", "");
          if (op == "call_function" || op == "call_method" || op == "call_module") ++counts[json_get<std::string>(n, "target", "?")];
        }
      (*comp)["graphs"].push_back(json{{"ops", json_get<int64_t>(ev, "ops", 0)}, {"op_counts", counts}, {"code", json_get<std::string>(ev, "code", "")}});
    } else if (t == "break") {
      const std::string id = json_get<std::string>(ev, "break_id", "");
      (*comp)["breaks"].push_back(json{{"break_id", id}, {"title", std::string(breaks::title(id))}, {"reason", json_get<std::string>(ev, "message", "")},
                                       {"hint", json_get<std::string>(ev, "hint", "")}, {"filename", json_get<std::string>(ev, "filename", "")},
                                       {"line", json_get<int64_t>(ev, "line", -1)}, {"step", json_get<int64_t>(ev, "step", -1)},
                                       {"user_stack", ev.contains("stack") ? ev["stack"] : json::array()}});
    } else if (t == "guard") {
      (*comp)["guards"].push_back(json{{"index", json_get<int64_t>(ev, "i", -1)}, {"kind", json_get<std::string>(ev, "kind", "")},
                                       {"text", json_get<std::string>(ev, "text", "")}, {"step", json_get<int64_t>(ev, "step", -1)},
                                       {"line", json_get<int64_t>(ev, "line", -1)}, {"filename", json_get<std::string>(ev, "filename", "")}});
    }
  }
  // A compile cut off before its end (the process was killed): its steps are those recorded from
  // its first step to the next compile's first step (or the end of the trace).
  for (size_t i = 0; i < out.size(); ++i) {
    if (ended.count(json_get<int64_t>(out[i], "index", -1))) continue;
    const int64_t first = json_get<int64_t>(out[i], "first_step", 0);
    const int64_t next = i + 1 < out.size() ? json_get<int64_t>(out[i + 1], "first_step", 0) : static_cast<int64_t>(r.total_steps());
    out[i]["steps"] = std::max<int64_t>(0, std::min<int64_t>(next, static_cast<int64_t>(r.total_steps())) - first);
  }
  return out;
}

// The counts every report gives (explain, recompiles, check, stats: one definition).
json counts_of(const trace::TraceReader& r, const json& comps) {
  int64_t graphs = 0, breaks = 0, guards = 0, steps = 0, ops = 0, recompiles = 0, limit_hits = 0, eager = 0, incomplete = 0;
  int64_t hits = 0, eager_runs = 0;
  for (const json& c : comps) {
    graphs += static_cast<int64_t>(c["graphs"].size());
    breaks += static_cast<int64_t>(c["breaks"].size());
    guards += static_cast<int64_t>(c["guards"].size());
    steps += json_get<int64_t>(c, "steps", 0);
    for (const json& g : c["graphs"]) ops += json_get<int64_t>(g, "ops", 0);
    const std::string outcome = json_get<std::string>(c, "outcome", "");
    eager += outcome == "break (eager)" || outcome == "error";
    incomplete += outcome == "incomplete";
  }
  for (const json& ev : r.events()) {
    if (json_get<std::string>(ev, "t", "") != "cache") continue;
    const std::string kind = json_get<std::string>(ev, "kind", "");
    recompiles += kind == "recompile";
    limit_hits += kind == "limit";
    if (kind == "hit") hits += json_get<int64_t>(ev, "count", 0);
    if (kind == "eager") eager_runs += json_get<int64_t>(ev, "count", 0);
  }
  return json{{"compiles", comps.size()}, {"graphs", graphs}, {"graph_breaks", breaks}, {"guards", guards}, {"ops", ops},
              {"steps", steps}, {"recompiles", recompiles}, {"recompile_limit_hits", limit_hits}, {"eager_fallbacks", eager},
              {"incomplete_compiles", incomplete}, {"cache_hits", hits}, {"eager_runs", eager_runs}};
}

json problems_of(const trace::TraceReader& r) {
  json p = json::array();
  for (const auto& x : r.problems()) p.push_back(json{{"what", x.what}, {"offset", x.offset}});
  return p;
}

std::string problems_text(const json& j) {
  std::string s;
  if (j.contains("problems"))
    for (const json& p : j["problems"])
      s += "warning: " + json_get<std::string>(p, "what", "") + " (at byte " + std::to_string(json_get<int64_t>(p, "offset", 0)) + ")\n";
  return s;
}

// "DV0002 (data-dependent control flow)"; an id the table does not know (an older trace's, an
// imported TORCH_TRACE's GBnnnn) is shown as itself, and a break without an id as "(no id)".
std::string id_and_title(const std::string& id) {
  const std::string_view title = breaks::title(id);
  if (id.empty()) return "(no id)";
  return title.empty() ? id : id + " (" + std::string(title) + ")";
}

std::string breaks_by_id_text(const json& j) {
  std::string s;
  if (!j.contains("breaks_by_id") || j["breaks_by_id"].empty()) return s;
  s += "graph breaks by id:\n";
  for (const json& b : j["breaks_by_id"]) {
    const std::string id = json_get<std::string>(b, "break_id", "");
    s += fmt("  %4" PRId64 "  %-8s %s\n", json_get<int64_t>(b, "count", 0), id.empty() ? "(no id)" : id.c_str(),
             json_get<std::string>(b, "title", "").c_str());
  }
  return s;
}

}  // namespace

json breaks_by_id(const json& compiles) {
  std::map<std::string, int64_t> n;
  for (const json& c : compiles)
    if (c.contains("breaks"))
      for (const json& b : c["breaks"]) ++n[json_get<std::string>(b, "break_id", "")];
  return breaks_by_id(n);
}

json breaks_by_id(const std::map<std::string, int64_t>& counts) {
  std::vector<std::pair<std::string, int64_t>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  json out = json::array();
  for (const auto& [id, k] : v) out.push_back(json{{"break_id", id}, {"title", std::string(breaks::title(id))}, {"count", k}});
  return out;
}

json counts(const trace::TraceReader& r) { return counts_of(r, compiles_of(r)); }

json explain(const trace::TraceReader& r) {
  json comps = compiles_of(r);
  json totals = counts_of(r, comps);
  json by_id = breaks_by_id(comps);
  return json{{"compiles", comps}, {"totals", totals}, {"breaks_by_id", by_id}, {"problems", problems_of(r)}};
}

std::string explain_text(const json& j) {
  std::string s = problems_text(j);
  for (const json& c : j["compiles"]) {
    s += fmt("%s %s (%s:%" PRId64 ") -> %s, %" PRId64 " steps, %.1f ms\n", json_get<std::string>(c, "compile_id", "").c_str(),
             json_get<std::string>(c, "qualname", "").c_str(), json_get<std::string>(c, "filename", "").c_str(),
             json_get<int64_t>(c, "firstlineno", 0), json_get<std::string>(c, "outcome", "").c_str(), json_get<int64_t>(c, "steps", 0),
             json_get<double>(c, "seconds", 0) * 1e3);
    const std::string reason = json_get<std::string>(c, "reason", "");
    if (reason != "first call") s += "  why: " + reason + "\n";
    int gi = 0;
    for (const json& g : c["graphs"]) {
      s += fmt("  graph %d: %" PRId64 " ops", gi++, json_get<int64_t>(g, "ops", 0));
      std::string sep = " (";
      for (auto& [name, n] : g["op_counts"].items()) {
        s += sep + name + (n.get<int>() > 1 ? " x" + std::to_string(n.get<int>()) : "");
        sep = ", ";
      }
      s += sep == ", " ? ")\n" : "\n";
    }
    for (const json& b : c["breaks"]) {
      s += "  graph break " + id_and_title(json_get<std::string>(b, "break_id", "")) + ": " + json_get<std::string>(b, "reason", "") + "\n";
      s += fmt("    at %s:%" PRId64 " (step %" PRId64 ")\n", json_get<std::string>(b, "filename", "").c_str(), json_get<int64_t>(b, "line", -1), json_get<int64_t>(b, "step", -1));
      if (!json_get<std::string>(b, "hint", "").empty()) s += "    hint: " + json_get<std::string>(b, "hint", "") + "\n";
    }
    s += fmt("  guards (%zu):\n", c["guards"].size());
    for (const json& g : c["guards"]) s += "    " + json_get<std::string>(g, "kind", "") + ": " + json_get<std::string>(g, "text", "") + "\n";
  }
  s += breaks_by_id_text(j);
  const json& t = j["totals"];
  s += fmt("total: %" PRId64 " compiles, %" PRId64 " graphs, %" PRId64 " graph breaks, %" PRId64 " recompiles, %" PRId64
           " recompile limit hits, %" PRId64 " eager fallbacks, %" PRId64 " guards, %" PRId64 " ops, %" PRId64 " steps\n",
           json_get<int64_t>(t, "compiles", 0), json_get<int64_t>(t, "graphs", 0), json_get<int64_t>(t, "graph_breaks", 0), json_get<int64_t>(t, "recompiles", 0),
           json_get<int64_t>(t, "recompile_limit_hits", 0), json_get<int64_t>(t, "eager_fallbacks", 0),
           json_get<int64_t>(t, "guards", 0), json_get<int64_t>(t, "ops", 0), json_get<int64_t>(t, "steps", 0));
  return s;
}

json recompiles(const trace::TraceReader& r) {
  json comps = compiles_of(r);
  json out = json::array();
  for (const json& ev : r.events()) {
    if (json_get<std::string>(ev, "t", "") != "cache") continue;
    const std::string kind = json_get<std::string>(ev, "kind", "");
    if (kind != "recompile" && kind != "limit") continue;
    const int64_t entry_c = json_get<int64_t>(ev, "entry_c", -1);
    const json* entry = nullptr;
    for (const json& c : comps)
      if (c["index"] == entry_c) entry = &c;
    json failures = json::array();
    const json texts = ev.contains("failures") ? ev["failures"] : json::array();
    const json idx = ev.contains("guards") ? ev["guards"] : json::array();
    // Imported traces (TORCH_TRACE) name each failure's own cache entry: failure_entry_c, failure_guards.
    const json fe = ev.contains("failure_entry_c") ? ev["failure_entry_c"] : json::array();
    const json fg = ev.contains("failure_guards") ? ev["failure_guards"] : json::array();
    for (size_t i = 0; i < texts.size(); ++i) {
      json f{{"failure", texts[i]}, {"guard", nullptr}};
      int64_t gi = i < idx.size() && idx[i].is_number_integer() ? idx[i].get<int64_t>() : -1;
      const json* owner = entry;
      if (i < fe.size() && fe[i].is_number_integer() && i < fg.size() && fg[i].is_number_integer()) {
        owner = nullptr;
        for (const json& c : comps)
          if (c["index"] == fe[i]) owner = &c;
        gi = fg[i].get<int64_t>();
        if (owner) f["entry"] = (*owner)["compile_id"];
      }
      if (owner && gi >= 0)
        for (const json& g : (*owner)["guards"])
          if (g["index"] == gi) f["guard"] = g;
      failures.push_back(f);
    }
    // The compile this recompile caused: the next compile of the same code.
    json caused = nullptr;
    if (const int64_t cc = json_get<int64_t>(ev, "caused_c", -1); cc >= 0)  // imported traces name it
      for (const json& c : comps)
        if (c["index"] == cc) caused = c["compile_id"];
    for (const json& c : comps) {
      if (!caused.is_null()) break;
      if (json_get<int64_t>(c, "start_us", 0) >= json_get<int64_t>(ev, "us", 0) && c["qualname"] == ev.value("qualname", "") && kind == "recompile")
        caused = c["compile_id"];
    }
    out.push_back(json{{"kind", kind}, {"qualname", json_get<std::string>(ev, "qualname", "")}, {"filename", json_get<std::string>(ev, "filename", "")},
                       {"firstlineno", json_get<int64_t>(ev, "firstlineno", 0)}, {"entry", "[" + json_get<std::string>(ev, "entry_id", "?") + "]"},
                       {"compile_id", caused}, {"failures", failures}});
  }
  const json counts = counts_of(r, comps);
  return json{{"recompiles", out}, {"count", out.size()}, {"recompile_count", counts["recompiles"]},
              {"limit_hits", counts["recompile_limit_hits"]}, {"problems", problems_of(r)}};
}

std::string recompiles_text(const json& j) {
  std::string s = problems_text(j);
  for (const json& x : j["recompiles"]) {
    const bool limit = json_get<std::string>(x, "kind", "") == "limit";
    s += (limit ? "recompile limit hit for " : "recompile of ") + json_get<std::string>(x, "qualname", "") + " (" +
         json_get<std::string>(x, "filename", "") + ":" + std::to_string(json_get<int64_t>(x, "firstlineno", 0)) + ")";
    if (!x["compile_id"].is_null()) s += " -> " + x["compile_id"].get<std::string>();
    s += "\n";
    for (const json& f : x["failures"]) {
      s += "  - " + json_get<std::string>(f, "entry", json_get<std::string>(x, "entry", "")) + ": " + json_get<std::string>(f, "failure", "") + "\n";
      if (f["guard"].is_object()) {
        const std::string file = json_get<std::string>(f["guard"], "filename", "");
        s += fmt("      guard %s added at step %" PRId64 ", %s%s%" PRId64 ": %s\n", json_get<std::string>(f["guard"], "kind", "").c_str(),
                 json_get<int64_t>(f["guard"], "step", -1), file.empty() ? "line " : file.c_str(), file.empty() ? "" : ":",
                 json_get<int64_t>(f["guard"], "line", -1), json_get<std::string>(f["guard"], "text", "").c_str());
      }
    }
  }
  s += fmt("%" PRId64 " recompile(s), %" PRId64 " recompile limit hit(s)\n", json_get<int64_t>(j, "recompile_count", 0),
           json_get<int64_t>(j, "limit_hits", 0));
  return s;
}

json check(const trace::TraceReader& r, const Budget& b) {
  const json comps = compiles_of(r);
  const json t = counts_of(r, comps);
  auto item = [&](const char* key, int64_t max) {
    const int64_t value = t[key].get<int64_t>();
    return json{{"value", value}, {"max", max < 0 ? json(nullptr) : json(max)}, {"ok", max < 0 || value <= max}};
  };
  json items{{"graph_breaks", item("graph_breaks", b.max_graph_breaks)}, {"recompiles", item("recompiles", b.max_recompiles)},
             {"graphs", item("graphs", b.max_graphs)}, {"recompile_limit_hits", item("recompile_limit_hits", b.max_limit_hits)},
             {"eager_fallbacks", item("eager_fallbacks", b.max_eager_fallbacks)}};
  bool ok = true;
  for (auto& [k, v] : items.items()) ok &= v["ok"].get<bool>();
  return json{{"ok", ok}, {"checks", items}, {"compiles", t["compiles"]}, {"breaks_by_id", breaks_by_id(comps)}, {"problems", problems_of(r)}};
}

std::string check_text(const json& j) {
  std::string s = problems_text(j);
  for (const char* k : {"graph_breaks", "recompiles", "graphs", "recompile_limit_hits", "eager_fallbacks"}) {
    if (!j["checks"].contains(k)) continue;
    const json& c = j["checks"][k];
    s += fmt("%-21s %6" PRId64, k, c["value"].get<int64_t>());
    if (!c["max"].is_null()) s += fmt("  (max %" PRId64 ")  %s", c["max"].get<int64_t>(), c["ok"].get<bool>() ? "ok" : "OVER BUDGET");
    s += "\n";
  }
  s += breaks_by_id_text(j);
  s += j["ok"].get<bool>() ? "check: ok\n" : "check: FAILED\n";
  return s;
}

json stats(const trace::TraceReader& r, double open_ms) {
  uint64_t values = 0, compressed = 0;
  for (const auto& c : r.chunks()) {
    values += c.h.nvalues;
    compressed += c.h.steps_zsize;
  }
  const json comps = compiles_of(r);
  const json counts = counts_of(r, comps);
  const uint64_t steps = r.total_steps();
  return json{{"version", std::to_string(r.major()) + "." + std::to_string(r.minor())},
              {"steps", steps}, {"compiles", counts["compiles"]}, {"counts", counts}, {"breaks_by_id", breaks_by_id(comps)}, {"chunks", r.chunks().size()}, {"events", r.events().size()},
              {"values", values}, {"file_bytes", r.file_size()},
              {"bytes_per_step", steps ? static_cast<double>(r.file_size()) / static_cast<double>(steps) : 0.0},
              {"step_bytes_per_step", steps ? static_cast<double>(compressed) / static_cast<double>(steps) : 0.0},
              {"footer", r.has_footer()}, {"open_ms", open_ms}, {"meta", r.meta()}, {"problems", problems_of(r)}};
}

std::string stats_text(const json& j) {
  std::string s = problems_text(j);
  s += fmt("format     %s%s\n", json_get<std::string>(j, "version", "").c_str(), j["footer"].get<bool>() ? "" : " (no footer: indexed by scanning)");
  s += fmt("steps      %" PRIu64 "\n", j["steps"].get<uint64_t>());
  s += fmt("compiles   %" PRId64 "\n", j["compiles"].get<int64_t>());
  if (j.contains("counts")) {
    const json& c = j["counts"];
    s += fmt("graphs     %" PRId64 " (%" PRId64 " graph breaks, %" PRId64 " recompiles, %" PRId64 " recompile limit hits, %" PRId64
             " eager fallbacks)\n", json_get<int64_t>(c, "graphs", 0), json_get<int64_t>(c, "graph_breaks", 0), json_get<int64_t>(c, "recompiles", 0),
             json_get<int64_t>(c, "recompile_limit_hits", 0), json_get<int64_t>(c, "eager_fallbacks", 0));
  }
  if (j.contains("breaks_by_id")) {
    const char* label = "breaks     ";
    for (const json& b : j["breaks_by_id"]) {
      s += fmt("%s%" PRId64 " x %s\n", label, json_get<int64_t>(b, "count", 0), id_and_title(json_get<std::string>(b, "break_id", "")).c_str());
      label = "           ";
    }
  }
  if (j.contains("counts"))
    s += fmt("runs       %" PRId64 " cache hits, %" PRId64 " eager runs (calls of frames that run eagerly)\n",
             json_get<int64_t>(j["counts"], "cache_hits", 0), json_get<int64_t>(j["counts"], "eager_runs", 0));
  s += fmt("chunks     %zu\n", static_cast<size_t>(j["chunks"].get<uint64_t>()));
  s += fmt("events     %zu\n", static_cast<size_t>(j["events"].get<uint64_t>()));
  s += fmt("values     %" PRIu64 "\n", j["values"].get<uint64_t>());
  s += fmt("file       %" PRIu64 " bytes, %.2f bytes/step (steps alone %.2f)\n", j["file_bytes"].get<uint64_t>(),
           j["bytes_per_step"].get<double>(), j["step_bytes_per_step"].get<double>());
  s += fmt("open       %.2f ms\n", j["open_ms"].get<double>());
  return s;
}

std::vector<std::string> chunk_problems(const trace::TraceReader& r, size_t k) {
  std::vector<std::string> out;
  if (const std::string why = r.check_chunk_header(k); !why.empty()) out.push_back("chunk " + std::to_string(k) + ": " + why);
  if (auto c = r.chunk(k); !c) out.push_back("chunk " + std::to_string(k) + ": step data is corrupt: " + c.error().message());
  return out;
}

json integrity(const trace::TraceReader& r) {
  json problems = problems_of(r);
  for (size_t k = 0; k < r.chunks().size(); ++k)
    for (const std::string& what : chunk_problems(r, k)) problems.push_back(json{{"what", what}, {"offset", r.chunks()[k].offset}});
  return json{{"complete", r.has_footer()}, {"problems", problems}};
}

json chrome(const trace::TraceReader& r) {
  const json comps = compiles_of(r);
  const int64_t pid = json_get<int64_t>(r.meta(), "pid", 1);
  json evs = json::array();
  evs.push_back(json{{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "dynview"}}}});
  for (const json& c : comps) {
    const int64_t ts = json_get<int64_t>(c, "start_us", 0), end = std::max(json_get<int64_t>(c, "end_us", 0), ts);
    evs.push_back(json{{"ph", "X"}, {"name", json_get<std::string>(c, "qualname", "") + " " + json_get<std::string>(c, "compile_id", "")},
                       {"cat", "compile"}, {"ts", ts}, {"dur", end - ts}, {"pid", pid}, {"tid", 0},
                       {"args", {{"outcome", c["outcome"]}, {"steps", c["steps"]}, {"graphs", c["graphs"].size()},
                                 {"breaks", c["breaks"].size()}, {"guards", c["guards"].size()}, {"reason", c["reason"]}}}});
    for (const json& b : c["breaks"])
      evs.push_back(json{{"ph", "i"}, {"s", "t"}, {"name", "graph break " + json_get<std::string>(b, "break_id", "")}, {"cat", "break"},
                         {"ts", end}, {"pid", pid}, {"tid", 0}, {"args", {{"reason", b["reason"]}, {"line", b["line"]}}}});
  }
  for (const json& ev : r.events()) {
    if (json_get<std::string>(ev, "t", "") != "cache") continue;
    json args{{"qualname", ev.value("qualname", "")}};
    if (ev.contains("count")) args["count"] = ev["count"];
    if (ev.contains("entry_id")) args["entry"] = ev["entry_id"];
    evs.push_back(json{{"ph", "i"}, {"s", "t"}, {"name", "cache " + json_get<std::string>(ev, "kind", "")}, {"cat", "cache"},
                       {"ts", json_get<int64_t>(ev, "us", 0)}, {"pid", pid}, {"tid", 1}, {"args", args}});
  }
  return json{{"traceEvents", evs}, {"displayTimeUnit", "ms"}};
}

Result<json> dump(const trace::TraceReader& r, bool with_steps) {
  json out{{"meta", r.meta()}, {"version", std::to_string(r.major()) + "." + std::to_string(r.minor())},
           {"compiles", compiles_of(r)}, {"events", r.events()}, {"problems", problems_of(r)}, {"total_steps", r.total_steps()}};
  if (with_steps) {
    json steps = json::array(), values = json::array();
    for (size_t k = 0; k < r.chunks().size(); ++k) {
      auto c = r.chunk(k);
      if (!c) return c.error();
      for (size_t i = 0; i < c->size(); ++i)
        steps.push_back(json{{"step", c->first_step + i}, {"compile", c->compile[i]}, {"depth", c->depth[i]}, {"code", c->code[i]},
                             {"offset", c->offset[i]}, {"opcode", c->opcode[i]}, {"arg", c->arg[i] == INT32_MIN ? json(nullptr) : json(c->arg[i])},
                             {"line", c->line[i]}, {"frame_start", c->frame_start[i] != 0}});
      for (const auto& [key, v] : c->values)
        values.push_back(json{{"compile", v.compile}, {"id", v.id}, {"step", v.step}, {"kind", v.kind}, {"repr", v.repr},
                              {"type", v.type}, {"source", v.source}, {"meta", v.meta}, {"node", v.node}});
    }
    out["steps"] = std::move(steps);
    out["values"] = std::move(values);
  }
  return out;
}

}  // namespace dv::reports
