// Trace diff (see diff.h; schema in core/TRACE.md). Built on reports::explain of each trace.
#include "diff.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "json_get.h"
#include "reports.h"

namespace dv::diff {
using nlohmann::json;

namespace {

using Key = std::tuple<std::string, std::string, int64_t>;  // filename, qualname, firstlineno

struct CodeSide {
  int64_t compiles = 0, graphs = 0, recompiles = 0, ops = 0;
  double seconds = 0;
  std::vector<json> breaks;                 // {reason, line, break_id, filename}
  std::vector<std::string> reasons;         // recompile reasons
  std::set<std::string> guards;             // guard texts
  std::map<std::string, int64_t> op_counts;
};

// A break reason's title and explanation (TORCH_TRACE: "Failed to trace builtin operator\n
// Explanation: ... `print` ..."): what diff matches breaks on; hints and context are left out.
std::string reason_key(const std::string& r) {
  std::string key = r.substr(0, r.find('\n'));
  const size_t ex = r.find("\n  Explanation: ");
  if (ex != std::string::npos && r.find('\n') == ex) key += ": " + r.substr(ex + 16, r.find('\n', ex + 1) - ex - 16);
  return key;
}

std::map<Key, CodeSide> by_code(const json& explain) {
  std::map<Key, CodeSide> out;
  for (const json& c : explain["compiles"]) {
    CodeSide& s = out[{json_get<std::string>(c, "filename", ""), json_get<std::string>(c, "qualname", ""), json_get<int64_t>(c, "firstlineno", 0)}];
    ++s.compiles;
    s.graphs += static_cast<int64_t>(c["graphs"].size());
    s.seconds += json_get<double>(c, "seconds", 0.0);
    const std::string reason = json_get<std::string>(c, "reason", "");
    if (reason != "first call") ++s.recompiles, s.reasons.push_back(reason);
    for (const json& g : c["graphs"]) {
      s.ops += json_get<int64_t>(g, "ops", 0);
      if (g.contains("op_counts"))
        for (auto& [k, v] : g["op_counts"].items()) s.op_counts[k] += v.get<int64_t>();
    }
    for (const json& b : c["breaks"]) {
      // a break met again by a recompile of the same code is the same break
      const std::string key = reason_key(json_get<std::string>(b, "reason", ""));
      const int64_t line = json_get<int64_t>(b, "line", -1);
      if (std::any_of(s.breaks.begin(), s.breaks.end(), [&](const json& o) { return o["reason"] == key && o["line"] == line; })) continue;
      s.breaks.push_back(json{{"reason", reason_key(json_get<std::string>(b, "reason", ""))}, {"line", json_get<int64_t>(b, "line", -1)},
                              {"break_id", json_get<std::string>(b, "break_id", "")}, {"filename", json_get<std::string>(b, "filename", "")}});
    }
    for (const json& g : c["guards"]) s.guards.insert(json_get<std::string>(g, "kind", "") + ": " + json_get<std::string>(g, "text", ""));
  }
  return out;
}

json num(double b, double a) { return json{{"before", b}, {"after", a}, {"delta", a - b}}; }
json num(int64_t b, int64_t a) { return json{{"before", b}, {"after", a}, {"delta", a - b}}; }

using reports::fmt;

json side_summary(const trace::TraceReader& r, const json& e) {
  const json& t = e["totals"];
  double secs = 0;
  for (const json& c : e["compiles"]) secs += json_get<double>(c, "seconds", 0.0);
  return json{{"source", json_get<std::string>(r.meta(), "source", "dynview")}, {"compiles", t["compiles"]}, {"graphs", t["graphs"]},
              {"graph_breaks", t["graph_breaks"]}, {"recompiles", t["recompiles"]}, {"guards", t["guards"]}, {"ops", t["ops"]},
              {"compile_seconds", secs}};
}

}  // namespace

bool parse_fail_on(const std::string& list, FailOn& out) {
  std::stringstream ss(list);
  std::string x;
  bool any = false;
  while (std::getline(ss, x, ',')) {
    if (x == "new-breaks") out.new_breaks = true;
    else if (x == "new-recompiles") out.new_recompiles = true;
    else if (x == "more-graphs") out.more_graphs = true;
    else return false;
    any = true;
  }
  return any;
}

json diff(const trace::TraceReader& before, const trace::TraceReader& after, const FailOn& fail) {
  const json eb = reports::explain(before), ea = reports::explain(after);
  std::map<Key, CodeSide> b = by_code(eb), a = by_code(ea);
  // A function that moved (lines added above it) keeps its file and name: match it when unique.
  for (auto it = a.begin(); it != a.end();) {
    if (b.count(it->first)) {
      ++it;
      continue;
    }
    const auto& [file, name, line] = it->first;
    std::vector<Key> cands, acands;
    for (const auto& [k, v] : b)
      if (std::get<0>(k) == file && std::get<1>(k) == name && !a.count(k)) cands.push_back(k);
    for (const auto& [k, v] : a)
      if (std::get<0>(k) == file && std::get<1>(k) == name && !b.count(k)) acands.push_back(k);
    if (cands.size() == 1 && acands.size() == 1) {
      CodeSide moved = std::move(b[cands[0]]);
      b.erase(cands[0]);
      b[it->first] = std::move(moved);
    }
    ++it;
  }
  std::set<Key> keys;
  for (const auto& [k, v] : b) keys.insert(k);
  for (const auto& [k, v] : a) keys.insert(k);
  json codes = json::array();
  int64_t new_breaks = 0, gone_breaks = 0, moved_breaks = 0, guards_added = 0, guards_removed = 0, more_recompiles = 0;
  json new_reasons_all = json::array();
  static const CodeSide empty;
  for (const Key& k : keys) {
    const CodeSide& x = b.count(k) ? b.at(k) : empty;
    const CodeSide& y = a.count(k) ? a.at(k) : empty;
    // breaks: same reason and line = unchanged; same reason elsewhere = moved; else new / gone
    std::vector<json> bb = x.breaks, ab = y.breaks;
    json nb = json::array(), gb = json::array(), mb = json::array();
    for (size_t i = 0; i < ab.size();) {
      auto m = std::find_if(bb.begin(), bb.end(), [&](const json& o) { return o["reason"] == ab[i]["reason"] && o["line"] == ab[i]["line"]; });
      if (m != bb.end()) {
        bb.erase(m);
        ab.erase(ab.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    for (const json& n : ab) {
      auto m = std::find_if(bb.begin(), bb.end(), [&](const json& o) { return o["reason"] == n["reason"]; });
      if (m != bb.end()) {
        mb.push_back(json{{"reason", n["reason"]}, {"break_id", n["break_id"]}, {"from_line", (*m)["line"]}, {"to_line", n["line"]}});
        bb.erase(m);
      } else {
        nb.push_back(n);
      }
    }
    for (const json& g : bb) gb.push_back(g);
    json added = json::array(), removed = json::array();
    for (const std::string& g : y.guards)
      if (!x.guards.count(g)) added.push_back(g);
    for (const std::string& g : x.guards)
      if (!y.guards.count(g)) removed.push_back(g);
    json new_reasons = json::array(), gone_reasons = json::array();
    for (const std::string& r : y.reasons)
      if (std::find(x.reasons.begin(), x.reasons.end(), r) == x.reasons.end()) new_reasons.push_back(r);
    for (const std::string& r : x.reasons)
      if (std::find(y.reasons.begin(), y.reasons.end(), r) == y.reasons.end()) gone_reasons.push_back(r);
    json ops_changed = json::object();
    std::set<std::string> targets;
    for (const auto& [t, n] : x.op_counts) targets.insert(t);
    for (const auto& [t, n] : y.op_counts) targets.insert(t);
    for (const std::string& t : targets) {
      const int64_t u = x.op_counts.count(t) ? x.op_counts.at(t) : 0, v = y.op_counts.count(t) ? y.op_counts.at(t) : 0;
      if (u != v) ops_changed[t] = json{{"before", u}, {"after", v}};
    }
    const bool changed = !nb.empty() || !gb.empty() || !mb.empty() || x.graphs != y.graphs || x.recompiles != y.recompiles ||
                         !added.empty() || !removed.empty() || x.ops != y.ops || !new_reasons.empty() || !gone_reasons.empty() ||
                         !b.count(k) || !a.count(k);
    new_breaks += static_cast<int64_t>(nb.size());
    gone_breaks += static_cast<int64_t>(gb.size());
    moved_breaks += static_cast<int64_t>(mb.size());
    guards_added += static_cast<int64_t>(added.size());
    guards_removed += static_cast<int64_t>(removed.size());
    if (y.recompiles > x.recompiles) more_recompiles += y.recompiles - x.recompiles;
    for (const json& r : new_reasons) new_reasons_all.push_back(r);
    codes.push_back(json{{"filename", std::get<0>(k)}, {"qualname", std::get<1>(k)}, {"firstlineno", std::get<2>(k)},
                         {"status", !b.count(k) ? "new" : !a.count(k) ? "gone" : "both"}, {"changed", changed},
                         {"compiles", num(x.compiles, y.compiles)}, {"graphs", num(x.graphs, y.graphs)},
                         {"breaks", {{"before", x.breaks.size()}, {"after", y.breaks.size()}, {"new", nb}, {"gone", gb}, {"moved", mb}}},
                         {"recompiles", {{"before", x.recompiles}, {"after", y.recompiles}, {"delta", y.recompiles - x.recompiles},
                                         {"new_reasons", new_reasons}, {"gone_reasons", gone_reasons}}},
                         {"guards", {{"before", x.guards.size()}, {"after", y.guards.size()}, {"added", added}, {"removed", removed}}},
                         {"ops", {{"before", x.ops}, {"after", y.ops}, {"delta", y.ops - x.ops}, {"changed", ops_changed}}},
                         {"compile_seconds", num(x.seconds, y.seconds)}});
  }
  const json sb = side_summary(before, eb), sa = side_summary(after, ea);
  json totals{{"compiles", num(sb["compiles"].get<int64_t>(), sa["compiles"].get<int64_t>())},
              {"graphs", num(sb["graphs"].get<int64_t>(), sa["graphs"].get<int64_t>())},
              {"graph_breaks", num(sb["graph_breaks"].get<int64_t>(), sa["graph_breaks"].get<int64_t>())},
              {"new_breaks", new_breaks}, {"gone_breaks", gone_breaks}, {"moved_breaks", moved_breaks},
              {"recompiles", num(sb["recompiles"].get<int64_t>(), sa["recompiles"].get<int64_t>())},
              {"new_recompiles", more_recompiles}, {"new_recompile_reasons", new_reasons_all},
              {"guards_added", guards_added}, {"guards_removed", guards_removed},
              {"ops", num(sb["ops"].get<int64_t>(), sa["ops"].get<int64_t>())},
              {"compile_seconds", num(sb["compile_seconds"].get<double>(), sa["compile_seconds"].get<double>())}};
  json fail_on = json::array(), failed = json::array();
  if (fail.new_breaks) {
    fail_on.push_back("new-breaks");
    if (new_breaks > 0) failed.push_back("new-breaks");
  }
  if (fail.new_recompiles) {
    fail_on.push_back("new-recompiles");
    if (more_recompiles > 0) failed.push_back("new-recompiles");
  }
  if (fail.more_graphs) {
    fail_on.push_back("more-graphs");
    if (sa["graphs"].get<int64_t>() > sb["graphs"].get<int64_t>()) failed.push_back("more-graphs");
  }
  json problems = json::array();
  for (const auto* r : {&before, &after})
    for (const auto& p : r->problems()) problems.push_back(json{{"trace", r == &before ? "before" : "after"}, {"what", p.what}, {"offset", p.offset}});
  return json{{"before", sb}, {"after", sa}, {"code_objects", codes}, {"totals", totals},
              {"fail_on", fail_on}, {"failed", failed}, {"ok", failed.empty()}, {"problems", problems}};
}

std::string diff_text(const json& j) {
  std::string s;
  for (const json& c : j["code_objects"]) {
    if (!c["changed"].get<bool>()) continue;
    const std::string status = c["status"].get<std::string>();
    s += fmt("%s (%s:%" PRId64 ")%s\n", c["qualname"].get<std::string>().c_str(), c["filename"].get<std::string>().c_str(),
             c["firstlineno"].get<int64_t>(), status == "new" ? "  [new]" : status == "gone" ? "  [gone]" : "");
    auto line = [&](const char* what, const json& n) {
      if (n["before"] != n["after"]) s += fmt("  %-10s %s -> %s\n", what, n["before"].dump().c_str(), n["after"].dump().c_str());
    };
    line("graphs", c["graphs"]);
    line("breaks", c["breaks"]);
    line("recompiles", c["recompiles"]);
    line("ops", c["ops"]);
    for (const json& b : c["breaks"]["new"])
      s += fmt("  + break at line %" PRId64 ": %s\n", b["line"].get<int64_t>(), b["reason"].get<std::string>().c_str());
    for (const json& b : c["breaks"]["gone"])
      s += fmt("  - break at line %" PRId64 ": %s\n", b["line"].get<int64_t>(), b["reason"].get<std::string>().c_str());
    for (const json& b : c["breaks"]["moved"])
      s += fmt("  ~ break moved from line %" PRId64 " to %" PRId64 ": %s\n", b["from_line"].get<int64_t>(), b["to_line"].get<int64_t>(),
               b["reason"].get<std::string>().c_str());
    for (const json& r : c["recompiles"]["new_reasons"]) s += "  + recompile: " + r.get<std::string>() + "\n";
    for (const json& r : c["recompiles"]["gone_reasons"]) s += "  - recompile: " + r.get<std::string>() + "\n";
    const size_t na = c["guards"]["added"].size(), nr = c["guards"]["removed"].size();
    if (na || nr) s += fmt("  guards     +%zu -%zu\n", na, nr);
    const json& cs = c["compile_seconds"];
    s += fmt("  compile    %.1f ms -> %.1f ms\n", cs["before"].get<double>() * 1e3, cs["after"].get<double>() * 1e3);
  }
  const json& t = j["totals"];
  s += fmt("total: graphs %" PRId64 " -> %" PRId64 ", graph breaks %" PRId64 " -> %" PRId64 " (%" PRId64 " new, %" PRId64 " gone, %" PRId64
           " moved), recompiles %" PRId64 " -> %" PRId64 ", guards +%" PRId64 " -%" PRId64 ", ops %" PRId64 " -> %" PRId64 ", compile %.1f ms -> %.1f ms\n",
           t["graphs"]["before"].get<int64_t>(), t["graphs"]["after"].get<int64_t>(), t["graph_breaks"]["before"].get<int64_t>(),
           t["graph_breaks"]["after"].get<int64_t>(), t["new_breaks"].get<int64_t>(), t["gone_breaks"].get<int64_t>(),
           t["moved_breaks"].get<int64_t>(), t["recompiles"]["before"].get<int64_t>(), t["recompiles"]["after"].get<int64_t>(),
           t["guards_added"].get<int64_t>(), t["guards_removed"].get<int64_t>(), t["ops"]["before"].get<int64_t>(),
           t["ops"]["after"].get<int64_t>(), t["compile_seconds"]["before"].get<double>() * 1e3, t["compile_seconds"]["after"].get<double>() * 1e3);
  if (!j["fail_on"].empty()) {
    if (j["failed"].empty()) s += "diff: ok\n";
    else {
      s += "diff: FAILED (";
      std::string sep;
      for (const json& f : j["failed"]) s += sep + f.get<std::string>(), sep = ", ";
      s += ")\n";
    }
  }
  return s;
}

}  // namespace dv::diff
