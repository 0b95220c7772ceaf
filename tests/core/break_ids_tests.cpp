// The graph-break table (core/break_ids.inc): well formed, ids checked at compile time, and the
// reports (explain, check, stats) showing each id's title, an unknown id as itself.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <filesystem>
#include <set>

#include "core/break_ids.h"
#include "core/reports.h"
#include "core/trace.h"

using namespace dv;
using nlohmann::json;

// A literal names an entry when it compiles (a literal not in the table is a compile error: see
// tests/compile_fail/break_id_unknown.cpp, which CTest compiles expecting failure).
static_assert(breaks::BreakId("DV0002").title() == "data-dependent control flow");
static_assert(breaks::BreakId("DV0022").id() == "DV0022");
static_assert(std::string_view("DV0022") == breaks::BreakId("DV0022"));
static_assert(breaks::find("DV9999") == nullptr && breaks::title("GB0059").empty());

TEST_CASE("the break table is well formed", "[break_ids]") {
  std::set<std::string_view> seen;
  int n = 0;
  for (const breaks::BreakInfo& b : breaks::table()) {
    ++n;
    INFO(b.id);
    // DV0001, DV0002, ... in order, none skipped (ids are never reused or renumbered)
    char want[8];
    std::snprintf(want, sizeof want, "DV%04d", n);
    CHECK(b.id == want);
    CHECK(seen.insert(b.id).second);
    CHECK(!b.title.empty());
    CHECK(!b.hint.empty());
    for (std::string_view text : {b.title, b.hint}) {
      CHECK(text.find('|') == std::string_view::npos);  // a Markdown table cell
      CHECK(text.find('\n') == std::string_view::npos);
      CHECK(text.back() != '.');
    }
    CHECK(breaks::find(b.id) == &b);
  }
  CHECK(n >= 24);
  const std::string md = breaks::markdown_table();
  for (const breaks::BreakInfo& b : breaks::table())
    CHECK(md.find("| `" + std::string(b.id) + "` | " + std::string(b.title) + " | " + std::string(b.hint) + " |\n") != std::string::npos);
}

TEST_CASE("reports show each break id's title; an unknown id shows as itself", "[break_ids][reports]") {
  namespace fs = std::filesystem;
  const std::string path = (fs::temp_directory_path() / ("dv_break_ids_" + std::to_string(getpid()) + ".dyn")).string();
  {
    auto w = trace::TraceWriter::create(path, {{"test", true}}, {});
    REQUIRE(w);
    auto brk = [&](int c, const char* id) {
      (*w)->event({{"t", "break"}, {"c", c}, {"break_id", id}, {"message", std::string("m ") + id}, {"hint", "h"}, {"filename", "f.py"},
                   {"line", 3}, {"offset", 4}, {"step", -1}, {"stack", json::array()}});
    };
    (*w)->event({{"t", "compile_start"}, {"c", 0}, {"id", "0/0"}, {"qualname", "f"}});
    brk(0, "DV0002");
    brk(0, "DV9999");  // an id of a newer dynview
    (*w)->event({{"t", "compile_end"}, {"c", 0}, {"outcome", "graph"}});
    (*w)->event({{"t", "compile_start"}, {"c", 1}, {"id", "1/0"}, {"qualname", "g"}});
    brk(1, "DV0002");
    brk(1, "");  // an imported TORCH_TRACE break without a GBnnnn link
    (*w)->event({{"t", "compile_end"}, {"c", 1}, {"outcome", "graph"}});
    REQUIRE((*w)->close());
  }
  auto r = trace::TraceReader::open(path);
  REQUIRE(r);
  const json e = reports::explain(**r);
  CHECK(e["compiles"][0]["breaks"][0]["title"] == "data-dependent control flow");
  CHECK(e["compiles"][0]["breaks"][1]["title"] == "");
  CHECK(e["breaks_by_id"][0] == json{{"break_id", "DV0002"}, {"title", "data-dependent control flow"}, {"count", 2}});
  CHECK(e["breaks_by_id"].size() == 3);
  const std::string text = reports::explain_text(e);
  CHECK(text.find("graph break DV0002 (data-dependent control flow): m DV0002\n") != std::string::npos);
  CHECK(text.find("graph break DV9999: m DV9999\n") != std::string::npos);
  CHECK(text.find("graph break (no id): m \n") != std::string::npos);
  CHECK(text.find("graph breaks by id:\n     2  DV0002   data-dependent control flow\n") != std::string::npos);

  const json c = reports::check(**r, {});
  CHECK(c["breaks_by_id"] == e["breaks_by_id"]);
  CHECK(reports::check_text(c).find("DV0002   data-dependent control flow") != std::string::npos);
  const json s = reports::stats(**r, 0);
  CHECK(s["breaks_by_id"] == e["breaks_by_id"]);
  CHECK(reports::stats_text(s).find("breaks     2 x DV0002 (data-dependent control flow)\n") != std::string::npos);
  CHECK(reports::stats_text(s).find("1 x DV9999\n") != std::string::npos);
  fs::remove(path);
}
